// Package e2e holds end-to-end tests of jobfleet: a fleet of orchestrators
// running the real scheduler, real workers, and an HTTP receiver that
// records every execution, against a real embedded etcd. It has no
// non-test code.
package e2e
