package dispatch

import (
	"context"
	"slices"
	"time"

	"github.com/jobfleet/jobfleet/api"

	"go.etcd.io/etcd/api/v3/etcdserverpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.opentelemetry.io/otel/trace"
	"go.uber.org/zap"

	"github.com/jobfleet/jobfleet/dispatch/notify"
	"github.com/jobfleet/jobfleet/schedule"
	"github.com/jobfleet/jobfleet/store"
)

// Bounds of one write of fires besides Config.FireBatch: the bytes of the
// run documents it writes (replaced runs carry their attempts' outputs),
// the jobs it writes, and its cost in etcd's operations per transaction
// (see txnCost), well under etcd's limits (1.5 MiB, 128 operations).
const (
	fireBatchBytes = 512 << 10
	fireBatchJobs  = 40
	maxWriteCost   = 110
)

// fireBatch is one fenced write of fires: each job's plan with its writes
// (guarded by the spec revision they were decided from), history trims,
// and trigger requests of deleted jobs to drop. build makes its
// operations in one of two forms:
//
//   - guarded as a whole (cmps set): If(every job's guard) Then(the jobs'
//     writes in order, then the trims), one level of nesting fewer than
//     a guard per job, for etcd to decode, check and apply. If any job
//     changed since its plan nothing applies, and the write is sent again
//     in the other form (partition.commitFires);
//   - guarded job by job (cmps nil): the jobs' guarded writes in order
//     (store.SpecGuardOp), then the trims, then the drops: a changed
//     job's writes are refused alone.
//
// The first is taken unless the batch drops triggers or deletes keys of
// its own (etcd refuses a write whose deletion at one level overlaps a
// put at that level or below; job by job, each job's writes are a level
// apart) or is too costly for it (batchCost).
type fireBatch struct {
	jobs    []jobPlan
	trims   []trim   // final runs it deletes
	dropped []string // trigger keys of jobs that are gone
	runs    int
	bytes   int  // of the run documents it writes
	perJob  bool // guard job by job (the guard as a whole was refused)
	cmps    []clientv3.Cmp
	ops     []clientv3.Op
	trimsAt int // index in ops of the first trim
	// notes are the notifications of the jobs whose writes applied, for
	// the delivery once the state lock is released (appliedLocked).
	notes []notify.Entry
}

// jobPlan is one job's part of a fireBatch: its merged plan, the trigger
// requests it consumes, and its writes.
type jobPlan struct {
	id       string
	specRev  int64 // the spec revision the plan was decided from
	pauseRev int64 // and the pause key's (0: none)
	plan     FirePlan
	triggers []triggerReq
	ops      []clientv3.Op // within the job's guard
	at       int           // index in the batch's ops of the first of ops, guarded as a whole
	deep     int           // the widest nested write in ops (a replaced run's hand-overs), if wider than a run's creation
	created  []createdRun
	replaced []replacedRun
	notes    []notify.Entry // written with the plan (notify_events.go)
}

// replacedRun is an active run the batch ends.
type replacedRun struct {
	op int // index in the job's ops of its write
	ar *activeRun
	w  runWrite
}

// createdRun is a run the batch creates if absent.
type createdRun struct {
	op     int // index in the job's ops of the run's nested txn
	run    api.Run
	size   int  // bytes of its document
	manual bool // made by a trigger
	// handover is the key of the hand-over that fires it (after.go), ""
	// for none: the run is created only with the key's deletion.
	handover string
	trigger  triggerReq // that hand-over
	span     trace.Span // of its fire; nil while tracing is off
}

func (b *fireBatch) ids() []string {
	ids := make([]string, len(b.jobs))
	for i, jp := range b.jobs {
		ids[i] = jp.id
	}
	return ids
}

// cost returns what the batch's write will count against etcd's limit of
// operations per transaction before trims: see txnCost. A job's guard
// holds its operations, each run's creation two more.
func (b *fireBatch) cost() int {
	widest := 0
	for _, jp := range b.jobs {
		widest = max(widest, len(jp.ops)+max(3, jp.deep))
	}
	return 1 + len(b.jobs) + len(b.trims) + len(b.dropped) + widest // 1: the fence
}

