package api

import (
	"fmt"
	"maps"
	"slices"
	"time"
)

// Notification subscribes a URL to some of a job's run outcomes: the
// owner of the job's partition POSTs the run document there when a run
// reaches one of the statuses in On. See the job document's "notify".
type Notification struct {
	// On are the events that notify: RunFailed (an attempt failed and a
	// retry follows: once per failed attempt), RunDead, RunSucceeded and
	// RunCancelled (once per run; NotifyOutcomes lists these); NotifyPaused (the owner paused the job after
	// pause_after_failures dead runs: the run document of the last);
	// RunSkipped (a run recorded skipped, by a calendar, concurrency_policy
	// forbid or the active-run cap: its run document; or scheduled times
	// the misfire policy skipped: a Misfire document); NotifyMissed
	// (scheduled times not fired within the misfire grace, whatever the
	// policy did: a Misfire document); NotifyOverdue (no run succeeded
	// within the job's expect_success_within: an Overdue document, once
	// per overdue episode).
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
	// Format is the body's format: NotifyJSON ("json", the default when
	// empty: the document itself) or NotifySlack ("slack": a Slack
	// incoming webhook message, {"text": …, "blocks": […]}, naming the
	// job, the event, the run's status and error, with a link to the run
	// in the console when the member knows the console's URL).
	Format string `json:"format,omitempty"`
}

// Notification formats (Notification.Format).
const (
	NotifyJSON  = "json"
	NotifySlack = "slack"
)

// MaxNotifications is the most notify entries a job may have.
const MaxNotifications = 8

// Notification events that are not the status of a run.
const (
	// NotifyPaused: the job's owner paused it (Job.PauseAfterFailures).
	NotifyPaused RunStatus = "paused"
	// NotifyMissed: scheduled times of the job were missed (not fired
	// within the misfire grace).
	NotifyMissed RunStatus = "missed"
	// NotifyOverdue: none of the job's runs succeeded within its
	// expect_success_within (Job.ExpectSuccessWithin).
	NotifyOverdue RunStatus = "overdue"
)

// NotifyOutcomes are the run statuses that notify when a run's status
// write reaches them (the other events of NotifyEvents are the owner's
// decisions about a job), in the order messages list them.
var NotifyOutcomes = []RunStatus{RunFailed, RunDead, RunSucceeded, RunCancelled}

// Notifiable reports whether s is one of NotifyOutcomes.
func (s RunStatus) Notifiable() bool { return slices.Contains(NotifyOutcomes, s) }

// NotifyEvents are the events a notify entry may name in On.
var NotifyEvents = []RunStatus{RunFailed, RunDead, RunSucceeded, RunCancelled, NotifyPaused, RunSkipped, NotifyMissed, NotifyOverdue}

// Misfire is what a "missed" notification, and a "skipped" one for times
// the misfire policy skipped, deliver: one decision of the job's owner
// about its missed times.
type Misfire struct {
	JobID string `json:"job_id"`
	// Event is "missed" or "skipped".
	Event RunStatus `json:"event"`
	// MisfirePolicy is the job's policy that decided.
	MisfirePolicy MisfirePolicy `json:"misfire_policy"`
	// Missed is how many scheduled times were not fired within the
	// grace; Fired how many of them the policy fired, Skipped how many it
	// skipped, Dropped how many went beyond the cap of one decision.
	Missed  int `json:"missed"`
	Fired   int `json:"fired"`
	Skipped int `json:"skipped"`
	Dropped int `json:"dropped"`
	// Through is the latest scheduled time the decision accounted for.
	Through time.Time `json:"through"`
	// DecidedAt is when the owner decided.
	DecidedAt time.Time `json:"decided_at"`
}

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
			return fieldErr(f+".on", "empty; want some of %s", joinStates(NotifyEvents))
		}
		for _, s := range n.On {
			if !slices.Contains(NotifyEvents, s) {
				return fieldErr(f+".on", "unknown event %q; want %s", string(s), joinStates(NotifyEvents))
			}
		}
		if len(slices.Compact(slices.Sorted(slices.Values(n.On)))) != len(n.On) {
			return fieldErr(f+".on", "lists an outcome twice")
		}
		if err := ValidateURL(f+".url", n.URL); err != nil {
			return err
		}
		if n.Format != "" && n.Format != NotifyJSON && n.Format != NotifySlack {
			return fieldErr(f+".format", "unknown format %q; want %q or %q", n.Format, NotifyJSON, NotifySlack)
		}
		if len(n.Headers) > MaxHeaders {
			return fieldErr(f+".headers", "%d headers; at most %d", len(n.Headers), MaxHeaders)
		}
		for _, name := range slices.Sorted(maps.Keys(n.Headers)) {
			if err := validateHeaderIn(f+".headers", name, n.Headers[name]); err != nil {
				return err
			}
		}
		if err := checkHeaderCase(f+".headers", n.Headers); err != nil {
			return err
		}
	}
	return nil
}

