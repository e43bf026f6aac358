package api

import "time"

// CancelRequested is the reply of POST /v1/runs/{run_id}/cancel (202)
// when the run's partition's owner has not applied the request within
// the wait: the request is durable, and the owner applies it (a
// partition between owners: its next owner). GET /v1/runs/{run_id} shows
// the run cancelled once it has. The reply once applied (200) is the
// cancelled run.
type CancelRequested struct {
	RunID string `json:"run_id"`
	// Status is "cancel requested".
	Status string `json:"status"`
}

// StatusCancelRequested is CancelRequested.Status.
const StatusCancelRequested = "cancel requested"

// MaxBackfill is the most scheduled times one backfill request covers
// (BackfillRequest.Max).
const MaxBackfill = 1000

// BackfillRequest is the body of POST /v1/jobs/{id}/backfill: create a
// run for each scheduled time of the job in [From, To), at most Max of
// them (1 to MaxBackfill; left out: MaxBackfill), with the run IDs its
// fires would have had; times that have a run already are not run again.
// To left out is the server's now; it may not be later. DryRun lists the
// times and writes nothing.
type BackfillRequest struct {
	From   time.Time  `json:"from"`
	To     *time.Time `json:"to,omitempty"`
	Max    *int       `json:"max,omitempty"`
	DryRun bool       `json:"dry_run,omitempty"`
}

// The states of a backfill (Backfill.Status).
const (
	// BackfillDryRun: the reply of a dry run; nothing was written.
	BackfillDryRun = "dry run"
	// BackfillRunning: the job's partition's owner is creating its runs.
	BackfillRunning = "running"
	// BackfillDone: every time of the backfill was created or found
	// existing.
	BackfillDone = "done"
	// BackfillStopped: the reply of DELETE /v1/jobs/{id}/backfill for a
	// backfill that was running: its pending times are not created.
	BackfillStopped = "stopped"
)

// Backfill is a job's backfill: the reply of POST /v1/jobs/{id}/backfill
// (200 for a dry run or a backfill with nothing to create, 202 once
// recorded) and of GET /v1/jobs/{id}/backfill, which shows its progress.
// Times are the scheduled times, in UTC; each lies in exactly one of
// Created, Existing and Pending.
type Backfill struct {
	JobID string    `json:"job_id"`
	From  time.Time `json:"from"`
	To    time.Time `json:"to"`
	Max   int       `json:"max"`
	// Status is BackfillDryRun, BackfillRunning or BackfillDone.
	Status string `json:"status"`
	// Created are the times this backfill created a run for.
	Created []time.Time `json:"created"`
	// Existing are the times that had a run already (fired, triggered or
	// backfilled before): not run again.
	Existing []time.Time `json:"existing"`
	// Pending are the times whose runs the owner has yet to create (in a
	// dry run: would create), oldest first.
	Pending []time.Time `json:"pending"`
	// Skipped are times of [From, To) this backfill does not cover: those
	// after its first Max (at most Max of them are listed). NextFrom, set
	// when there are some, is the From of the request that goes on.
	Skipped  []time.Time `json:"skipped"`
	NextFrom *time.Time  `json:"next_from,omitempty"`
	// RequestedBy is the credential that asked, RequestedAt when;
	// DoneAt when the owner finished (zero until then).
	RequestedBy string    `json:"requested_by,omitempty"`
	RequestedAt time.Time `json:"requested_at,omitzero"`
	DoneAt      time.Time `json:"done_at,omitzero"`
}

// RetryRequest is the body of POST /v1/runs/{id}/retry: start the run,
// made of steps and ended dead or cancelled, again from step From (that
// step and every step that needs it, directly or not, run again; the
// others keep how they ended and their results), as a new round of the
// same run.
type RetryRequest struct {
	From string `json:"from"`
}

// RetryRequested is the 202 reply of POST /v1/runs/{id}/retry when the
// run's partition's owner has not applied the request yet.
type RetryRequested struct {
	RunID string `json:"run_id"`
	// Status is "retry requested".
	Status string `json:"status"`
}

// StatusRetryRequested is RetryRequested.Status.
const StatusRetryRequested = "retry requested"
