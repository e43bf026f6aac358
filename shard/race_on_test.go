//go:build race

package shard_test

// raceEnabled: the race detector is on. The ring's exhaustive tests, one
// goroutine of pure arithmetic that it has nothing to find in and slows
// some twenty times, skip (skipUnderRace); test.sh runs them without it.
const raceEnabled = true
