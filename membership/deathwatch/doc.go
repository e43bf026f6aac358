// Package deathwatch notices fleet members whose process died and revokes
// their lease at once, so that their partitions move within a second
// instead of after the lease's TTL.
//
// A Detector runs on every member. For each other member of the view it
// probes the registration's advertised address (host:port of its URL)
// with a TCP connect every Config.Interval, and holds the last connection
// that succeeded open in between: when the member's process dies, its
// kernel closes that connection (a FIN or a reset arrives at once) and
// the detector probes again without waiting. While it holds one, it
// probes ten times less often. The
// evidence rule:
//
//   - a probe refused (ECONNREFUSED: the host answered that nothing
//     listens on the port) is evidence; a timeout, an unreachable host or
//     network, a failed name lookup are not, and end a streak of
//     refusals;
//   - only for a registration this detector has reached before (a probe
//     of the same lease succeeded): an address that never accepted (a
//     wrong --advertise, a firewall that rejects) proves nothing;
//   - confirmed by a second refusal at least Config.Confirm after the
//     first, with nothing else in between.
//
// Then it revokes the registration's lease, if the registration still
// carries that lease (a transaction compares the registration's lease
// first): the registration and the dead member's owner keys, bound to
// the lease, are deleted in one revision, the others rebalance as after
// a graceful leave's deregistration, and the owners-to-be acquire the
// partitions through the normal path (create if absent), so release
// before acquire holds.
//
// # Guarantees
//
//   - A lease is revoked only after two refusals at its registration's
//     address, Config.Confirm apart, by a detector that had reached that
//     address under that same lease; and only while the registration
//     still carries it. A member restarted with a new lease (on the same
//     address or not) is never revoked for its predecessor's death: the
//     detector's evidence and its revocation name one lease.
//   - A paused process (SIGSTOP), a slow one, or one cut off from its
//     peers is not revoked: its listening socket stays open, so connects
//     to it succeed (into its accept queue) or time out, but are never
//     refused. Its lease expires as it always did.
//   - Run's goroutines stop when its context ends; Run returns after.
//
// # Not guaranteed
//
//   - Detection: a death is noticed only while a peer's detector runs and
//     reaches the member's address; a host that dies (no kernel left to
//     refuse), a process whose port another process took over, or an
//     address behind a proxy or load balancer that keeps accepting all
//     fall back to the lease's TTL.
//   - A refusal from something other than the member's host (a firewall
//     that starts rejecting after it had let probes through, a proxy that
//     went down) revokes a live member. It then fences itself (its
//     registration gone, its keepalive refused, its writes fenced on
//     owner keys that no longer exist) and registers again; no invariant
//     breaks, but its partitions move twice. docs/ownership.md analyses
//     these cases.
package deathwatch