// batchCost returns what the batch's write guarded as a whole counts
// against etcd's limit of operations per transaction (see txnCost): the
// fence, the guard's level (as wide as its compares or its writes), and
// the widest transaction nested in it (a run's creation, a replaced run's
// hand-overs, a trim).
func (b *fireBatch) batchCost() int {
	ops, deep := len(b.trims)+len(b.dropped), 3
	for _, jp := range b.jobs {
		ops += len(jp.ops)
		deep = max(deep, jp.deep)
	}
	return 1 + max(2*len(b.jobs), ops) + deep
}

// guardedAsWhole reports whether build takes the form guarded as a
// whole (see fireBatch).
func (b *fireBatch) guardedAsWhole() bool {
	if b.perJob || len(b.dropped) > 0 || b.batchCost() > maxWriteCost {
		return false
	}
	for _, jp := range b.jobs {
		if slices.ContainsFunc(jp.ops, clientv3.Op.IsDelete) {
			return false
		}
	}
	return true
}

// build makes the batch's operations, in the form guardedAsWhole picks.
func (b *fireBatch) build(pt *partition) {
	k := pt.d.keys
	b.cmps, b.ops = nil, b.ops[:0]
	if b.guardedAsWhole() {
		n := len(b.trims)
		for _, jp := range b.jobs {
			n += len(jp.ops)
		}
		b.cmps, b.ops = make([]clientv3.Cmp, 0, 2*len(b.jobs)), slices.Grow(b.ops, n)
		for i := range b.jobs {
			jp := &b.jobs[i]
			b.cmps = k.AppendSpecGuard(b.cmps, pt.p, jp.id, jp.specRev, jp.pauseRev)
			jp.at = len(b.ops)
			b.ops = append(b.ops, jp.ops...)
		}
	} else {
		b.ops = slices.Grow(b.ops, len(b.jobs)+len(b.trims)+len(b.dropped))
		for _, jp := range b.jobs {
			b.ops = append(b.ops, k.SpecGuardOp(pt.p, jp.id, jp.specRev, jp.pauseRev, jp.ops))
		}
	}
	b.trimsAt = len(b.ops)
	b.ops = append(b.ops, pt.trimOps(b.trims)...)
	for _, key := range b.dropped {
		b.ops = append(b.ops, clientv3.OpDelete(key))
	}
}

// jobResponses returns whether job i's guard held in the batch's write
// answered by resp, and the responses of its operations (jobPlan.ops).
func (b *fireBatch) jobResponses(resp *clientv3.TxnResponse, i int) (bool, []*etcdserverpb.ResponseOp) {
	if b.cmps != nil {
		if !resp.Succeeded {
			return false, nil // refused as a whole: nothing applied
		}
		jp := b.jobs[i]
		return true, resp.Responses[jp.at : jp.at+len(jp.ops)]
	}
	guard := resp.Responses[i].GetResponseTxn()
	return guard.Succeeded, guard.Responses
}

// commitFires writes batch b. Guarded as a whole and refused (a job
// changed since its plan), it writes it again guarded job by job, so that
// the other jobs' fires apply: the refused write applied nothing. The
// caller holds wmu and not mu.
func (pt *partition) commitFires(ctx context.Context, b *fireBatch) (*clientv3.TxnResponse, error) {
	resp, err := pt.commitIf(ctx, b.cmps, b.ops)
	if err != nil || resp.Succeeded || b.cmps == nil {
		return resp, err
	}
	b.perJob = true
	b.build(pt)
	return pt.commitIf(ctx, nil, b.ops)
}

// addTrimsLocked adds to the last of batches the history trimming that
// their runs make due (see partition.trimHistory), as far as the write has
// room, so that a job at its max_runs costs one write per fire, not two.
// Then it builds each batch's operations.
func (pt *partition) addTrimsLocked(batches []*fireBatch, now time.Time) {
	adding, addingBytes := map[string]int{}, map[string]int64{}
	for _, b := range batches {
		for _, jp := range b.jobs {
			for _, c := range jp.created {
				adding[c.run.JobID]++
				addingBytes[c.run.JobID] += int64(c.size)
			}
		}
	}
	last := batches[len(batches)-1]
	if room := min(trimLimit, maxWriteCost-last.cost()); room > 0 {
		last.trims = pt.hist.planTrim(now, pt.budgetShare(), room, adding, addingBytes)
	}
	for _, b := range batches {
		b.build(pt)
	}
}