// NotificationDelivery is how one notification was delivered, as the
// member owning the job's partition recorded it: the latest
// MaxDeliveries of each job are kept, with the job (GET
// /v1/jobs/{id}/notifications), and a run's are shown with it (GET
// /v1/runs/{id}).
type NotificationDelivery struct {
	JobID string `json:"job_id"`
	// RunID is the run the notification is about; empty for an event
	// about no run (a misfire document, an overdue job).
	RunID   string    `json:"run_id,omitempty"`
	Event   RunStatus `json:"event"`
	Attempt int       `json:"attempt,omitempty"`
	// URL is the notify entry's URL, without its query (which may hold
	// a secret).
	URL string `json:"url"`
	// CreatedAt is when the notification was written (with the status or
	// event it tells of).
	CreatedAt time.Time `json:"created_at"`
	// Tries counts the tries made by the member that recorded it (a new
	// owner counts its own from 0).
	Tries int `json:"tries"`
	// Result is DeliveryDelivered, DeliveryRetrying, DeliveryGivenUp or
	// DeliveryDropped.
	Result string `json:"result"`
	// LastError is the last failed try's error (at most 200 bytes), or
	// why it was given up or dropped.
	LastError string `json:"last_error,omitempty"`
	// At is when the result was recorded.
	At time.Time `json:"at"`
}

// The results of a NotificationDelivery.
const (
	// DeliveryDelivered: a try got a 2xx answer.
	DeliveryDelivered = "delivered"
	// DeliveryRetrying: tries failed; it is tried again with backoff.
	DeliveryRetrying = "retrying"
	// DeliveryGivenUp: not delivered within the notify max age, or its
	// destination is refused by the policy, or the document it delivers
	// is gone.
	DeliveryGivenUp = "given_up"
	// DeliveryDropped: the oldest beyond the job's bound of pending
	// notifications.
	DeliveryDropped = "dropped"
)

// MaxDeliveries is how many NotificationDelivery records are kept per
// job, the latest by CreatedAt.
const MaxDeliveries = 20

// Same reports whether d and o record the same notification.
func (d NotificationDelivery) Same(o NotificationDelivery) bool {
	return d.JobID == o.JobID && d.RunID == o.RunID && d.Event == o.Event && d.Attempt == o.Attempt && d.URL == o.URL && d.CreatedAt.Equal(o.CreatedAt)
}

// MergeDeliveries returns the records kept of a job after adding add to
// kept: a record of the same notification (Same) replaces the one kept,
// and only the latest MaxDeliveries by CreatedAt (then At) stay, newest
// first.
func MergeDeliveries(kept, add []NotificationDelivery) []NotificationDelivery {
	out := slices.Clone(kept)
	for _, d := range add {
		if i := slices.IndexFunc(out, d.Same); i >= 0 {
			out[i] = d
		} else {
			out = append(out, d)
		}
	}
	slices.SortStableFunc(out, func(a, b NotificationDelivery) int {
		if c := b.CreatedAt.Compare(a.CreatedAt); c != 0 {
			return c
		}
		return b.At.Compare(a.At)
	})
	return out[:min(len(out), MaxDeliveries)]
}

// NotificationDeliveries is the document of GET
// /v1/jobs/{id}/notifications.
type NotificationDeliveries struct {
	Deliveries []NotificationDelivery `json:"deliveries"`
}
