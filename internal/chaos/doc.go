// Package chaos is jobfleet's fault-injection suite: it runs a real fleet
// as separate processes, on loopback or each on a host of its own (a
// Linux network namespace), injects faults into it while a workload runs,
// and checks the recorded history for the product's promises: every job
// has one owner at a time and every scheduled fire happens once, whatever
// fails.
//
// Run starts an etcd cluster (1 or 3 `jobfleet etcd` processes),
// orchestrators and workers (`jobfleet orchestrator`, `jobfleet worker`),
// and a recorder: the HTTP endpoint every job's executor posts to, which
// logs each execution with its Jobfleet-* headers. The workload creates
// every-second jobs (answered at once, slowly, or with injected failures),
// one-off jobs, payload updates, and bursts of creates, schedule changes,
// deletes and re-creations; and, while the faults last, a noisy tenant (a
// scoped operator and a scoped worker flooding the fleet with writes,
// noisy.go). A seeded nemesis injects, one at a time:
// SIGKILL and restart of an orchestrator, SIGSTOP longer than the lease TTL
// then SIGCONT, a drain and restart, a rolling restart of the whole fleet,
// SIGKILL of a worker holding a slow attempt, SIGKILL of the etcd leader,
// a full etcd restart, job bursts while partitions move, and a clock
// offset of several seconds on one orchestrator (through the hidden
// --test-clock-offset-file, see internal/skewclock); it measures each
// fault's recovery.
//
// With Config.Hosts every etcd member, orchestrator and worker runs in a
// network namespace of its own (started with `ip netns exec`), and so do
// the recorder and the harness's clients. The namespaces are joined by a
// switch in the harness: a TUN device per host, whose packets the harness
// forwards by directed link rules (down, delay and jitter, loss), because
// the kernels this runs on need not have netem or netfilter tools. Only
// packets between the run's own hosts (10.213.0.0/24) are forwarded, so
// nothing leaves them. The network faults: a host isolated, the fleet
// split in halves, an orchestrator cut from etcd (both ways or one), a
// worker cut from the orchestrator of an attempt it holds, the etcd
// leader cut from its followers, slow and lossy links. Namespaces are
// named jfnet-<pid>-<run>-<host>; a run deletes them when it ends and
// deletes those of runs whose process is gone when it starts.
//
// Meanwhile a watch of the fleet's etcd namespace records every spec, run
// document and owner key write. Check, a pure function of that history, the
// recorder's log, the workload's accepted writes and the faults, reports
// per fault kind: fires expected and recorded, duplicate fires, duplicate
// executions of an attempt, fires missed outside the windows the misfire
// policy allows, fires earlier than the firing member's clock offset
// allows, stale attempt reports accepted (also from workers cut off while
// their attempt was reassigned), accepted jobs missing at the end, the
// noisy tenant's requests refused for lack of space in etcd, and the
// recovery times. docs/reliability.md defines each check.
//
// What it does not do: it cannot make a timing-dependent bug happen on
// demand (the seed fixes the nemesis's choices, not the fleet's timing),
// it runs every process on one machine (a clock offset is the product's
// injected clock, not the host's), and without Hosts it injects no
// network faults (the processes share loopback).
//
// `jobfleet bench chaos` runs it from the command line; the short runs of
// its tests are part of `go test ./...` (skipped with -short).
package chaos
