package api

import (
	"encoding/json"
	"slices"
	"time"
)

// The worker protocol: HTTP/JSON between workers and orchestrators. Every
// orchestrator serves these endpoints, but only for runs of partitions it
// owns.
//
//	POST /v1/worker/poll       PollRequest      → 200 PollResponse (long poll; empty Attempts after Wait)
//	POST /v1/worker/heartbeat  HeartbeatRequest → 200 HeartbeatResponse
//	POST /v1/worker/complete   CompleteRequest  → 200 CompleteResponse
//	POST /v1/worker/register   RegisterRequest  → 200 RegisterResponse
//	POST /v1/worker/deregister DeregisterRequest → 200 {}
//
// Errors are {"error": "..."} documents:
//
//	400 the request is malformed (the message names the field)
//	401 no valid credential; 403 the credential may not use the worker
//	    protocol, the attempt was handed to another credential, or the
//	    worker's labels are outside the credential's worker label selector
//	409 the attempt is stale: the run moved on (its lease expired and a new
//	    attempt was made, it was replaced, it completed); the worker must
//	    drop it and not retry the report. Also a registration, poll or
//	    deregistration under a worker ID bound to another credential (the
//	    message says until when); the worker needs another ID
//	421 this orchestrator does not own the run's partition: NotOwner says
//	    who does; the worker resends the request there
//	429 a registration beyond the credential's rate or worker count, with
//	    Retry-After
//	503 the orchestrator cannot decide now (starting, etcd unreachable); retry
//	507 etcd's database is full or above the fleet's high-water mark: a
//	    registration that needs storing is refused; retry later
//
// A worker polls every orchestrator it knows (from the members list, GET
// /v1/cluster/members, or a static list), since each hands out only the runs
// of its own partitions. Heartbeats and completions go to the orchestrator
// that handed the attempt out; after a handoff, that one answers 421 with
// the new owner.
//
// A worker also registers, with one orchestrator at a time, every third
// of the TTL the reply names (see package dispatch/workers): its
// registration is what GET /v1/cluster/workers lists and what tells the
// owners at once, not a run lease later, that a worker's attempts are
// lost.
const (
	PathPoll       = "/v1/worker/poll"
	PathHeartbeat  = "/v1/worker/heartbeat"
	PathComplete   = "/v1/worker/complete"
	PathRegister   = "/v1/worker/register"
	PathDeregister = "/v1/worker/deregister"
	// PathEndPolls ends a stopping worker's long polls: see
	// EndPollsRequest.
	PathEndPolls = "/v1/worker/poll:end"
	// PathPresence is the worker's presence stream: see PresenceHello.
	PathPresence = "/v1/worker/presence"
)

// PresenceHello opens a presence stream: a POST to PathPresence whose
// body is a stream of JSON values, one a line, that the worker keeps open
// for as long as it is registered with that orchestrator. The first line
// is a PresenceHello; then the worker sends a line ("{}") every
// PresenceTick. It ends the body properly (the last chunk of a chunked
// body) whenever it closes the stream on purpose: moving to another
// orchestrator, stopping. A body that ends without its end (the
// connection closed or reset) is what a dead process leaves, since its
// kernel closes its sockets: if the worker opens no new stream within a
// short grace, the orchestrator revokes its registration and its
// attempts are retried at once. The orchestrator answers at once: 200
// when it accepts the stream, with a reply body that ends ({}) when the
// stream does (so the worker learns at once that its connection failed,
// and opens a new stream within the grace); 409 when it knows no live
// registration of the worker by the stream's credential (register
// first); 404 when it is of a version without presence streams.
type PresenceHello struct {
	// Worker is the worker's ID, as it registered.
	Worker string `json:"worker"`
}

// PresenceTick is how often a worker sends a line on its presence
// stream; an orchestrator that receives none for three ticks takes the
// stream for silent (a paused worker, a cut network), which is no
// evidence of death.
const PresenceTick = time.Second

// DefaultWorkerTTL is how long a worker's registration lives without a
// refresh when the orchestrator is not told otherwise (RegisterResponse
// names the TTL it keeps). Workers refresh every third of it, so a worker
// is taken for dead after about two missed refreshes; its attempts are
// then retried at once instead of a run lease (30 s) later.
const DefaultWorkerTTL = 6 * time.Second

// MaxPollWait is the longest long-poll an orchestrator honours.
const MaxPollWait = 30 * time.Second

// Bounds of a RegisterRequest: what a registration stores is bounded by
// these, whoever sends it.
const (
	// MaxRegisterExecutors is the most executor types a registration
	// lists, and MaxExecutorBytes the longest executor type name.
	MaxRegisterExecutors = 64
	MaxExecutorBytes     = 64
	// MaxRegisterOrchestrators is the most orchestrator URLs a
	// registration lists, and MaxOrchestratorURLBytes the longest one.
	MaxRegisterOrchestrators = 8
	MaxOrchestratorURLBytes  = 256
	// MaxWorkerConcurrency is the largest concurrency a worker registers.
	MaxWorkerConcurrency = 1024
)

