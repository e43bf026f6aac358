package scale

import "syscall"

// sysProcAttr has the kernel kill a member if the bench dies first.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
