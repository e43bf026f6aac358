// Package dispatch turns owned partitions into fired runs and hands the runs
// to workers.
//
// For each partition the member owns, a scheduler loads the partition's
// jobs, follows spec changes, fires due jobs and manual triggers in
// batched, fenced transactions (a run is created only if absent, so each
// (job, scheduled time) fires at most once), and applies the misfire policy
// to times missed while the partition had no owner. Runs wait in the
// partition's queue until a worker polls; each attempt is recorded (fenced)
// before it is handed out, held under a run lease the worker extends by
// heartbeat, retried with exponential backoff and jitter when it fails or
// its lease expires, and marked dead when no attempt remains. Reports from
// stale attempts are refused.
//
// The decisions are pure functions of a job, its state, its active runs
// and the time (plan.go: PlanFires, PlanTrigger, CapActive, MergePlans,
// FinishAttempt, Backoff, LeaseExpired); the partition scheduler applies
// them and writes their results.
//
// # Guarantees
//
//   - Every write of a partition's scheduler is fenced on its epoch and
//     applies in the order it was decided (one writer at a time per
//     partition). Writes decided from a version of a job (its fires, its
//     state, its deletion) apply only while its spec and its pause key
//     (store.PauseKey) are still at the revisions they were decided from:
//     a fire decided before a pause or resume that lands first is refused.
//   - Heartbeats and metrics are answered from memory: they never wait for
//     etcd, even while a write of the partition does.
//   - What a partition stores is bounded: at most Config.MaxActivePerJob
//     active runs per job (fires and triggers beyond are recorded skipped);
//     final runs trimmed to each job's count and age and to the
//     partition's share of Config.HistoryBudget (the job storing the most
//     beyond its floor first, its oldest runs first); each run document
//     within Config.MaxRunBytes; finished one-off jobs deleted after their
//     retention; each job's pending notifications bounded (package
//     notify), its run document stored once per status, and deleted with
//     the job's data. Active runs are never trimmed.
//   - Each job keeps its floor whatever the other jobs of its partition
//     store: its newest Config.HistoryFloor final runs and its newest dead
//     run (with its failing-runs index entry, for as long as that entry is
//     kept) are never trimmed for the budget; only its own count and age
//     limits take them.
//   - A run's notifications are written in the fenced transaction that
//     gives the run its status, delivered by package notify from the
//     partition's outbox, and deleted fenced on the owner's epoch; the
//     next owner delivers what is left.
//   - A replaced run's running attempt is recorded as cancelled and its
//     worker told so at its next heartbeat.
//   - A write whose outcome the scheduler does not know (the request timed
//     out, was cut, lost its connection or its leader) is never taken as
//     refused. Memory is not trusted for the keys it wrote: a run whose
//     next compare-and-swap write finds it changed, or whose create finds
//     it existing, is read again and kept if not final (only the owner
//     writes its runs, so the change was its own write); an attempt whose
//     write failed so is read again and, if recorded, taken back, since
//     the worker never got it. Deletions and state writes are idempotent
//     and retried.
//   - A partition built from a warm standby copy (package
//     dispatch/standby, wired by Dispatcher.NewStandby) is the
//     partition a load from etcd would build at the copy's revision: the
//     copy is taken only once its watch has delivered every change up to
//     the ownership's epoch, and both go through one load function; any
//     doubt loads from etcd.
//   - Writes made for a worker's request (an attempt handed out, a result,
//     a take-back) run under the partition's context, not the request's:
//     a worker that goes away mid-request does not cut them. Nor does any
//     caller cut a write batched with other partitions' (the committer
//     sees a sent batch through under its own timeout). Attempts a
//     poll recorded but could not deliver (its worker gone) are taken back
//     by the partition's loop, fenced, and retried until done or moot.
//
// # Not guaranteed
//
//   - Execution is at least once: a worker whose report never arrives has
//     its attempt retried. An attempt whose poll answer never reached its
//     worker, or whose take-back never applied (ownership moved first), is
//     lost with its lease and retried as a new attempt.
//   - A write of unknown outcome may still apply after later writes of its
//     partition. Run writes are compare-and-swap on the run's revision, so
//     such a late write cannot overwrite a newer run; a late job state
//     write may set the state back, which costs no duplicate run (runs are
//     created only if absent).
//   - The history budget holds for final runs beyond the floors: active
//     runs' documents and the floors count toward it but are never deleted
//     to meet it, so a partition whose jobs' floors alone exceed its share
//     stays above it (by at most its jobs × (HistoryFloor + 1) run
//     documents).
//   - A replacement's cancellation reaches the worker only from the member
//     that made it; after a handoff the new owner answers the worker's
//     heartbeat 409, on which it stops too.
//
// The worker protocol's HTTP/JSON documents are package api's
// (api/protocol.go); the names this package used to declare for them
// (PollRequest, AttemptGrant, MaxOutputBytes, …) are deprecated aliases,
// kept for one release (aliases.go).
package dispatch
