//go:build !race

package shard_test

// raceEnabled: the race detector is off.
const raceEnabled = false
