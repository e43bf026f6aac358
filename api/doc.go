// Package api holds every document of jobfleet's HTTP API and worker
// protocol, declared once and shared by the server (packages admin,
// dispatch, store, auth, membership), the Go client (package client), the
// worker library (package dispatch/worker), the CLI, the tests and the
// benchmarks:
//
//   - the job and run model: Job, Executor, RetryPolicy, HistoryPolicy,
//     Notification, JobState, Run, Attempt, RunStatus, FailingRun and
//     Duration, with the pure functions that decode, default and
//     validate them (DecodeJob, Job.Normalize, Job.Validate, Limits,
//     FieldError, ErrInvalidJob), job IDs (ValidateID, EscapeID,
//     UnescapeID), secret references (HeaderValue, ResolveSecretRefs,
//     Job.Redacted) and fire-time previews (Job.NextFires, PreviewFires);
//   - the input rules every document shares: the strict decoder of every
//     request body (Unmarshal, CheckJSON, DecodeError), the rule of names
//     (ValidateName, ValidateNameText) and of URLs (ValidateURL,
//     CheckPort);
//   - the worker protocol (protocol.go): its paths, PollRequest,
//     PollResponse, AttemptGrant, HeartbeatRequest, CompleteRequest,
//     RegisterRequest and their responses, NotOwner, MaxPollWait,
//     MaxOutputBytes and DefaultWorkerTTL; and Worker, a worker's
//     registration as GET /v1/cluster/workers lists it;
//   - the member view (View, Member), the credential documents and roles
//     (Token, CreateRequest, Created, TokenList, Role, Access);
//   - the replies of the cluster and job routes: the partition table,
//     placement, overview and partition stream, the job, run and failing
//     run lists, batches, next fires, the storage report, and the error
//     document.
//
// It imports nothing of the server: no etcd, no gRPC, nothing of the
// module but package schedule (pure cron parsing). A program that reads
// the API or embeds a worker links none of the server's dependencies (a
// test in internal/testkit/layering checks that go list -deps of api,
// client, dispatch/worker and egress lists no go.etcd.io and no
// google.golang.org/grpc), and anyone can implement admin.Member outside
// this module.
//
// The documents used to live with the packages that use them; store,
// dispatch, membership and auth keep type aliases and forwarding
// declarations of the old names (store.Job, dispatch.PollRequest,
// membership.View, auth.Token, …), marked Deprecated, for one release, so
// that programs written against them keep compiling.
//
// JSON field names are the wire contract: they do not change when a Go
// name does.
//
// # Guarantees
//
//   - Unmarshal, and DecodeJob on top of it, accept exactly one JSON value
//     (rejecting trailing data) whose keys appear once in every object at
//     any depth, payloads included, whose struct fields are spelled
//     exactly as in the document (no unknown or differently cased
//     fields), whose values have the kinds of their Go types, and whose
//     text is UTF-8 without unpaired surrogate escapes; every refusal
//     names the value's path ("notify[1].headers: duplicate key \"X-A\"").
//     What they accept decodes exactly as encoding/json decodes it.
//   - DecodeJob refuses a zero given explicitly where leaving the field
//     out means a default ("timeout": "0s").
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
//   - Job IDs are free-form UTF-8 (spaces, '/', '%', any printable Unicode)
//     of 1 to MaxIDBytes bytes that follow the rule of names
//     (ValidateName): no control, format, private-use, unassigned,
//     invisible or blank characters, no variation selectors, no combining
//     mark without a letter, NFKC, no word mixing scripts; "." and ".."
//     are refused because they cannot be addressed in a URL path.
//   - Time zones are saved only under names of the IANA database as Go
//     ships it (schedule.CheckZoneName); URLs only with ports 1 to 65535.
//     EscapeID maps every string to a key segment without '/', and
//     UnescapeID(EscapeID(id)) == id for every string.
//   - Secrets need not be stored: an "http" executor's header value
//     (HeaderValue), and any value in the payload or the body, may be a
//     secret reference {"secret_env": "NAME"} that workers resolve
//     (ResolveSecretRefs); Validate checks every reference's name.
//     Documents keep each value's form exactly (string or reference).
//     Job.Redacted hides literal header values from readers without write
//     access. URLs carrying user:password are refused.
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
// # Not guaranteed
//
// The model does not set server-set fields (partition, created_at,
// updated_at, revision), does not check that a named handler is registered
// with any worker, and does not resolve or contact an executor's URL.
// The package does no I/O beyond reading the io.Reader given to
// DecodeJob. The worker protocol's requests carry fields that are not
// part of their JSON (Credential, Prefix): a server sets them from the
// request's credential, and this package does not check them.
package api
