package chaos

import "syscall"

// sysProcAttr puts the child in its own process group (so that signals
// reach all of it) and has the kernel kill it if the harness dies first.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}
