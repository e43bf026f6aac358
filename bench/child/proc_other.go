//go:build !linux

package child

import "syscall"

// sysProcAttr sets nothing: only Linux kills a child when its parent dies.
func sysProcAttr() *syscall.SysProcAttr { return &syscall.SysProcAttr{} }
