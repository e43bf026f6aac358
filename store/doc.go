// Package store keeps jobfleet's jobs and runs in etcd: the key layout
// (Keys), the API side of storage (Etcd: create, replace at a revision,
// list by pages, delete, pause, resume, trigger, batches, the failing-runs
// index), the owner's write operations that package dispatch wraps in
// fenced transactions (CreateRunOp, UpdateRunOp, FailingOps, …), the run
// document budget (FitRun) and the notification outbox.
//
// The documents it stores (Job, Run, Attempt, Duration, …) and their
// validation are package api's; the names this package used to declare
// for them are kept as deprecated aliases for one release (aliases.go).
//
// # Guarantees
//
//   - A job is stored only if Normalize and Validate (package api) accept
//     it, and is durable in etcd when Create, Put or WriteBatch returns.
//   - Create never replaces (ErrExists), and a Put naming a Revision
//     replaces only the job of that revision (ErrStaleRevision
//     otherwise), so two edits of one job cannot silently lose one.
//   - A batch (WriteBatch) is one etcd transaction: all of its jobs are
//     written, or none (the valid ones fail with ErrBatchAborted).
//   - A store WithGuard refuses, with its guard's error (ErrHighWater,
//     ErrNoSpace), writes that would grow etcd's database, so that firing
//     can go on.
//   - Every accepted trigger gets a run of its own (Trigger).
//   - FitRun keeps a run document within a byte budget by cutting its
//     attempts' outputs and errors, never their number or other fields.
//   - Pausing and resuming a job (Etcd.SetPaused) write its pause key, a
//     few dozen bytes beside its spec (pause.go), never its document;
//     every read shows the job's Paused, UpdatedAt and Revision with the
//     key applied while it is newer than the document, so a document read
//     before a pause is stale for a conditional Put. Above the high-water
//     mark (Etcd.WithGuard) a replacement is written only if it shrinks
//     the job's document.
//
// # Not guaranteed
//
// The owner's writes (state, runs, queue, failing index, outbox) are
// made by package dispatch, fenced on its epoch; this package only
// builds their operations. Reads are not linearized with those writes
// beyond what one etcd read gives.
package store
