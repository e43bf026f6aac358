package api

import (
	"strings"
	"time"
	"unicode/utf8"
)

// FailingWindow is how long an entry of a dead run is kept after the run
// died, and how far back GET /v1/runs looks at most (its since).
const FailingWindow = 24 * time.Hour

// FailingErrorBytes caps FailingRun.Error: the start of the error.
const FailingErrorBytes = 200

// FailingRun is an entry of the failing-runs index: a summary of a run
// whose status is failed or dead, as of the write that gave it that
// status. The full run is GetRun(RunID).
type FailingRun struct {
	// RunID is the run's ID.
	RunID string `json:"run_id"`
	// JobID is the run's job.
	JobID string `json:"job_id"`
	// Status is RunFailed or RunDead.
	Status RunStatus `json:"status"`
	// Attempt is the number of attempts made, by all its items for a run
	// of items (0 for a run that died without one, e.g. replaced before a
	// worker took it).
	Attempt int `json:"attempt"`
	// At is when the run got this status (UTC).
	At time.Time `json:"at"`
	// Error is the start (at most FailingErrorBytes, valid UTF-8) of the
	// last attempt's error, or of the run's reason if the attempt has
	// none (a run of items: its reason, which names the items that did
	// not succeed).
	Error string `json:"error,omitempty"`
	// Items and Succeeded count a sharded or broadcast run's items, and
	// those of them that succeeded; 0 for a run of one item.
	Items     int `json:"items,omitempty"`
	Succeeded int `json:"items_succeeded,omitempty"`
}

// Failing reports whether a run in status s belongs in the failing-runs
// index: failed or dead.
func (s RunStatus) Failing() bool { return s == RunFailed || s == RunDead }

// NewFailingRun returns the index entry of run r, given its status at at.
func NewFailingRun(r Run, at time.Time) FailingRun {
	f := FailingRun{RunID: r.ID, JobID: r.JobID, Status: r.Status, Attempt: r.AttemptCount(), At: at.UTC().Truncate(time.Millisecond)}
	if len(r.Items) > 0 {
		f.Items, f.Succeeded = len(r.Items), r.Count().Succeeded
	}
	if n := len(r.Attempts); n > 0 {
		f.Error = r.Attempts[n-1].Error
	}
	if f.Error == "" {
		f.Error = r.Reason
	}
	f.Error = cutUTF8(f.Error, FailingErrorBytes)
	return f
}

// cutUTF8 returns the longest prefix of s of at most n bytes that ends on
// a character boundary, with invalid bytes replaced.
func cutUTF8(s string, n int) string {
	if len(s) > n {
		s = s[:n]
		// Drop the bytes of a character the cut split (at most UTFMax-1).
		for range utf8.UTFMax - 1 {
			if r, size := utf8.DecodeLastRuneInString(s); r != utf8.RuneError || size != 1 {
				break
			}
			s = s[:len(s)-1]
		}
	}
	return strings.ToValidUTF8(s, "\uFFFD")
}