// addLocked adds job e's plan to b with its writes: each replaced run
// ended (compare-and-swap); each run created only if absent (so a time
// fires at most once even if a previous owner fired it), with its queue
// entry if it is to run; the job's new state; the consumed trigger
// requests deleted. It adds nothing if a document cannot be encoded.
func (pt *partition) addLocked(b *fireBatch, e *jobEntry, plan FirePlan, trigs []triggerReq, now time.Time) {
	k := pt.d.keys
	id := e.spec.ID
	jp := jobPlan{id: id, specRev: e.spec.Revision, pauseRev: e.pauseRev(), triggers: trigs,
		ops:     make([]clientv3.Op, 0, len(plan.Replace)+len(plan.Runs)+1+len(trigs)),
		created: make([]createdRun, 0, len(plan.Runs))}
	for _, rid := range plan.Replace {
		ar := pt.active[rid]
		if ar == nil {
			continue
		}
		w, ok := pt.runWriteOp(ar, Replaced(ar.run, newestPending(plan), now))
		if !ok {
			return
		}
		if hs := pt.handoverOps(w.run, now); len(hs) > 0 {
			w.op = k.UpdateRunOp(w.run, w.val, ar.modRev, append(slices.Clip(w.failing), hs...)...)
			jp.deep = max(jp.deep, len(hs)+len(w.failing)+2)
		}
		jp.replaced = append(jp.replaced, replacedRun{op: len(jp.ops), ar: ar, w: w})
		jp.ops = append(jp.ops, w.op)
	}
	pending := false
	for i := range plan.Runs {
		span := traceFire(&plan.Runs[i])
		r := plan.Runs[i]
		val, err := store.EncodeRun(r)
		if err != nil {
			pt.lg.Error("encoding a run failed", zap.String("run_id", r.ID), zap.Error(err))
			endFire(span, "encoding the run failed")
			return
		}
		manual := slices.ContainsFunc(trigs, func(t triggerReq) bool { return t.at.Equal(r.ScheduledAt) })
		c := createdRun{op: len(jp.ops), run: r, size: len(val), manual: manual, span: span}
		op := k.CreateRunOp(r, val)
		if i := slices.IndexFunc(trigs, func(t triggerReq) bool { return t.cause != nil && t.at.Equal(r.ScheduledAt) }); i >= 0 && r.CausedBy != nil {
			c.handover, c.trigger = trigs[i].key, trigs[i]
			op = k.CreateCausedRunOp(r, val, c.handover)
		}
		jp.created = append(jp.created, c)
		jp.ops = append(jp.ops, op)
		pending = pending || r.Status == api.RunPending
	}
	plan.State.Runs = len(plan.Runs)
	if jh := pt.hist.jobs[id]; jh != nil {
		plan.State.Runs += jh.runs
	}
	if pending {
		plan.State.FinishedAt = time.Time{} // running again
	}
	op, err := k.PutStateOp(pt.p, id, plan.State)
	if err != nil {
		pt.lg.Error("encoding a job state failed", zap.String("job_id", id), zap.Error(err))
		return
	}
	jp.ops = append(jp.ops, op)
	for _, t := range trigs {
		if t.cause == nil { // a hand-over goes with its run (CreateCausedRunOp)
			jp.ops = append(jp.ops, clientv3.OpDelete(t.key))
		}
	}
	notes, entries := pt.planNotes(e, plan, now)
	jp.ops, jp.notes = append(jp.ops, notes...), entries
	jp.plan = plan
	b.jobs = append(b.jobs, jp)
	b.runs += len(plan.Runs)
	for _, c := range jp.created {
		b.bytes += c.size
	}
	for _, r := range jp.replaced {
		b.bytes += r.w.size
	}
}

// newestPending returns the ID of the run plan starts last, "" if none.
func newestPending(plan FirePlan) string {
	for i := len(plan.Runs) - 1; i >= 0; i-- {
		if plan.Runs[i].Status == api.RunPending {
			return plan.Runs[i].ID
		}
	}
	return ""
}

