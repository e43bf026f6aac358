// Package e2e holds end-to-end tests of jobfleet: a fleet of orchestrators
// running the real scheduler, real workers, and an HTTP receiver that
// records every execution, against a real embedded etcd. It has no
// non-test code.
//
// Each test's fleet has a namespace of its own in the package's one etcd.
// The tests that mostly wait (out a lease after a crash, for a schedule's
// next seconds) call t.Parallel and run beside each other, as many at once
// as go test's -parallel (GOMAXPROCS by default); the tests that measure
// the fleet against the clock under load (the noisy tenants, the herd,
// rate limits and priorities) run alone.
package e2e
