//go:build !linux

package failover

import "syscall"

// sysProcAttr adds nothing: children outlive a crash of this process here.
func sysProcAttr() *syscall.SysProcAttr { return nil }
