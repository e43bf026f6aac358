package store

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
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
// same fenced transaction as the run status it reports, beside the run
// document it delivers (Keys.OutboxRun: one copy for all the
// notifications of that status). The partition's owner deletes it once
// the URL answered 2xx, when it gives it up, or when it drops it for its
// job's bound of pending notifications; the run document goes with the
// last of them, and everything of a job goes with its data
// (Keys.OutboxJobPrefix).
type Outbox struct {
	RunID   string                 `json:"run_id"`
	JobID   string                 `json:"job_id"`
	Event   RunStatus              `json:"event"`
	Attempt int                    `json:"attempt"`
	URL     string                 `json:"url"`
	Headers map[string]HeaderValue `json:"headers,omitempty"`
	// Run is the run document as written with the status. Stored
	// notifications leave it out (it is at Keys.OutboxRun) and the
	// deliverer fills it in before sending; notifications written by
	// earlier versions, under a key ParseOutboxKey does not parse, hold
	// it here.
	Run json.RawMessage `json:"run,omitempty"`
	// CreatedAt is when the status was recorded; delivery is given up
	// after the fleet's notify max age from it.
	CreatedAt time.Time `json:"created_at"`
}

// OutboxPrefix is the prefix of partition p's notifications to deliver.
func (k Keys) OutboxPrefix(p int) string { return k.NS + "outbox/" + part(p) + "/" }

// OutboxJobPrefix is the prefix of job id's notifications and the run
// documents they deliver.
func (k Keys) OutboxJobPrefix(p int, id string) string {
	return k.OutboxPrefix(p) + EscapeID(id) + "/"
}

// OutboxRun is the key of the run document that the notifications of
// event at attempt of job id's run for scheduled time at deliver.
func (k Keys) OutboxRun(p int, id string, at time.Time, event RunStatus, attempt int) string {
	return fmt.Sprintf("%s%s/%s-%d", k.OutboxJobPrefix(p, id), FormatTime(at), event, attempt)
}

// Outbox is the key of the index-th notification (0-based, in the job's
// notify list) of event at attempt of job id's run for scheduled time at:
// OutboxRun's key, "/", index.
func (k Keys) Outbox(p int, id string, at time.Time, event RunStatus, attempt, index int) string {
	return fmt.Sprintf("%s/%d", k.OutboxRun(p, id, at, event, attempt), index)
}

// OutboxKey is a key under OutboxPrefix, parsed.
type OutboxKey struct {
	JobID   string
	At      time.Time // the run's scheduled time
	Event   RunStatus
	Attempt int
	// Index is the notification's index in its job's notify list, or -1
	// for the key of the run document (Keys.OutboxRun).
	Index int
}

// ParseOutboxKey parses a key under OutboxPrefix(p) made by Outbox or
// OutboxRun; ok is false for anything else (notifications of earlier
// versions were keyed by run ID: <run id>/<event>-<attempt>-<i>).
func (k Keys) ParseOutboxKey(p int, key string) (OutboxKey, bool) {
	rest, found := strings.CutPrefix(key, k.OutboxPrefix(p))
	if !found {
		return OutboxKey{}, false
	}
	parts := strings.Split(rest, "/")
	if len(parts) != 3 && len(parts) != 4 {
		return OutboxKey{}, false
	}
	id, err := UnescapeID(parts[0])
	if err != nil {
		return OutboxKey{}, false
	}
	at, err := time.Parse(TimeFormat, parts[1])
	if err != nil {
		return OutboxKey{}, false
	}
	ev, att, found := strings.Cut(parts[2], "-")
	attempt, err := strconv.Atoi(att)
	if !found || err != nil || attempt < 0 || strconv.Itoa(attempt) != att {
		return OutboxKey{}, false
	}
	switch RunStatus(ev) {
	case RunFailed, RunDead, RunSucceeded:
	default:
		return OutboxKey{}, false
	}
	ok := OutboxKey{JobID: id, At: at, Event: RunStatus(ev), Attempt: attempt, Index: -1}
	if len(parts) == 4 {
		i, err := strconv.Atoi(parts[3])
		if err != nil || i < 0 || i >= MaxNotifications || strconv.Itoa(i) != parts[3] {
			return OutboxKey{}, false
		}
		ok.Index = i
	}
	return ok, true
}
