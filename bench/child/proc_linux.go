package child

import "syscall"

// sysProcAttr has the kernel kill a child if the benchmark dies first.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
