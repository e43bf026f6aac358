package dispatch

import (
	"context"
	"maps"
	"slices"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/jobfleet/jobfleet/dispatch/schedule"
	"github.com/jobfleet/jobfleet/store"
)

// fireDueLocked fires every job whose next time has come and every
// pending trigger request, in batched fenced transactions: for each job,
// PlanFires then PlanTrigger for each of its requests in time order, each
// capped by CapActive, merged into one plan (MergePlans) so a job's runs,
// replacements and state go in one write.
func (pt *partition) fireDueLocked(ctx context.Context, now time.Time) {
	byJob := map[string][]triggerReq{}
	var orphans []triggerReq // requests of jobs that are gone
	for _, key := range slices.Sorted(maps.Keys(pt.triggers)) {
		t := pt.triggers[key]
		if pt.jobs[t.id] == nil {
			orphans = append(orphans, t)
			continue
		}
		byJob[t.id] = append(byJob[t.id], t)
	}
	var batch fireBatch
	for _, t := range orphans {
		batch.dropped = append(batch.dropped, t.key)
	}
	for _, id := range slices.Sorted(maps.Keys(pt.jobs)) {
		e := pt.jobs[id]
		trigs := byJob[id]
		active := pt.activeOfLocked(id)
		plan, ok := pt.planFiresLocked(e, active, now)
		if !ok && len(trigs) == 0 {
			continue
		}
		if !ok {
			plan = FirePlan{State: e.state}
		}
		for _, t := range trigs {
			after := ActiveAfter(active, plan)
			tp := PlanTrigger(&e.spec, plan.State, after, t.at, now, pt.own.Member, pt.own.Epoch)
			CapActive(&e.spec, &tp, len(after), pt.d.cfg.MaxActivePerJob)
			plan = MergePlans(plan, tp)
		}
		if len(plan.Runs) == 0 && len(plan.Replace) == 0 && plan.State == e.state && !e.dirty && len(trigs) == 0 {
			continue
		}
		if batch.full(len(plan.Runs), pt.d.cfg.FireBatch) {
			pt.commitFiresLocked(ctx, &batch, now)
		}
		batch.add(id, plan, trigs)
	}
	if len(batch.jobs) > 0 || len(batch.dropped) > 0 {
		pt.commitFiresLocked(ctx, &batch, now)
	}
}

// planFiresLocked plans job e's scheduled fires at now, capped; ok is
// false if it has nothing to do.
func (pt *partition) planFiresLocked(e *jobEntry, active []string, now time.Time) (FirePlan, bool) {
	if e.spec.Paused || e.schedErr != nil {
		return FirePlan{}, false
	}
	planned := e.state.SpecRevision == e.spec.Revision && !e.state.Last.IsZero() && !e.dirty
	if planned && (e.state.Next.IsZero() || now.Before(e.state.Next)) {
		return FirePlan{}, false // not due, or its schedule is exhausted
	}
	plan, err := PlanFires(&e.spec, e.sched, e.state, active, now, pt.d.cfg.Misfire, pt.own.Member, pt.own.Epoch)
	if err != nil {
		pt.lg.Error("planning fires failed", zap.String("job_id", e.spec.ID), zap.Error(err))
		return FirePlan{}, false
	}
	CapActive(&e.spec, &plan, len(active), pt.d.cfg.MaxActivePerJob)
	return plan, true
}

// fireBatch is one fenced write of fires: each job's merged plan with the
// trigger requests it consumes, and requests of deleted jobs to drop.
type fireBatch struct {
	jobs    []jobPlan
	dropped []string // trigger keys of jobs that are gone
	runs    int
}

type jobPlan struct {
	id       string
	plan     FirePlan
	triggers []triggerReq
}

// full reports whether adding a plan of n runs would take the batch past
// max runs (a batch always takes at least one plan).
func (b *fireBatch) full(n, max int) bool { return b.runs > 0 && b.runs+n > max }

func (b *fireBatch) add(id string, plan FirePlan, triggers []triggerReq) {
	b.jobs = append(b.jobs, jobPlan{id: id, plan: plan, triggers: triggers})
	b.runs += len(plan.Runs)
}

