package items

import "syscall"

// sysProcAttr has the kernel kill a child if the bench dies first.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
