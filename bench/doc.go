// Package bench holds what jobfleet's benchmarks share: an embedded etcd
// to measure against (fsync on by default, as in production), etcd clients
// with an injected round-trip delay to model a store across a network,
// quantiles, and a progress display.
//
// The benchmarks themselves live in the sub-packages: bench/scaling (the
// sharded fleet against a global-lock and an uncoordinated design, and
// the store's own limit), bench/rebalance (ring movement and balance, and
// measured ownership gaps), with their output written by bench/report;
// bench/inprocfleet runs the in-process fleet of real orchestrators whose
// ownership bench/failover and bench/rebalance measure; bench/procfleet
// runs the fleet of orchestrator and worker processes, with an endpoint
// for their jobs, that bench/items, bench/steps and bench/limits measure.
// `jobfleet bench scaling` and `jobfleet bench rebalance` run them; see
// docs/benchmarks.md.
//
// What it does not promise: numbers from one machine are comparable with
// each other (same run, same etcd), not with another machine's. Every
// figure the reports quote as a headline is a ratio measured within one
// run.
package bench
