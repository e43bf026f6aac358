package dispatch

import (
	"encoding/json"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/jobfleet/jobfleet/api"
	"github.com/jobfleet/jobfleet/dispatch/notify"
	"github.com/jobfleet/jobfleet/store"
)

// This file has the notifications of a job's scheduling events, as
// notify.go has those of its runs' statuses: "paused" (pause_after_failures
// paused the job), "skipped" (a run recorded skipped, or times the misfire
// policy skipped) and "missed" (times not fired within the grace). Each is
// written in the transaction that records the event, so it is delivered
// at least once, and at most one of each kind is written per job and
// write, so that a write's notifications stay few whatever it records.

// eventNotes returns the outbox writes notifying job id's subscribers to
// event (the entries of work, else the fleet's default) with body, a
// document stored once at the key of (at, token, attempt): token names
// the key (an event, or "misfire"), runID the run it is about ("" for
// none).
func (pt *partition) eventNotes(work compactedWork, id string, event api.RunStatus, token string, runID string, at time.Time, attempt int, body []byte, now time.Time) ([]clientv3.Op, []notify.Entry) {
	cfg := pt.d.cfg.Notify
	if cfg.Notifier == nil || pt.notes == nil || work == "" {
		return nil, nil
	}
	w, err := work.decode()
	if err != nil {
		pt.lg.Error("decoding a job's notify entries failed; the fleet's default applies", zap.String("job_id", id), zap.Error(err))
	}
	subs := w.Notify
	if len(subs) == 0 {
		subs = cfg.Default
	}
	k := pt.d.keys
	bodyKey := k.OutboxRun(pt.p, id, at, api.RunStatus(token), attempt)
	var ops []clientv3.Op
	var out []notify.Entry
	for i, n := range subs {
		if !n.Notifies(event) {
			continue
		}
		o := store.Outbox{RunID: runID, JobID: id, Event: event, Attempt: attempt, URL: n.URL, Headers: n.Headers, Format: n.Format, CreatedAt: now.UTC()}
		b, err := json.Marshal(o)
		if err != nil {
			continue
		}
		key := k.Outbox(pt.p, id, at, api.RunStatus(token), attempt, i)
		ops = append(ops, clientv3.OpPut(key, string(b)))
		out = append(out, notify.Entry{Key: key, Body: bodyKey, Outbox: o})
	}
	if len(ops) == 0 {
		return nil, nil
	}
	return append(ops, clientv3.OpPut(bodyKey, string(body))), out
}

// misfireToken names the stored document of a "skipped" notification of
// times the misfire policy skipped, apart from the "skipped" one of a
// skipped run of the same time.
const misfireToken = "misfire"

// planNotes returns the outbox writes of job e's plan at now: one
// "skipped" notification (the latest run it records skipped, or else the
// times its misfire policy skipped) and one "missed" (its decision's
// missed times), each to the subscribers of that event.
func (pt *partition) planNotes(e *jobEntry, plan FirePlan, now time.Time) ([]clientv3.Op, []notify.Entry) {
	if pt.d.cfg.Notify.Notifier == nil || pt.notes == nil {
		return nil, nil
	}
	var ops []clientv3.Op
	var notes []notify.Entry
	add := func(o []clientv3.Op, n []notify.Entry) {
		ops, notes = append(ops, o...), append(notes, n...)
	}
	id, d := e.spec.ID, plan.Decision
	misfire := func(event api.RunStatus) []byte {
		b, _ := json.Marshal(api.Misfire{JobID: id, Event: event, MisfirePolicy: e.spec.MisfirePolicy, Missed: d.Missed,
			Fired: d.Missed - d.Skipped - d.Dropped, Skipped: d.Skipped, Dropped: d.Dropped, Through: d.Last.UTC(), DecidedAt: now.UTC()})
		return b
	}
	skipped := -1
	for i, r := range plan.Runs {
		if r.Status == api.RunSkipped {
			skipped = i
		}
	}
	switch {
	case skipped >= 0:
		r := plan.Runs[skipped]
		if val, err := store.EncodeRun(r); err == nil {
			add(pt.eventNotes(e.work, id, api.RunSkipped, string(api.RunSkipped), r.ID, r.ScheduledAt, 0, val, now))
		}
	case d.Skipped > 0:
		add(pt.eventNotes(e.work, id, api.RunSkipped, misfireToken, "", d.Last, 0, misfire(api.RunSkipped), now))
	}
	if d.Missed > 0 {
		add(pt.eventNotes(e.work, id, api.NotifyMissed, string(api.NotifyMissed), "", d.Last, 0, misfire(api.NotifyMissed), now))
	}
	return ops, notes
}
