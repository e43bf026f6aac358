//go:build !race

package e2e_test

// raceEnabled: the race detector is off; with it, its instrumentation makes every
// goroutine, etcd's in this process included, several times slower.
const raceEnabled = false
