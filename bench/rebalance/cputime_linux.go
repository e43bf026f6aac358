package rebalance

import (
	"time"

	"golang.org/x/sys/unix"
)

// threadCPU returns the CPU time the calling OS thread has used
// (CLOCK_THREAD_CPUTIME_ID); the caller locks itself to its thread. Time
// the thread spends waiting for a core does not count, so the figure holds
// on a busy machine.
func threadCPU() time.Duration {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_THREAD_CPUTIME_ID, &ts); err != nil {
		return wallSinceStart()
	}
	return time.Duration(ts.Nano())
}
