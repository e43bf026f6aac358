package store

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"

	"github.com/jobfleet/jobfleet/api"
)

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
	// Format is the notify entry's body format (api.Notification.Format).
	Format string `json:"format,omitempty"`
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

// Deliveries is the key of job id's delivery records: its latest
// api.MaxDeliveries notifications' outcomes (a JSON array of
// api.NotificationDelivery), written fenced by the partition's owner with
// the deletions of delivered notifications.
func (k Keys) Deliveries(p int, id string) string {
	return k.NS + "notified/" + part(p) + "/" + EscapeID(id)
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
	switch ev {
	case string(RunFailed), string(RunDead), string(RunSucceeded), string(api.RunCancelled), // a run's status
		string(api.NotifyPaused), string(RunSkipped), string(api.NotifyMissed), "misfire": // a job's event
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

// Deliveries returns the delivery records of job id's latest
// notifications, newest first (none: an empty slice).
func (s *Etcd) Deliveries(ctx context.Context, id string) ([]api.NotificationDelivery, error) {
	resp, err := s.client.Get(ctx, s.keys.Deliveries(s.Partition(id), id))
	if err != nil {
		return nil, Classify(err)
	}
	return DecodeDeliveries(resp.Kvs)
}

// DecodeDeliveries decodes the value of a Deliveries key as read (kvs:
// none, or the one key); no key is no record.
func DecodeDeliveries(kvs []*mvccpb.KeyValue) ([]api.NotificationDelivery, error) {
	out := []api.NotificationDelivery{}
	if len(kvs) == 0 {
		return out, nil
	}
	if err := json.Unmarshal(kvs[0].Value, &out); err != nil {
		return nil, fmt.Errorf("stored notification deliveries are corrupt: %w", err)
	}
	return out, nil
}