// appliedLocked updates memory after batch b was written with response
// resp. A job whose guard refused its writes (its spec changed since the
// plan) is left as it was: the watch brings the change, and the next tick
// plans again. It returns the runs whose write did not apply (see
// readopt).
func (pt *partition) appliedLocked(b *fireBatch, resp *clientv3.TxnResponse, now time.Time) (lost []api.Run) {
	rev := resp.Header.Revision
	pt.trimmedLocked(b.trims, resp, b.trimsAt)
	for _, key := range b.dropped {
		delete(pt.triggers, key)
	}
	pending, skipped := 0, 0
	for i, jp := range b.jobs {
		e := pt.jobs[jp.id]
		held, rs := b.jobResponses(resp, i)
		if !held || e == nil {
			pt.lg.Info("job changed while its fires were being written; not recorded, planning again", zap.String("job_id", jp.id))
			for _, c := range jp.created {
				endFire(c.span, "job changed while its fires were being written")
			}
			if e != nil {
				e.stale = true
				pt.indexLocked(jp.id)
			}
			continue
		}
		for _, rr := range jp.replaced {
			ar := rr.ar
			if !rs[rr.op].GetResponseTxn().Succeeded {
				pt.lg.Warn("run changed behind the owner's back; reading it again", zap.String("run_id", ar.run.ID))
				pt.dropActiveLocked(ar.run.ID)
				lost = append(lost, ar.run)
				continue
			}
			running := ar.chains()
			pt.updatedLocked(ar, rr.w, rev, time.Time{}) // final now
			pt.stopChainsLocked(running, ar.run, now)    // their workers learn it at their next heartbeat, and stop
		}
		for _, t := range jp.triggers {
			delete(pt.triggers, t.key)
		}
		b.notes = append(b.notes, jp.notes...)
		for _, c := range jp.created {
			if created := rs[c.op].GetResponseTxn(); !created.Succeeded {
				endFire(c.span, "not created")
				if c.handover != "" {
					pt.handoverRefusedLocked(c, created)
					lost = append(lost, c.run)
					continue
				}
				pt.lg.Warn("run existed already; not fired again", zap.String("run_id", c.run.ID))
				lost = append(lost, c.run)
				continue
			}
			endFire(c.span, "")
			pt.hist.created(c.run.JobID, c.run.ScheduledAt, c.size, c.run.Status.Final())
			due := c.run.ScheduledAt
			if !c.manual {
				due = e.sched.FireTime(due) // lag counts from the jittered time
			}
			if c.run.Status == api.RunPending {
				pending++
				pt.addActiveLocked(&activeRun{run: c.run, modRev: rev, size: c.size, chainRT: chainRT{notBefore: now}})
				if lag := now.Sub(due); !c.manual && (lag <= pt.d.cfg.Misfire.Grace || lag <= schedule.DefaultGrace) {
					pt.d.cfg.Metrics.observeLag(lag.Seconds()) // on time; misfires are counted apart
				}
			} else {
				skipped++
			}
			if ce := pt.lg.Check(zap.InfoLevel, "fired"); ce != nil { // a herd fires hundreds of thousands: no fields unless logged
				fields := []zap.Field{zap.String("job_id", c.run.JobID), zap.String("run_id", c.run.ID),
					zap.Time("scheduled_at", c.run.ScheduledAt), zap.Duration("lag", now.Sub(due)),
					zap.String("status", string(c.run.Status))}
				if c.manual {
					fields = append(fields, zap.String("reason", "trigger"))
				}
				ce.Write(fields...)
			}
		}
		d := jp.plan.Decision
		if d.Missed > 0 {
			pt.lg.Info("misfire handled", zap.String("job_id", jp.id), zap.String("misfire_policy", string(e.spec.MisfirePolicy)),
				zap.Int("missed", d.Missed), zap.Int("skipped", d.Skipped), zap.Int("dropped", d.Dropped))
			pt.d.cfg.Metrics.misfire("fired", d.Missed-d.Skipped-d.Dropped)
			pt.d.cfg.Metrics.misfire("skipped", d.Skipped)
			pt.d.cfg.Metrics.misfire("dropped", d.Dropped)
		}
		e.setState(jp.plan.State)
		e.dirty = false
		pt.indexLocked(jp.id)
	}
	pt.d.cfg.Metrics.fired(string(api.RunPending), pending)
	pt.d.cfg.Metrics.fired(string(api.RunSkipped), skipped)
	return lost
}
