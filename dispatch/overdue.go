package dispatch

import (
	"context"
	"encoding/json"
	"slices"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/jobfleet/jobfleet/api"
	"github.com/jobfleet/jobfleet/dispatch/notify"
)

// This file has the jobs' dead man's switch (expect_success_within): the
// rule of when a job is overdue (OverdueAt, NextOverdue: pure), the
// partition's timers of it (kept in the job index), and the fenced write
// that records an overdue episode in the job's state with its "overdue"
// notifications. The episode lives in the state (JobState.Overdue), so
// an owner that takes the partition over knows it was notified: one
// notification per episode, whoever owns the job when it begins.

// OverdueAt returns when job j, with state st, is overdue: its
// ExpectSuccessWithin after the later of its last success
// (st.LastSucceededAt; without one, its last write j.UpdatedAt, its
// creation included) and its last resume (resumed; zero for none). Zero
// when it is never overdue: it has no bound, it is paused by hand
// (j.Paused; the owner's pause, pause_after_failures, does not stop the
// clock: such a job is not succeeding either), or it completed.
func OverdueAt(j *api.Job, st api.JobState, resumed time.Time) time.Time {
	if j.ExpectSuccessWithin <= 0 || j.Paused || !st.FinishedAt.IsZero() {
		return time.Time{}
	}
	from := st.LastSucceededAt
	if from.IsZero() {
		from = j.UpdatedAt
		if from.IsZero() {
			from = j.CreatedAt
		}
	}
	if resumed.After(from) {
		from = resumed
	}
	return from.Add(j.ExpectSuccessWithin.Std())
}

// NextOverdue returns the overdue episode a state st should record at
// now for a job overdue at at (OverdueAt; zero: never): nil while the job
// is not overdue; st's episode if it covers at (it began at or after at:
// the bound may have shrunk since); else a new one, and begun is true
// (the caller notifies it).
func NextOverdue(st api.JobState, at, now time.Time) (o *api.Overdue, begun bool) {
	switch {
	case at.IsZero() || now.Before(at):
		return nil, false
	case covers(st, at):
		return st.Overdue, false
	}
	return &api.Overdue{Since: at.UTC(), NotifiedAt: now.UTC()}, true
}

// RecordSuccess returns job j's state after its run r was recorded
// final at now: a success of a job with expect_success_within is its
// LastSucceededAt, and ends its overdue episode. Callers write it in the
// transaction that records r's status.
func RecordSuccess(j *api.Job, st api.JobState, r api.Run, now time.Time) api.JobState {
	if j.ExpectSuccessWithin > 0 && r.Status == api.RunSucceeded {
		st.LastSucceededAt, st.Overdue = now.UTC(), nil
	}
	return st
}

// overdueWake returns when the overdue state of a job overdue at at
// changes from what st records on its own (NextOverdue would return
// another episode), false if it does not: at, for a job not recorded
// overdue; at once (the recorded episode's start, past) for one whose
// recorded episode no longer holds (at moved later: a resume or an edit;
// or the job is no longer overdue at all).
func overdueWake(st api.JobState, at time.Time) (time.Time, bool) {
	switch {
	case st.Overdue == nil:
		return at, !at.IsZero()
	case !covers(st, at):
		return st.Overdue.Since, true
	}
	return time.Time{}, false
}

// covers reports whether st records the overdue episode of a job
// overdue at at: one that began at or after at.
func covers(st api.JobState, at time.Time) bool {
	return st.Overdue != nil && !at.IsZero() && !at.After(st.Overdue.Since)
}

// overdueAtLocked is OverdueAt of job entry e.
func overdueAtLocked(e *jobEntry) time.Time {
	if e.spec.controls().ExpectSuccessWithin <= 0 {
		return time.Time{}
	}
	j := e.job()
	resumed, _ := e.resumedAt()
	if r := e.spec.controls().ResumedAt; r != nil && r.After(resumed) {
		resumed = *r
	}
	return OverdueAt(&j, e.state(), resumed)
}

// indexOverdueLocked brings the index's overdue timers and count up to
// date with job id's entry e (nil: forgotten).
func (pt *partition) indexOverdueLocked(id string, e *jobEntry) {
	x := pt.idx
	if e != nil && e.state().Overdue != nil {
		x.overdueNow[id] = struct{}{}
	} else {
		delete(x.overdueNow, id)
	}
	if e == nil || e.stale {
		x.overdue.remove(id)
		return
	}
	if wake, ok := overdueWake(e.state(), overdueAtLocked(e)); ok {
		x.overdue.set(id, wake)
	} else {
		x.overdue.remove(id)
	}
}