// MaxOutputBytes caps the output a worker reports per attempt; longer output
// is cut by the worker, which keeps its head and tail (and refused beyond
// it by the orchestrator).
const MaxOutputBytes = 64 << 10

// PollRequest asks for attempts to run.
type PollRequest struct {
	// Worker is the worker's ID (1..128 bytes of UTF-8 without control
	// characters), recorded in each attempt.
	Worker string `json:"worker"`
	// Executors are the executor types this worker runs: "http", "shell"
	// (only if started with --allow-shell), and handler names.
	Executors []string `json:"executors"`
	// Max is the number of attempts the worker can take now, 1..100.
	Max int `json:"max"`
	// Wait is how long to hold the request when nothing is ready, at most
	// MaxPollWait; 0 answers at once.
	Wait Duration `json:"wait,omitzero"`
	// Features are the parts of the protocol the worker speaks beyond
	// the first release's (FeatureItems). An orchestrator hands a worker
	// only attempts it can report: an item of a sharded or broadcast run
	// only to a worker that lists FeatureItems, so a worker of an earlier
	// release never sees one.
	Features []string `json:"features,omitempty"`
	// Free is the number of attempts the worker could start now in all
	// (its concurrency less the attempts it holds), at least Max; 0 (not
	// said) is taken as Max. Among the polls waiting at a member, runs go
	// to the one with the most free slots first (see docs/scheduling.md).
	Free int `json:"free,omitempty"`

	// Credential is the ID of the credential the poll was authenticated
	// with, recorded in each attempt it takes: only that credential may
	// heartbeat or complete the attempt. Prefix, if not empty, limits the
	// poll to runs of jobs whose ID starts with it (the credential's
	// scope). WorkerLabels is the credential's worker label selector: the
	// labels of the worker's registration must satisfy it. All three are
	// set by the HTTP layer from the request's credential, never from the
	// request body; the worker's labels come from its registration, never
	// from a poll.
	Credential   string `json:"-"`
	Prefix       string `json:"-"`
	WorkerLabels string `json:"-"`
}

// FeatureItems is the PollRequest feature of workers that take items of
// sharded and broadcast runs: they read AttemptGrant.Item and send its
// index back in HeartbeatRequest.Item and CompleteRequest.Item.
const FeatureItems = "items"

// HasFeature reports whether the poll lists feature f.
func (p *PollRequest) HasFeature(f string) bool { return slices.Contains(p.Features, f) }

// PollResponse hands attempts to a worker. Each attempt is recorded in
// etcd (fenced by the owner's epoch) before it is handed out.
type PollResponse struct {
	Attempts []AttemptGrant `json:"attempts"`
	// EtcdEndpoints are the client URLs of the fleet's etcd as the
	// answering member knows them (without user information), so that a
	// worker that was not given them, such as one started with
	// --orchestrators, still refuses to let an "http" job reach etcd.
	// Absent when the member does not say.
	EtcdEndpoints []string `json:"etcd_endpoints,omitempty"`
	// Written is the bytes of the run documents the poll's writes made
	// etcd store: set by the scheduler for the HTTP layer's write budget
	// (a run of items rewrites its whole document), never sent.
	Written int `json:"-"`
}

// AttemptGrant is one attempt handed to a worker: everything needed to run
// it, and the run lease under which it is held. (Not to be confused with a
// member's etcd lease, which keeps the member registered; or with
// api.PartitionRow, a partition's owner.)
type AttemptGrant struct {
	RunID       string          `json:"run_id"`
	JobID       string          `json:"job_id"`
	Attempt     int             `json:"attempt"`
	ScheduledAt time.Time       `json:"scheduled_at"`
	Executor    Executor        `json:"executor"`
	Payload     json.RawMessage `json:"payload,omitempty"`
	// Timeout bounds this attempt's execution; the worker cancels it then
	// and reports failure.
	Timeout Duration `json:"timeout"`
	// RunLease is how long the worker holds the attempt without a heartbeat;
	// it heartbeats every RunLease/3. After RunLease without one the attempt is
	// lost and retried.
	RunLease Duration `json:"lease"`
	// Owner and OwnerAddr identify the orchestrator that handed the
	// attempt out, where heartbeats and the completion go.
	Owner     string `json:"owner"`
	OwnerAddr string `json:"owner_addr"`
	// Item is the item of a sharded or broadcast run the attempt is for
	// (Attempt then numbers the item's attempts); nil for a run of one
	// item. Only workers that poll with FeatureItems get one.
	Item *ItemGrant `json:"item,omitempty"`
	// Limits are the limit keys whose slots the attempt holds: its worker
	// stops it once no heartbeat succeeded for a run lease (the owner may
	// then give the slots to another attempt).
	Limits []string `json:"limits,omitempty"`
	// Step is the step of a run made of steps the attempt runs (Item is
	// then its item of the run); nil otherwise.
	Step *StepGrant `json:"step,omitempty"`
	// Round is the run's round (Run.Round): 0 unless the run was started
	// again from a step.
	Round int `json:"round,omitempty"`
	// TraceParent is the W3C traceparent of the grant's span: the worker
	// continues the trace from it (its attempt's span, the http
	// executor's traceparent header, the shell executor's TRACEPARENT);
	// empty when the orchestrator is not tracing.
	TraceParent string `json:"traceparent,omitempty"`
}

