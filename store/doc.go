// Package store holds jobfleet's job and run documents and their storage.
//
// This file documents the job model (job.go, job_decode.go,
// job_normalize.go, job_validate.go, job_validate_executor.go, job_id.go):
// the Job, Executor, RetryPolicy, Run and Attempt types that are the JSON
// contract of the HTTP API and the values stored in etcd, and the pure
// functions that decode, default and validate them. The model does no I/O
// beyond reading the io.Reader given to DecodeJob.
//
// # Guarantees
//
//   - DecodeJob accepts exactly one JSON object of bounded size whose field
//     names are spelled exactly as in the document (no unknown, differently
//     cased or repeated fields) and rejects trailing data.
//   - Validate accepts a job only if every field is usable: the schedule
//     parses and fires at least once (see package schedule), the
//     time zone exists, durations and attempts are within bounds, the
//     executor is complete for its type and carries no fields of another
//     type, and payloads are valid JSON within Limits. Every rejection is a
//     *FieldError naming the field in the document's terms
//     ("retry.max_backoff: 2h is longer than ..."), and matches
//     ErrInvalidJob. Validate never modifies the job.
//   - Normalize is idempotent and fills every default, so a normalized,
//     valid job reads back with no field left implicit; except history and
//     delete_after, whose empty values mean the fleet's defaults (the
//     orchestrators' flags) so that changing those reaches existing jobs.
//   - FitRun keeps a run document within a byte budget by cutting its
//     attempts' outputs and errors, never their number or other fields.
//   - Job IDs are free-form UTF-8 (spaces, '/', '%', any printable Unicode)
//     of 1 to MaxIDBytes bytes, without control characters; "." and ".."
//     are refused because they cannot be addressed in a URL path.
//     EscapeID maps every string to a key segment without '/', and
//     UnescapeID(EscapeID(id)) == id for every string.
//   - Secrets need not be stored: an "http" executor's header value
//     (HeaderValue), and any value in the payload or the body, may be a
//     secret reference {"secret_env": "NAME"} that workers resolve
//     (ResolveSecretRefs); Validate checks every reference's name.
//     Documents keep each value's form exactly (string or reference).
//     Job.Redacted hides literal header values from readers without write
//     access. URLs carrying user:password are refused.
//   - Pausing and resuming a job (Etcd.SetPaused) write its pause key, a
//     few dozen bytes beside its spec (pause.go), never its document;
//     every read shows the job's Paused, UpdatedAt and Revision with the
//     key applied while it is newer than the document, so a document read
//     before a pause is stale for a conditional Put. Above the high-water
//     mark (Etcd.WithGuard) a replacement is written only if it shrinks
//     the job's document.
//
// # Defaults
//
// Timezone "UTC"; retry.max_attempts 1 (no retry: cron jobs are not known
// to be idempotent, so retrying is opt-in); retry.initial_backoff 1s;
// retry.max_backoff 1m (or initial_backoff if larger); timeout 1h;
// concurrency_policy "allow"; misfire_policy "run_once"; an "http"
// executor's method "POST". Limits: payload and body 256 KiB each;
// DecodeJob reads at most 1 MiB unless told otherwise.
//
// # What it does not do
//
// The model does not set server-set fields (partition, created_at,
// updated_at, revision), does not check that a named handler is registered
// with any worker, and does not resolve or contact an executor's URL.
package store
