// Package procfleet runs the fleet of processes the multi-process
// benchmarks measure: an embedded etcd in this process, N `jobfleet
// orchestrator` and M `jobfleet worker` child processes of one binary on
// loopback (bench/child), an admin credential for the benchmark's API
// calls and a worker credential for the workers, and an HTTP endpoint in
// this process, the Receiver, that the jobs' http executors call: it
// answers each request after a fixed time and records when it came and
// when it answered.
//
// Start brings the fleet up and returns once every orchestrator is ready
// and every partition is owned by the member the ring assigns it to;
// Fleet.WaitWorkers waits for the workers' registrations. Stop stops the
// children (SIGTERM, then SIGKILL after 10 s), the endpoint, the etcd
// client and etcd, and is idempotent.
//
// Guarantees: the children are configured by their arguments only (no
// JOBFLEET_* variable is inherited) and, on Linux, die with this process;
// every worker is told every orchestrator's URL (--orchestrators); the
// Receiver records every request, answered or aborted by its caller.
// Not guaranteed: that the figures a benchmark draws from the fleet hold
// on another machine, or on this one under another load.
package procfleet
