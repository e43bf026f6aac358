// Package notify delivers run notifications (the job document's
// "notify") for the partitions a member owns: one Deliverer per member,
// one Outbox per owned partition.
//
// The partition's owner writes each notification into etcd in the fenced
// transaction that gives the run its status (package dispatch), with the
// run document stored once for all the notifications of that status; it
// hands them to its Outbox, which the Deliverer delivers from, and which
// deletes them (through the partition's Store, fenced on the owner's
// epoch) once delivered, given up or dropped.
//
// Deliveries are scheduled fairly: round robin over destinations (the
// scheme, host and port of a URL), and within a destination round robin
// over jobs, never in key order; at most Config.Concurrency are in flight
// on the member, Config.PerDestination to one destination and
// Config.PerJob for one job, so that a destination that never answers
// holds at most PerDestination slots (and one job at most PerJob) for at
// most Config.SendTimeout each. Each destination has a circuit breaker:
// after Config.BreakerFailures failed tries in a row it opens, nothing is
// sent there for a back-off (Config.BreakerBackoff, longer after each
// failed probe), then one probe is: a success closes it.
//
// # Guarantees
//
//   - At least once for what is kept: a notification is tried until its
//     URL answers 2xx, its destination policy refuses it
//     (ErrRefused), Config.MaxAge passes from the status it reports, or it
//     is dropped; it is deleted only after one of these, and a
//     notification whose deletion failed is deleted again, not sent
//     again, for as long as the partition is owned here. The next owner
//     delivers what is still in etcd.
//   - A slow or dead destination delays only its own notifications: the
//     slots it can hold are bounded, its circuit opens, and other
//     destinations take their turns in between.
//   - Each job has at most Config.MaxPendingPerJob pending notifications
//     in an Outbox: beyond it the oldest are dropped, deleted and counted
//     (jobfleet_notifications_total{result="dropped"}).
//   - Every goroutine belongs to the Deliverer: Run returns, and Close an
//     Outbox, only after their sends and deletions have returned.
//
// # Not guaranteed
//
//   - Exactly once: a notification delivered whose deletion never applied
//     (the partition moved first) is delivered again by the next owner;
//     receivers de-duplicate on run ID, event and attempt.
//   - Order: notifications of one job may arrive out of order (retries,
//     and tries to different destinations, interleave).
//   - Delivery at the instant a notification becomes due: a notification
//     whose destination's circuit is open waits for the circuit, and one
//     past its max age behind an open circuit is given up at the
//     circuit's next turn.
package notify
