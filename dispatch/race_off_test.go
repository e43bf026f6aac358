//go:build !race

package dispatch

// raceEnabled: the race detector is on (its instrumentation changes what
// allocations cost and makes loading many jobs slow).
const raceEnabled = false
