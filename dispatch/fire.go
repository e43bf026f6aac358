package dispatch

import (
	"context"
	"maps"
	"slices"
	"time"

	"go.uber.org/zap"
)

// fireDue fires every job whose next time has come and every pending
// trigger request, in batched fenced transactions: for each job, PlanFires
// then PlanTrigger for each of its requests in time order, each capped by
// CapActive, merged into one plan (MergePlans) so that a job's runs,
// replacements and state go in one write. The caller holds wmu.
//
// It plans one write at a time, in the order of the jobs' IDs, all at now,
// and plans the next once the previous one's answer is in memory: a
// partition holds at most one write of planned fires, however many of its
// jobs are due (a herd: thousands per partition), so the runs planned and
// not yet written stay few and planning does not come in one burst of the
// whole partition. Each write also waits for room in the member's budget
// of runs in flight (Config.FiresInFlight), in the order the partitions
// asked, taken before it is planned and given back when its answer is in.
func (pt *partition) fireDue(ctx context.Context, now time.Time) {
	pt.mu.Lock()
	q := pt.dueLocked(now)
	pt.mu.Unlock()
	for !q.empty() {
		turn, err := pt.d.fires.turn(ctx)
		if err != nil {
			return // released while waiting: the next owner fires them
		}
		pt.mu.Lock()
		b := pt.nextBatchLocked(q, now)
		if b != nil {
			pt.addTrimsLocked([]*fireBatch{b}, now)
		}
		pt.mu.Unlock()
		if b == nil {
			turn.done()
			return
		}
		turn.planned(b.runs)
		answered := func() {}
		if hook := pt.d.fireHook; hook != nil {
			answered = hook(pt.p, b.runs)
		}
		resp, err := pt.commitFires(ctx, b)
		answered()
		turn.done()
		if err != nil {
			pt.lg.Warn("recording fires failed; will retry", zap.Strings("job_ids", b.ids()), zap.Error(err))
			if unknownOutcome(err) {
				// The write may have applied all the same, its runs
				// pending in etcd. The next tick plans again from the
				// unchanged state, later: a time then past the misfire
				// grace may not be planned again, and its run would stay
				// pending, unknown to its owner. The next tick reads the
				// runs back first (readoptUnread), taking in those that
				// exist.
				pt.mu.Lock()
				for _, jp := range b.jobs {
					for _, c := range jp.created {
						pt.unread[c.run.ID] = c.run
					}
				}
				pt.mu.Unlock()
			}
			return // the next tick plans again from the unchanged state
		}
		pt.mu.Lock()
		lost := pt.appliedLocked(b, resp, now)
		pt.mu.Unlock()
		if len(b.notes) > 0 {
			pt.notes.Add(b.notes...)
		}
		pt.readopt(ctx, lost)
	}
}

// dueQueue is what fireDue has left to plan at one instant: the due jobs,
// by ID in order, with their trigger requests, and the trigger requests of
// jobs that are gone, to drop with the first write.
type dueQueue struct {
	ids     []string
	byJob   map[string][]triggerReq
	dropped []string
}

func (q *dueQueue) empty() bool { return len(q.ids) == 0 && len(q.dropped) == 0 }

// dueLocked returns the jobs due at now and the trigger requests pending.
func (pt *partition) dueLocked(now time.Time) *dueQueue {
	q := &dueQueue{byJob: map[string][]triggerReq{}}
	for _, key := range slices.Sorted(maps.Keys(pt.triggers)) {
		t := pt.triggers[key]
		e := pt.jobs[t.id]
		if e == nil {
			q.dropped = append(q.dropped, t.key) // the job is gone
			continue
		}
		if t.cause != nil {
			switch fire, keep := handoverDue(e, t); {
			case keep:
				continue // held while the job is paused
			case !fire:
				pt.lg.Info("hand-over dropped: the job no longer runs after that upstream run's job and status", zap.String("job_id", t.id), zap.String("caused_by", t.cause.Run))
				q.dropped = append(q.dropped, t.key)
				continue
			}
		}
		q.byJob[t.id] = append(q.byJob[t.id], t)
	}
	q.ids = pt.dueJobsLocked(now, q.byJob)
	return q
}

