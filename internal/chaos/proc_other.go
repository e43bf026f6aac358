//go:build unix && !linux

package chaos

import "syscall"

// sysProcAttr puts the child in its own process group so that signals
// reach all of it.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true}
}
