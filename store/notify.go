package store

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"time"
)

// Notification subscribes a URL to some of a job's run outcomes: the
// owner of the job's partition POSTs the run document there when a run
// reaches one of the statuses in On. See the job document's "notify".
type Notification struct {
	// On are the outcomes that notify: RunFailed (an attempt failed and a
	// retry follows: once per failed attempt), RunDead and RunSucceeded
	// (once per run).
	On []RunStatus `json:"on"`
	// URL is the http or https URL that receives the run document; no
	// user information.
	URL string `json:"url"`
	// Headers are extra request headers, with the http executor's rules
	// (names starting with "Jobfleet-", Host, Content-Length and the
	// hop-by-hop headers refused). A value is a string, or a secret
	// reference that the orchestrator resolves from its own environment,
	// if the variable is on its --notify-secret-env list.
	Headers map[string]HeaderValue `json:"headers,omitempty"`
}

// MaxNotifications is the most notify entries a job may have.
const MaxNotifications = 8

// Notifies reports whether n subscribes to status s.
func (n Notification) Notifies(s RunStatus) bool { return slices.Contains(n.On, s) }

// ValidateNotifications checks notify entries (a job's, or the fleet's
// default); errors are *FieldError naming field[i].
func ValidateNotifications(field string, ns []Notification) error {
	if len(ns) > MaxNotifications {
		return fieldErr(field, "%d entries; at most %d", len(ns), MaxNotifications)
	}
	for i, n := range ns {
		f := fmt.Sprintf("%s[%d]", field, i)
		if len(n.On) == 0 {
			return fieldErr(f+".on", "empty; want some of %q, %q, %q", RunFailed, RunDead, RunSucceeded)
		}
		for _, s := range n.On {
			switch s {
			case RunFailed, RunDead, RunSucceeded:
			default:
				return fieldErr(f+".on", "unknown outcome %q; want %q, %q or %q", string(s), RunFailed, RunDead, RunSucceeded)
			}
		}
		if len(slices.Compact(slices.Sorted(slices.Values(n.On)))) != len(n.On) {
			return fieldErr(f+".on", "lists an outcome twice")
		}
		if err := validateURL(n.URL); err != nil {
			msg := err.Error()
			if fe, ok := err.(*FieldError); ok {
				msg = fe.Msg
			}
			return fieldErr(f+".url", "%s", msg)
		}
		if len(n.Headers) > MaxHeaders {
			return fieldErr(f+".headers", "%d headers; at most %d", len(n.Headers), MaxHeaders)
		}
		for _, name := range slices.Sorted(maps.Keys(n.Headers)) {
			if err := validateHeaderIn(f+".headers", name, n.Headers[name]); err != nil {
				return err
			}
		}
	}
	return nil
}

// Outbox is one notification to deliver, stored at Keys.Outbox in the
// same fenced transaction as the run status it reports, and deleted by
// the partition's owner once the URL answered 2xx (or when it gives up).
type Outbox struct {
	RunID   string                 `json:"run_id"`
	JobID   string                 `json:"job_id"`
	Event   RunStatus              `json:"event"`
	Attempt int                    `json:"attempt"`
	URL     string                 `json:"url"`
	Headers map[string]HeaderValue `json:"headers,omitempty"`
	// Run is the run document as written with the status.
	Run json.RawMessage `json:"run"`
	// CreatedAt is when the status was recorded; delivery is given up
	// after the fleet's notify max age from it.
	CreatedAt time.Time `json:"created_at"`
}

// OutboxPrefix is the prefix of partition p's notifications to deliver.
func (k Keys) OutboxPrefix(p int) string { return k.NS + "outbox/" + part(p) + "/" }

// Outbox is the key of the index-th notification (0-based, in the job's
// notify list) of run runID's event at attempt.
func (k Keys) Outbox(p int, runID string, event RunStatus, attempt, index int) string {
	return fmt.Sprintf("%s%s/%s-%d-%d", k.OutboxPrefix(p), EscapeID(runID), event, attempt, index)
}
