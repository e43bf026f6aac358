package rebalance

import "time"

var processStart = time.Now()

// wallSinceStart is the fallback of threadCPU where the thread's CPU time
// cannot be read: wall-clock time.
func wallSinceStart() time.Duration { return time.Since(processStart) }
