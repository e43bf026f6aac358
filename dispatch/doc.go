// Package dispatch turns owned partitions into fired runs and hands the runs
// to workers.
//
// For each partition the member owns, a scheduler loads the partition's
// jobs, follows spec changes, fires due jobs in batched, fenced
// transactions (a run is created only if absent, so each (job, scheduled
// time) fires at most once), and applies the misfire policy to times missed
// while the partition had no owner. Runs wait in the partition's queue until
// a worker polls; each attempt is recorded (fenced) before it is handed out,
// held under a run lease the worker extends by heartbeat, retried with
// exponential backoff and jitter when it fails or its lease expires, and
// marked dead when no attempt remains. Reports from stale attempts are
// refused.
//
// protocol.go defines the worker protocol's HTTP/JSON documents.
package dispatch