// overdueWrite is one job's part of a write of overdue states.
type overdueWrite struct {
	e     *jobEntry
	state api.JobState
	begun bool
	notes []notify.Entry
}

// markOverdue records the overdue episodes that began or ended by now
// in the jobs' states, each with its "overdue" notifications, in fenced
// writes guarded by the jobs' spec revisions (a job changed meanwhile is
// left stale and looked at again once the watch brings the change). The
// caller holds wmu.
func (pt *partition) markOverdue(ctx context.Context, now time.Time) {
	pt.mu.Lock()
	var ids []string
	pt.idx.overdue.due(now, func(id string, _ time.Time) { ids = append(ids, id) })
	pt.mu.Unlock()
	slices.Sort(ids)
	for len(ids) > 0 && ctx.Err() == nil {
		var ops []clientv3.Op
		var ws []overdueWrite
		cost := 1 // the fence
		pt.mu.Lock()
		for len(ids) > 0 && cost < maxWriteCost-2-2*api.MaxNotifications {
			id := ids[0]
			ids = ids[1:]
			e := pt.jobs[id]
			if e == nil || e.stale {
				continue
			}
			w, jobOps, ok := pt.overdueWriteLocked(e, now)
			if !ok {
				pt.idx.overdue.remove(id) // nothing to write: no timer is left due
				continue
			}
			ops = append(ops, pt.d.keys.SpecGuardOp(pt.p, id, e.spec.Revision, e.pauseRev(), jobOps))
			ws = append(ws, w)
			cost += 1 + len(jobOps)
		}
		pt.mu.Unlock()
		if len(ops) == 0 {
			return
		}
		resp, err := pt.commit(ctx, ops)
		if err != nil {
			pt.lg.Warn("recording overdue jobs failed", zap.Int("jobs", len(ws)), zap.Error(err))
			return
		}
		var notes []notify.Entry
		begun := 0
		pt.mu.Lock()
		for i, w := range ws {
			id := w.e.spec.ID
			if !resp.Responses[i].GetResponseTxn().Succeeded {
				w.e.stale = true
			} else if pt.jobs[id] == w.e {
				w.e.setState(w.state)
				notes = append(notes, w.notes...)
				if w.begun {
					begun++
					pt.lg.Warn("job overdue: no run succeeded within its expect_success_within", zap.String("job_id", id),
						zap.Time("since", w.state.Overdue.Since), zap.Stringer("expect_success_within", w.e.spec.controls().ExpectSuccessWithin))
				} else {
					pt.lg.Info("job no longer overdue", zap.String("job_id", id))
				}
			}
			pt.indexLocked(id)
		}
		pt.mu.Unlock()
		if len(notes) > 0 {
			pt.notes.Add(notes...)
		}
		pt.d.cfg.Metrics.overdue(begun)
	}
}

// overdueWriteLocked returns the write of job e's overdue state at now:
// its state and, for an episode that begins, its notifications; false if
// its state is already what it should be.
func (pt *partition) overdueWriteLocked(e *jobEntry, now time.Time) (overdueWrite, []clientv3.Op, bool) {
	id := e.spec.ID
	at := overdueAtLocked(e)
	o, begun := NextOverdue(e.state(), at, now)
	if o == e.state().Overdue {
		return overdueWrite{}, nil, false
	}
	st := e.state()
	st.Overdue = o
	op, err := pt.d.keys.PutStateOp(pt.p, id, st)
	if err != nil {
		pt.lg.Error("encoding a job state failed", zap.String("job_id", id), zap.Error(err))
		return overdueWrite{}, nil, false
	}
	w := overdueWrite{e: e, state: st, begun: begun}
	ops := []clientv3.Op{op}
	if begun {
		body, _ := json.Marshal(api.OverdueNotice{JobID: id, Event: api.NotifyOverdue, ExpectSuccessWithin: e.spec.controls().ExpectSuccessWithin,
			LastSucceededAt: st.LastSucceededAt, Since: o.Since, DecidedAt: now.UTC()})
		notes, entries := pt.eventNotes(e.work, id, api.NotifyOverdue, string(api.NotifyOverdue), "", o.Since, 0, body, now)
		ops, w.notes = append(ops, notes...), entries
	}
	return w, ops, true
}