// commitFiresLocked writes one batch: for each run, created only if absent
// (so a time fires at most once even if a previous owner fired it), its
// queue entry if it is to run; each replaced run ended; each job's new
// state; the consumed trigger requests deleted. Then it updates memory to
// match. On failure nothing changes in memory: the next tick plans again.
func (pt *partition) commitFiresLocked(ctx context.Context, b *fireBatch, now time.Time) {
	defer func() { *b = fireBatch{} }()
	k := pt.d.keys
	var ops []clientv3.Op
	type created struct {
		op     int // index in ops of the run's nested txn
		run    store.Run
		manual bool
	}
	var runs []created
	var ids []string
	for i := range b.jobs {
		jp := &b.jobs[i]
		ids = append(ids, jp.id)
		e := pt.jobs[jp.id]
		for _, rid := range jp.plan.Replace {
			ar := pt.active[rid]
			if ar == nil {
				continue
			}
			r := ar.run
			r.Status = store.RunDead
			r.Reason = "replaced by a newer run (concurrency_policy replace)"
			op, _, err := k.UpdateRunOp(r, ar.modRev)
			if err != nil {
				pt.lg.Error("encoding a replaced run failed", zap.String("run_id", rid), zap.Error(err))
				return
			}
			ops = append(ops, op)
		}
		for _, r := range jp.plan.Runs {
			op, _, err := k.CreateRunOp(r)
			if err != nil {
				pt.lg.Error("encoding a run failed", zap.String("run_id", r.ID), zap.Error(err))
				return
			}
			manual := slices.ContainsFunc(jp.triggers, func(t triggerReq) bool { return t.at.Equal(r.ScheduledAt) })
			runs = append(runs, created{op: len(ops), run: r, manual: manual})
			ops = append(ops, op)
		}
		jp.plan.State.Runs = e.state.Runs + len(jp.plan.Runs)
		op, err := k.PutStateOp(pt.p, jp.id, jp.plan.State)
		if err != nil {
			pt.lg.Error("encoding a job state failed", zap.String("job_id", jp.id), zap.Error(err))
			return
		}
		ops = append(ops, op)
		for _, t := range jp.triggers {
			ops = append(ops, clientv3.OpDelete(t.key))
		}
	}
	for _, key := range b.dropped {
		ops = append(ops, clientv3.OpDelete(key))
	}
	resp, err := pt.commitLocked(ctx, ops)
	if err != nil {
		pt.lg.Warn("recording fires failed; will retry", zap.Strings("job_ids", ids), zap.Error(err))
		return
	}
	rev := resp.Header.Revision
	for _, key := range b.dropped {
		delete(pt.triggers, key)
	}
	// Replaced runs are final now.
	for _, jp := range b.jobs {
		for _, rid := range jp.plan.Replace {
			delete(pt.active, rid)
		}
		for _, t := range jp.triggers {
			delete(pt.triggers, t.key)
		}
	}
	pending, skipped := 0, 0
	for _, c := range runs {
		if !resp.Responses[c.op].GetResponseTxn().Succeeded {
			pt.lg.Warn("run existed already; not fired again", zap.String("run_id", c.run.ID))
			continue
		}
		if c.run.Status == store.RunPending {
			pending++
			pt.active[c.run.ID] = &activeRun{run: c.run, modRev: rev, notBefore: now}
			if lag := now.Sub(c.run.ScheduledAt); !c.manual && (lag <= pt.d.cfg.Misfire.Grace || lag <= schedule.DefaultGrace) {
				pt.d.cfg.Metrics.observeLag(lag.Seconds()) // on time; misfires are counted apart
			}
		} else {
			skipped++
		}
		fields := []zap.Field{zap.String("job_id", c.run.JobID), zap.String("run_id", c.run.ID),
			zap.Time("scheduled_at", c.run.ScheduledAt), zap.Duration("lag", now.Sub(c.run.ScheduledAt)),
			zap.String("status", string(c.run.Status))}
		if c.manual {
			fields = append(fields, zap.String("reason", "trigger"))
		}
		pt.lg.Info("fired", fields...)
	}
	pt.d.cfg.Metrics.fired(string(store.RunPending), pending)
	pt.d.cfg.Metrics.fired(string(store.RunSkipped), skipped)
	for _, jp := range b.jobs {
		e := pt.jobs[jp.id]
		d := jp.plan.Decision
		if d.Missed > 0 {
			pt.lg.Info("misfire handled", zap.String("job_id", jp.id), zap.String("misfire_policy", string(e.spec.MisfirePolicy)),
				zap.Int("missed", d.Missed), zap.Int("skipped", d.Skipped), zap.Int("dropped", d.Dropped))
			pt.d.cfg.Metrics.misfire("fired", d.Missed-d.Skipped-d.Dropped)
			pt.d.cfg.Metrics.misfire("skipped", d.Skipped)
			pt.d.cfg.Metrics.misfire("dropped", d.Dropped)
		}
		e.state, e.dirty = jp.plan.State, false
		if e.state.Runs > pt.d.cfg.HistoryLimit+pt.d.cfg.HistoryLimit/10 {
			pt.trimLocked(ctx, jp.id)
		}
	}
}