// StepGrant is the step an attempt runs.
type StepGrant struct {
	// ID is the step's ID.
	ID string `json:"id"`
	// Shard and Shards are the attempt's shard of a sharded step (0 to
	// Shards-1) and the step's number of shards; Shards is 0 for a step
	// without shards.
	Shard  int `json:"shard,omitempty"`
	Shards int `json:"shards,omitempty"`
	// Needs is a JSON object of the results of the steps the step needs,
	// by step ID (a sharded step's: an array by shard; null for a step
	// that returned none); absent for a step that needs none.
	Needs json.RawMessage `json:"needs,omitempty"`
}

// ItemGrant is the item an attempt runs.
type ItemGrant struct {
	// Index is the item's index, 0 to Count-1.
	Index int `json:"index"`
	// Count is the run's number of items.
	Count int `json:"count"`
	// Param is the item's parameter (the job's shards.params[Index]),
	// absent if the job has none.
	Param json.RawMessage `json:"param,omitempty"`
}

// HeartbeatRequest extends an attempt's lease.
type HeartbeatRequest struct {
	Worker  string `json:"worker"`
	RunID   string `json:"run_id"`
	Attempt int    `json:"attempt"`
	// Item is the grant's Item.Index for an item's attempt, nil for a
	// run of one item.
	Item *int `json:"item,omitempty"`
	// Credential is the ID of the request's credential (set by the HTTP
	// layer, never from the body); it must be the one that took the
	// attempt.
	Credential string `json:"-"`
}

// HeartbeatResponse answers a heartbeat.
type HeartbeatResponse struct {
	// RunLease is the new lease, counted from now.
	RunLease Duration `json:"lease"`
	// Cancel asks the worker to stop the attempt: its run was replaced by a
	// newer one under concurrency_policy "replace" (recorded dead), was
	// cancelled (POST /v1/runs/{id}/cancel: recorded cancelled), or, for
	// an item's attempt, was decided without the item; the attempt is
	// recorded cancelled. The worker stops the executor and reports the
	// attempt as failed; that report is answered 200 with status
	// "cancelled" for a cancelled run, else "dead", and changes nothing. An
	// owner that took the partition over after the decision does not know
	// of it and answers 409 instead, on which the worker stops too.
	Cancel bool `json:"cancel,omitempty"`
}

// CompleteRequest reports an attempt's result.
type CompleteRequest struct {
	Worker  string `json:"worker"`
	RunID   string `json:"run_id"`
	Attempt int    `json:"attempt"`
	// Item is the grant's Item.Index for an item's attempt, nil for a
	// run of one item.
	Item *int `json:"item,omitempty"`
	// Success is true if the executor succeeded (2xx, exit status 0, nil
	// error from a handler).
	Success bool `json:"success"`
	// Error describes a failure. Like Output, it must be valid UTF-8
	// without control characters other than newline and tab (400
	// otherwise): workers escape the others (ESC as the four characters
	// \x1b).
	Error string `json:"error,omitempty"`
	// Output is the executor's output, at most MaxOutputBytes: all of it,
	// or its head and its tail with a marker in between saying how many
	// bytes were cut.
	Output string `json:"output,omitempty"`
	// Result is the JSON result of a step's attempt that succeeded (see
	// Step), at most MaxStepResultBytes (400 otherwise); ignored for other
	// attempts.
	Result json.RawMessage `json:"result,omitempty"`
	// Credential is the ID of the request's credential (set by the HTTP
	// layer, never from the body); it must be the one that took the
	// attempt.
	Credential string `json:"-"`
}

