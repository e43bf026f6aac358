package api

import (
	"encoding/json"
	"time"
)

// RunStatus is the state of a run.
type RunStatus string

// The run states. A run starts pending; succeeded, dead, skipped and
// cancelled are final.
const (
	// RunPending: fired and waiting for a worker (or for a retry's backoff).
	RunPending RunStatus = "pending"
	// RunRunning: an attempt is held by a worker.
	RunRunning RunStatus = "running"
	// RunSucceeded: an attempt succeeded. Final.
	RunSucceeded RunStatus = "succeeded"
	// RunFailed: the latest attempt failed and another attempt remains.
	RunFailed RunStatus = "failed"
	// RunDead: the last allowed attempt failed or was lost. Final.
	RunDead RunStatus = "dead"
	// RunSkipped: recorded but not executed, by the misfire or concurrency
	// policy. Final.
	RunSkipped RunStatus = "skipped"
	// RunCancelled: stopped by a cancel request (POST
	// /v1/runs/{id}/cancel) while pending, awaiting a retry or running;
	// never retried. Final.
	RunCancelled RunStatus = "cancelled"
)

// Final reports whether no further attempt will be made for a run in
// status s.
func (s RunStatus) Final() bool {
	switch s {
	case RunSucceeded, RunDead, RunSkipped, RunCancelled:
		return true
	}
	return false
}

// Run is one scheduled execution of a job: the "run document" of the HTTP
// API. Its ID is derived from (JobID, ScheduledAt), so each fire has
// exactly one run.
type Run struct {
	// ID identifies the run; unique per (job, scheduled time).
	ID string `json:"run_id"`
	// JobID is the job's ID.
	JobID string `json:"job_id"`
	// Partition is the job's partition when the run fired.
	Partition int `json:"partition"`
	// ScheduledAt is the scheduled time the run is for.
	ScheduledAt time.Time `json:"scheduled_at"`
	// FiredAt is when the owner recorded the run.
	FiredAt time.Time `json:"fired_at"`
	// Status is the run's state.
	Status RunStatus `json:"status"`
	// Attempts are the tries so far, oldest first.
	Attempts []Attempt `json:"attempts"`
	// Reason says why a run is skipped, cancelled (by whom), backfilled
	// or triggered, or dead without a failed attempt (replaced, job
	// deleted); empty otherwise.
	Reason string `json:"reason,omitempty"`
	// Payload is the payload a trigger gave the run (POST
	// /v1/jobs/{id}/trigger {"payload": …}), handed to its attempts
	// instead of the job's; absent when the run takes the job's.
	Payload json.RawMessage `json:"payload,omitempty"`
	// CausedBy names the upstream run whose end fired the run (the job's
	// "after"); nil for a run its schedule, a trigger or a backfill fired.
	CausedBy *RunCause `json:"caused_by,omitempty"`
	// Owner is the ID of the orchestrator that fired the run.
	Owner string `json:"owner"`
	// Epoch is that orchestrator's fencing token for the partition.
	Epoch int64 `json:"epoch"`
	// TraceID is the OpenTelemetry trace of the run (32 hex digits), and
	// TraceParent the W3C traceparent of its fire's span, which its
	// grants continue; both empty when its owner was not tracing.
	TraceID     string `json:"trace_id,omitempty"`
	TraceParent string `json:"traceparent,omitempty"`

	// Items are the items of a sharded or broadcast run, by index, each
	// an attempt chain of its own (see Item); Status then follows from
	// theirs and Attempts stays empty. Absent on a run of one item.
	Items []Item `json:"items,omitempty"`
	// MinSucceeded is how many items must succeed for the run to
	// succeed, as the job said when the run fired; 0 without items.
	MinSucceeded int `json:"min_succeeded,omitempty"`
	// MaxParallel bounds the items running at once, as the job said when
	// the run fired; 0: no bound.
	MaxParallel int `json:"max_parallel,omitempty"`
	// Broadcast is set on a broadcast run: one item per worker, each
	// pinned to its Item.Worker.
	Broadcast bool `json:"broadcast,omitempty"`
	// Steps are the steps of a run of a job made of steps, in the job's
	// order, each with the range of Items that are its chains (see
	// RunStep); Status then follows from theirs.
	Steps []RunStep `json:"steps,omitempty"`
	// Round numbers the run's rounds: 0 at the fire, one more each time
	// the run is started again from a step; Rounds records the rounds
	// that ended so: the first and the latest, at most MaxRunRounds in
	// all, RoundsDropped counting those between that are no longer kept.
	Round         int        `json:"round,omitempty"`
	Rounds        []RunRound `json:"rounds,omitempty"`
	RoundsDropped int        `json:"rounds_dropped,omitempty"`

	// Notifications are the deliveries recorded of the run's
	// notifications (those still among its job's latest MaxDeliveries),
	// newest first; set on reads of one run (GET /v1/runs/{id}), never
	// stored with it.
	Notifications []NotificationDelivery `json:"notifications,omitempty"`
}

// Attempt is one try of a run on a worker.
type Attempt struct {
	// Attempt numbers the try, from 1.
	Attempt int `json:"attempt"`
	// Worker is the ID of the worker that held the attempt.
	Worker string `json:"worker"`
	// Credential is the ID of the credential whose poll took the attempt;
	// only that credential may heartbeat or complete it.
	Credential string `json:"credential,omitempty"`
	// StartedAt is when the worker took the attempt.
	StartedAt time.Time `json:"started_at"`
	// FinishedAt is when the attempt ended; zero (omitted) while running.
	FinishedAt time.Time `json:"finished_at,omitzero"`
	// Error describes a failure; empty on success.
	Error string `json:"error,omitempty"`
	// Output is the start of the executor's output (response body or
	// standard output and error), capped by the worker.
	Output string `json:"output,omitempty"`
	// DroppedBytes counts the bytes of Output and Error dropped to keep
	// the run document within its budget (see FitRun); 0 if none.
	DroppedBytes int `json:"dropped_bytes,omitempty"`
}