// nextBatchLocked plans the next write of q at now: the jobs taken from
// the front of q until the write holds FireBatch runs (a single job's plan
// may exceed it), fireBatchJobs jobs or fireBatchBytes, and q's dropped
// trigger requests if it is the first. It returns nil when q holds nothing
// more to write. A job takes at most FireBatch of its trigger requests per
// tick, fewer if its scheduled fires already make that many runs; the rest
// wait for the next tick, so that a backlog of requests makes several
// writes rather than one too large for etcd. Planning is a function of the
// job's memory and now, and writes of q's other jobs leave that memory as
// it was: a job planned into one write is planned as it would have been
// with every write of q planned at once.
func (pt *partition) nextBatchLocked(q *dueQueue, now time.Time) *fireBatch {
	b := &fireBatch{dropped: q.dropped, jobs: make([]jobPlan, 0, min(len(q.ids), fireBatchJobs, max(pt.d.cfg.FireBatch, 1)))}
	q.dropped = nil
	for len(q.ids) > 0 {
		id := q.ids[0]
		e := pt.jobs[id]
		if e == nil {
			q.ids = q.ids[1:]
			continue
		}
		trigs := q.byJob[id]
		active := pt.activeOfLocked(id)
		plan, ok := pt.planFiresLocked(e, active, now)
		if !ok && len(trigs) == 0 {
			q.ids = q.ids[1:]
			continue
		}
		if !ok {
			plan = FirePlan{State: e.state()}
		}
		if room := max(pt.d.cfg.FireBatch-len(plan.Runs), 0); len(trigs) > room {
			trigs = trigs[:room]
			pt.poke() // the others next
		}
		j := e.job()
		for i, t := range trigs {
			after := ActiveAfter(active, plan)
			if t.cause != nil {
				t.at = pt.handoverTimeLocked(id, t.at, plan)
				trigs[i] = t
			}
			tp := PlanTrigger(&j, plan.State, after, t.at, now, pt.own.Member, pt.own.Epoch)
			tp.Runs[0].Payload = t.payload
			if t.cause != nil {
				tp.Runs[0].CausedBy = t.cause
				tp.Runs[0].Reason = handoverReason(t.cause, tp.Runs[0])
			}
			CapActive(&j, &tp, len(after), pt.d.cfg.MaxActivePerJob)
			plan = MergePlans(plan, tp)
		}
		if len(plan.Runs) == 0 && len(plan.Replace) == 0 && plan.State == e.state() && !e.dirty && len(trigs) == 0 {
			q.ids = q.ids[1:]
			continue
		}
		if len(b.jobs) > 0 && b.runs+len(plan.Runs) > pt.d.cfg.FireBatch {
			break // the job opens the next write
		}
		q.ids = q.ids[1:]
		pt.broadcastLocked(e, &plan)
		pt.addLocked(b, e, plan, trigs, now)
		if b.bytes >= fireBatchBytes || len(b.jobs) >= fireBatchJobs {
			break
		}
	}
	if len(b.jobs) == 0 && len(b.dropped) == 0 {
		return nil
	}
	return b
}

// planFiresLocked plans job e's scheduled fires at now, capped; ok is
// false if it has nothing to do.
func (pt *partition) planFiresLocked(e *jobEntry, active []string, now time.Time) (FirePlan, bool) {
	if e.paused() || e.sched.err != nil {
		return FirePlan{}, false
	}
	if plannedLocked(e) && (e.state().Next.IsZero() || now.Before(e.due())) {
		return FirePlan{}, false // not due, or its schedule is exhausted
	}
	cals, ok := pt.calendars()
	if !ok && len(e.spec.controls().Exclude) > 0 {
		pt.calendarsAwaited = true
		return FirePlan{}, false // planned once the calendars are read
	}
	j := e.job()
	st := e.state()
	if at, ok := e.resumedAt(); ok && at.After(st.Last) {
		st = Resumed(st, at) // resumed while no owner saw it: what the pause kept is forgiven
	}
	plan, err := PlanFires(&j, e.sched.Schedule, st, active, now, pt.d.cfg.Misfire, cals, pt.own.Member, pt.own.Epoch)
	if err != nil {
		pt.lg.Error("planning fires failed", zap.String("job_id", e.spec.ID), zap.Error(err))
		return FirePlan{}, false
	}
	CapActive(&j, &plan, len(active), pt.d.cfg.MaxActivePerJob)
	LimitFires(&j, &plan)
	return plan, true
}

// due returns when the job's next time fires: state.Next delayed by its
// jitter (schedule.Schedule.FireTime); zero if none.
func (e *jobEntry) due() time.Time { return e.sched.FireTime(e.state().Next) }

// paused reports whether the job fires nothing on its own: paused by
// hand, or by its owner (pause_after_failures) since its last write.
func (e *jobEntry) paused() bool {
	return e.spec.Paused || e.st.full.AutoPaused(e.revision()) // only a state held whole has a pause
}
