package api

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
)

// Notification subscribes a URL to some of a job's run outcomes: the
// owner of the job's partition POSTs the run document there when a run
// reaches one of the statuses in On. See the job document's "notify".
type Notification struct {
	// On are the outcomes that notify: RunFailed (an attempt failed and a
	// retry follows: once per failed attempt), RunDead, RunSucceeded and
	// RunCancelled (once per run); NotifyOutcomes lists them.
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

// NotifyOutcomes are the run statuses a notification may subscribe to,
// in the order messages list them.
var NotifyOutcomes = []RunStatus{RunFailed, RunDead, RunSucceeded, RunCancelled}

// Notifiable reports whether s is one of NotifyOutcomes.
func (s RunStatus) Notifiable() bool { return slices.Contains(NotifyOutcomes, s) }

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
			return fieldErr(f+".on", "empty; want some of %s", outcomeList())
		}
		for _, s := range n.On {
			if !s.Notifiable() {
				return fieldErr(f+".on", "unknown outcome %q; want one of %s", string(s), outcomeList())
			}
		}
		if len(slices.Compact(slices.Sorted(slices.Values(n.On)))) != len(n.On) {
			return fieldErr(f+".on", "lists an outcome twice")
		}
		if err := ValidateURL(f+".url", n.URL); err != nil {
			return err
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

// outcomeList returns NotifyOutcomes quoted, comma-separated.
func outcomeList() string {
	q := make([]string, len(NotifyOutcomes))
	for i, s := range NotifyOutcomes {
		q[i] = strconv.Quote(string(s))
	}
	return strings.Join(q, ", ")
}
