package worker

import (
	"fmt"

	"golang.org/x/sys/unix"
)

// protectFromShellJobs makes this process non-dumpable (prctl
// PR_SET_DUMPABLE 0): processes of the same user, such as the worker's
// shell jobs, can then no longer read its /proc/<pid>/environ, memory or
// file descriptors, nor attach to it with ptrace. Root still can. It
// applies to the whole process and is never undone.
func protectFromShellJobs() error {
	if err := unix.Prctl(unix.PR_SET_DUMPABLE, 0, 0, 0, 0); err != nil {
		return fmt.Errorf("prctl(PR_SET_DUMPABLE, 0): %w", err)
	}
	return nil
}
