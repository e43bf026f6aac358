//go:build !linux

package rebalance

import "time"

// threadCPU returns wall-clock time: this platform's thread CPU clock is
// not read.
func threadCPU() time.Duration { return wallSinceStart() }
