package store

import (
	"encoding/json"
	"fmt"
	"time"
)

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
