package api

import (
	"time"
)

// HistoryPolicy bounds the runs kept of one job: the owner of the job's
// partition deletes the job's oldest final runs beyond MaxRuns (counting
// its active runs too) and those scheduled more than MaxAge ago. Active
// runs are never deleted. A zero field takes the fleet's default (the
// orchestrators' --history-max-runs and --history-max-age); the fleet's
// history budget applies on top (see package dispatch).
type HistoryPolicy struct {
	// MaxRuns is the most runs kept, 1 to MaxHistoryRuns.
	MaxRuns int `json:"max_runs,omitempty"`
	// MaxAge is how long a final run is kept after its scheduled time, 1s
	// to MaxHistoryAge.
	MaxAge Duration `json:"max_age,omitzero"`
}

// Retention is how long a finished one-off job is kept before its
// partition's owner deletes it with its runs: a Go duration ("168h"), or
// RetentionNever to keep it until it is deleted by hand. Empty means the
// fleet's default (the orchestrators' --delete-after).
type Retention string

// RetentionNever keeps a finished one-off job.
const RetentionNever Retention = "never"

// Limits of the history and retention fields.
const (
	// MaxHistoryRuns is the largest history.max_runs.
	MaxHistoryRuns = 100000
	// MaxHistoryAge is the longest history.max_age and delete_after: ten
	// years.
	MaxHistoryAge = Duration(10 * 365 * 24 * time.Hour)
)

// Duration returns the retention as a duration; keep is true for
// RetentionNever, set false for the empty retention (the fleet's default).
// It assumes a validated value: anything else reads as unset.
func (r Retention) Duration() (d time.Duration, keep, set bool) {
	switch r {
	case "":
		return 0, false, false
	case RetentionNever:
		return 0, true, true
	}
	d, err := time.ParseDuration(string(r))
	if err != nil || d < 0 {
		return 0, false, false
	}
	return d, false, true
}

// IsOneOff reports whether the job fires once (run_at, or neither schedule
// nor run_at nor after) rather than on a schedule or after other jobs.
func (j *Job) IsOneOff() bool { return j.Schedule == "" && !j.AfterOnly() }

// validateRetention checks history and delete_after.
func (j *Job) validateRetention() error {
	h := j.History
	if h.MaxRuns < 0 || h.MaxRuns > MaxHistoryRuns {
		return fieldErr("history.max_runs", "%d is out of range; want 1 to %d (or leave it out for the fleet's default)", h.MaxRuns, MaxHistoryRuns)
	}
	switch {
	case h.MaxAge < 0:
		return fieldErr("history.max_age", "%v is negative", h.MaxAge)
	case h.MaxAge != 0 && h.MaxAge < MinRetention:
		return fieldErr("history.max_age", "%v is shorter than the minimum of %v", h.MaxAge, MinRetention)
	case h.MaxAge > MaxHistoryAge:
		return fieldErr("history.max_age", "%v is longer than the maximum of %v", h.MaxAge, MaxHistoryAge)
	}
	if j.DeleteAfter == "" {
		return nil
	}
	if !j.Finite() {
		return fieldErr("delete_after", "applies only to jobs that complete: one-off jobs (run_at, or neither schedule nor run_at) and jobs with not_after or max_fires; a job with a schedule that never ends is never completed")
	}
	if j.DeleteAfter == RetentionNever {
		return nil
	}
	d, err := time.ParseDuration(string(j.DeleteAfter))
	switch {
	case err != nil:
		return fieldErr("delete_after", "%q is neither a duration such as \"168h\" nor %q", string(j.DeleteAfter), RetentionNever)
	case d < 0:
		return fieldErr("delete_after", "%v is negative", d)
	case Duration(d) > MaxHistoryAge:
		return fieldErr("delete_after", "%v is longer than the maximum of %v; use %q to keep the job", d, MaxHistoryAge, RetentionNever)
	}
	return nil
}