// CompleteResponse answers a completion with the run's resulting status:
// succeeded; failed (the attempt failed and a retry will follow, after its
// backoff); dead (no attempts left, or the run was replaced); or
// cancelled (the run was cancelled while the attempt ran). For an item's
// attempt, Status is the item's and RunStatus the run's.
type CompleteResponse struct {
	Status    RunStatus `json:"status"`
	RunStatus RunStatus `json:"run_status,omitempty"`
	// Written is the bytes of the run document the completion's write
	// made etcd store (its share, when several results were recorded in
	// one write): set by the scheduler for the HTTP layer's write budget,
	// never sent.
	Written int `json:"-"`
}

// NotOwner is the body of a 421 reply.
type NotOwner struct {
	Error string `json:"error"`
	// Owner and OwnerAddr name the partition's current owner, empty if it
	// has none right now (retry later).
	Owner     string `json:"owner,omitempty"`
	OwnerAddr string `json:"owner_addr,omitempty"`
}

// RegisterRequest registers a worker, or refreshes its registration. The
// worker sends it before its first poll and then every third of the
// RegisterResponse's TTL, to one orchestrator (moving to another when
// that one does not answer).
type RegisterRequest struct {
	// Worker is the worker's ID, as in polls.
	Worker string `json:"worker"`
	// Executors are the executor types the worker runs, as in polls: 1 to
	// MaxRegisterExecutors distinct names of 1 to MaxExecutorBytes bytes
	// each.
	Executors []string `json:"executors"`
	// Concurrency is the most attempts the worker holds, 1 to
	// MaxWorkerConcurrency.
	Concurrency int `json:"concurrency"`
	// Active is the number of attempts it holds now, 0..Concurrency. It is
	// a sample: the registry stores it at most every so often (see package
	// dispatch/workers), not at every refresh.
	Active int `json:"active"`
	// Orchestrators are the orchestrator URLs the worker polls (at most
	// MaxRegisterOrchestrators, each at most MaxOrchestratorURLBytes
	// bytes); optional, shown by GET /v1/cluster/workers.
	Orchestrators []string `json:"orchestrators,omitempty"`
	// Labels are the worker's labels (Kubernetes' label rules, at most
	// placement.MaxLabels): what jobs' placement selectors match. They
	// must satisfy the credential's worker label selector (403
	// otherwise).
	Labels map[string]string `json:"labels,omitempty"`

	// Credential and Prefix are the request's credential's ID and scope,
	// and WorkerLabels its worker label selector ("" for none), set by the
	// HTTP layer, never from the body: the registration binds the worker
	// ID to the credential, and is refused if its labels do not satisfy
	// the selector.
	Credential   string `json:"-"`
	Prefix       string `json:"-"`
	WorkerLabels string `json:"-"`
}

// RegisterResponse answers a registration.
type RegisterResponse struct {
	// TTL is how long the registration lives without a refresh; the
	// worker refreshes it every TTL/3.
	TTL Duration `json:"ttl"`
	// Orchestrator is the ID of the member holding the registration.
	Orchestrator string `json:"orchestrator"`
}

// EndPollsRequest ends the long polls a worker has waiting at one
// orchestrator: each answers at once, with nothing or with the attempts
// it recorded for the worker just before, and the worker's polls that
// reach that orchestrator afterwards answer at once with nothing, for
// EndPollsHold or until the worker registers anew (a worker the
// orchestrator does not show registered with the request's credential
// gets no such hold). A worker sends it to each orchestrator it polls
// when it stops, and then reads its polls' replies to the end and runs
// what they hand it: a poll cut off instead could lose an attempt
// recorded for it in the instant before, which its worker never sees and
// whose run then waits for the worker's registration to end. The
// orchestrator answers 200 with {}, or 404 when it is of a version
// without the request (the worker then cuts its polls, as before).
type EndPollsRequest struct {
	Worker string `json:"worker"`
	// KeepPolling says the worker is not stopping: it only stopped
	// polling this orchestrator (which left its list of orchestrators),
	// and may poll it again. The polls waiting now are ended; later ones
	// are not held.
	KeepPolling bool `json:"keep_polling,omitempty"`
	// Credential is set by the HTTP layer; only polls made with the same
	// credential are ended.
	Credential string `json:"-"`
}

// EndPollsHold is how long an orchestrator answers the polls of a worker
// that ended its polls at once with nothing, unless the worker registers
// anew first: long enough for a poll sent just before the end request to
// arrive after it, and longer than a stopping worker waits for its
// ended polls' replies (2 s), short enough that a worker restarted at
// once whose registration lived on (its deregistration failed) waits
// little for work.
const EndPollsHold = 3 * time.Second

// DeregisterRequest removes a worker's registration: the worker sends it
// when it stops gracefully, after its attempts have ended.
type DeregisterRequest struct {
	Worker string `json:"worker"`
	// Credential is set by the HTTP layer; only the credential the worker
	// is registered with may remove it.
	Credential string `json:"-"`
}
