// Package chaos is jobfleet's fault-injection suite: it runs a real fleet
// as separate processes on loopback, injects faults into it while a
// workload runs, and checks the recorded history for the product's
// promises (the invariants of docs/ownership.md and docs/scheduling.md):
// every job has one owner at a time and every scheduled fire happens once,
// whatever fails.
//
// Run starts an etcd cluster (1 or 3 `jobfleet etcd` processes),
// orchestrators and workers (`jobfleet orchestrator`, `jobfleet worker`),
// and a recorder: the HTTP endpoint every job's executor posts to, which
// logs each execution with its Jobfleet-* headers. The workload creates
// every-second jobs (answered at once, slowly, or with injected failures),
// one-off jobs, payload updates, and bursts of creates, schedule changes,
// deletes and re-creations. A seeded nemesis injects, one at a time:
// SIGKILL and restart of an orchestrator, SIGSTOP longer than the lease TTL
// then SIGCONT, a drain and restart, a rolling restart of the whole fleet,
// SIGKILL of a worker holding a slow attempt, SIGKILL of the etcd leader,
// a full etcd restart, and job bursts while partitions move; it measures
// each fault's recovery.
//
// Meanwhile a watch of the fleet's etcd namespace records every spec, run
// document and owner key write. Check, a pure function of that history, the
// recorder's log, the workload's accepted writes and the faults, reports
// per fault kind: fires expected and recorded, duplicate fires, duplicate
// executions of an attempt, fires missed outside the windows the misfire
// policy allows, stale attempt reports accepted, accepted jobs missing at
// the end, and the failover times. docs/reliability.md defines each check.
//
// What it does not do: it cannot make a timing-dependent bug happen on
// demand (the seed fixes the nemesis's choices, not the fleet's timing),
// it runs every process on one machine and one clock, and it injects no
// network partitions (the processes share loopback). The unit tests of
// package shard and membership cut connections with a TCP bridge instead.
//
// `jobfleet bench chaos` runs it from the command line; the short runs of
// its tests are part of `go test ./...` (skipped with -short).
package chaos
