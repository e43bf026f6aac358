package api

import "time"

// Activity history: what each member did in each minute of the last hour,
// as GET /v1/cluster/activity answers it. Each member keeps its own in
// memory (for the partitions it owns) and publishes it to the fleet;
// readers add members up (a minute's counts add, its lag buckets add and
// give the fleet's quantiles).

// ActivityMinutes is how many minutes of history a member keeps.
const ActivityMinutes = 60

// ActivityLagBounds returns the upper bounds, in seconds, of the buckets
// of ActivityMinute.LagBuckets: 1 ms doubling to 32.768 s (16 bounds); a
// last bucket, past them, counts the lags above the largest. A new slice
// each call.
func ActivityLagBounds() []float64 {
	b := make([]float64, 16)
	for i := range b {
		b[i] = 0.001 * float64(int(1)<<i)
	}
	return b
}

// ActivityMinute is one member's activity in one minute of its clock.
type ActivityMinute struct {
	// Start is the minute's first instant (UTC).
	Start time.Time `json:"start"`
	// Fires counts the runs the member's fires recorded pending; Skipped
	// those recorded skipped (a forbid or calendar, say).
	Fires   int64 `json:"fires"`
	Skipped int64 `json:"skipped"`
	// Succeeded, Failed and Dead count attempts that ended so (Failed:
	// the run awaits a retry); Cancelled counts runs cancelled.
	Succeeded int64 `json:"succeeded"`
	Failed    int64 `json:"failed"`
	Dead      int64 `json:"dead"`
	Cancelled int64 `json:"cancelled"`
	// LagBuckets counts the fires by schedule lag (fire time minus
	// scheduled time), bucket i holding lags up to ActivityLagBounds[i]
	// and not in bucket i-1, the last one the lags above every bound;
	// empty when the minute had no fire.
	LagBuckets []int64 `json:"lag_buckets,omitempty"`
	// LagP50Seconds and LagP99Seconds are the minute's lag quantiles,
	// estimated as the upper bound of the bucket that holds them (the
	// largest bound for the last bucket); 0 without fires.
	LagP50Seconds float64 `json:"lag_p50_seconds"`
	LagP99Seconds float64 `json:"lag_p99_seconds"`
	// Running and Waiting are the attempts running and the runs waiting
	// for a worker on the member's partitions, as last sampled in the
	// minute (every few seconds).
	Running int `json:"running"`
	Waiting int `json:"waiting"`
}

// MemberActivity is one member's minutes, oldest first, the current
// (unfinished) minute last; minutes without anything are listed too, so
// a member that has run an hour lists ActivityMinutes.
type MemberActivity struct {
	Member string `json:"member"`
	// Published is when the member's figures were taken (its clock):
	// the answering member's own are taken at the request, the others'
	// every few seconds.
	Published time.Time        `json:"published"`
	Minutes   []ActivityMinute `json:"minutes"`
	// Late are the member's late runs, the most late first (at most
	// MaxLatePerMember; LateTruncated if it had more). GET
	// /v1/cluster/activity leaves them out: GET /v1/runs/late lists them
	// within the caller's prefix.
	Late          []LateRun `json:"late,omitempty"`
	LateTruncated bool      `json:"late_truncated,omitempty"`
}

// FleetActivity is the body of GET /v1/cluster/activity: each registered
// member's minutes, sorted by member ID.
type FleetActivity struct {
	// Member is the answering member; Now its clock when it answered.
	Member    string           `json:"member"`
	Now       time.Time        `json:"now"`
	LagBounds []float64        `json:"lag_bounds"`
	Members   []MemberActivity `json:"members"`
}

// LateRun is a run that is late on the member that owns it: waiting for
// a worker since longer than a few seconds, or running an attempt whose
// heartbeats are late, with why.
type LateRun struct {
	RunID       string    `json:"run_id"`
	JobID       string    `json:"job_id"`
	Status      RunStatus `json:"status"`
	ScheduledAt time.Time `json:"scheduled_at"`
	// Since is when it became due (its fire, or its retry's backoff
	// ending) for a waiting run; for a running one, when its attempt's
	// last heartbeat was due.
	Since time.Time `json:"since"`
	// Reason says what it waits for: a limit key without room, no live
	// worker that may take it (and why), busy workers, or late heartbeats.
	Reason string `json:"reason"`
	// Member is the member that owns its partition.
	Member string `json:"member"`
}

// LateRuns is the body of GET /v1/runs/late: the late runs of every
// member, the most late first, within the caller's prefix.
type LateRuns struct {
	Now  time.Time `json:"now"`
	Runs []LateRun `json:"runs"`
	// Truncated: a member had more late runs than it publishes
	// (MaxLatePerMember); those that have waited longest are listed.
	Truncated bool `json:"truncated,omitempty"`
}

// MaxLatePerMember is how many late runs a member publishes: those that
// have been late longest.
const MaxLatePerMember = 100
