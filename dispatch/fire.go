package dispatch

import (
	"context"
	"maps"
	"slices"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/jobfleet/jobfleet/schedule"
	"github.com/jobfleet/jobfleet/store"
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
		turn, err := pt.d.waitFireTurn(ctx)
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
		resp, err := pt.commit(ctx, b.ops)
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
		pt.readopt(ctx, lost)
	}
}

// fireTurn is a partition's room in the member's budget of fires in
// flight (Config.FiresInFlight) for one write: taken for FireBatch runs
// before the write is planned, cut to the runs it plans (at least one),
// given back when its answer is in.
type fireTurn struct {
	d    *Dispatcher
	held int64 // runs of the budget held
}

// waitFireTurn waits for room for one write of fires, in the order the
// partitions asked. It returns ctx's error if ctx ends first.
func (d *Dispatcher) waitFireTurn(ctx context.Context) (*fireTurn, error) {
	t := &fireTurn{d: d}
	if d.fires == nil {
		return t, nil
	}
	waited := d.cfg.Metrics.fireWaits()
	err := d.fires.Acquire(ctx, int64(d.cfg.FireBatch))
	waited()
	if err != nil {
		return nil, err
	}
	t.held = int64(d.cfg.FireBatch)
	d.cfg.Metrics.firesInFlight(float64(t.held))
	return t, nil
}

// planned gives back the room the write does not use: it holds runs
// (at least one, at most what was taken).
func (t *fireTurn) planned(runs int) {
	keep := min(max(int64(runs), 1), t.held)
	if t.d.fires == nil || keep == t.held {
		return
	}
	t.d.fires.Release(t.held - keep)
	t.d.cfg.Metrics.firesInFlight(float64(keep - t.held))
	t.held = keep
}

// done gives back the room the write holds.
func (t *fireTurn) done() {
	if t.d.fires == nil || t.held == 0 {
		return
	}
	t.d.fires.Release(t.held)
	t.d.cfg.Metrics.firesInFlight(float64(-t.held))
	t.held = 0
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
		if pt.jobs[t.id] == nil {
			q.dropped = append(q.dropped, t.key) // the job is gone
			continue
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
	b := &fireBatch{dropped: q.dropped}
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
			plan = FirePlan{State: e.state}
		}
		if room := max(pt.d.cfg.FireBatch-len(plan.Runs), 0); len(trigs) > room {
			trigs = trigs[:room]
			pt.poke() // the others next
		}
		j := e.spec.job()
		for _, t := range trigs {
			after := ActiveAfter(active, plan)
			tp := PlanTrigger(&j, plan.State, after, t.at, now, pt.own.Member, pt.own.Epoch)
			CapActive(&j, &tp, len(after), pt.d.cfg.MaxActivePerJob)
			plan = MergePlans(plan, tp)
		}
		if len(plan.Runs) == 0 && len(plan.Replace) == 0 && plan.State == e.state && !e.dirty && len(trigs) == 0 {
			q.ids = q.ids[1:]
			continue
		}
		if len(b.jobs) > 0 && b.runs+len(plan.Runs) > pt.d.cfg.FireBatch {
			break // the job opens the next write
		}
		q.ids = q.ids[1:]
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
	j := e.spec.job()
	plan, err := PlanFires(&j, e.sched, e.state, active, now, pt.d.cfg.Misfire, pt.own.Member, pt.own.Epoch)
	if err != nil {
		pt.lg.Error("planning fires failed", zap.String("job_id", e.spec.ID), zap.Error(err))
		return FirePlan{}, false
	}
	CapActive(&j, &plan, len(active), pt.d.cfg.MaxActivePerJob)
	return plan, true
}

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
// and trigger requests of deleted jobs to drop. Its operations, built by
// build, are the jobs' guarded writes in order, then the trims, then the
// drops.
type fireBatch struct {
	jobs    []jobPlan
	trims   []trim   // final runs it deletes
	dropped []string // trigger keys of jobs that are gone
	runs    int
	bytes   int // of the run documents it writes
	ops     []clientv3.Op
}

// jobPlan is one job's part of a fireBatch: its merged plan, the trigger
// requests it consumes, and its writes.
type jobPlan struct {
	id       string
	specRev  int64 // the spec revision the plan was decided from
	plan     FirePlan
	triggers []triggerReq
	ops      []clientv3.Op // within the job's guard
	created  []createdRun
	replaced []replacedRun
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
	run    store.Run
	size   int  // bytes of its document
	manual bool // made by a trigger
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
		widest = max(widest, len(jp.ops)+2)
	}
	return 1 + len(b.jobs) + len(b.trims) + len(b.dropped) + widest // 1: the fence
}

// build makes the batch's operations.
func (b *fireBatch) build(pt *partition) {
	k := pt.d.keys
	b.ops = b.ops[:0]
	for _, jp := range b.jobs {
		b.ops = append(b.ops, k.SpecGuardOp(pt.p, jp.id, jp.specRev, jp.ops))
	}
	b.ops = append(b.ops, pt.trimOps(b.trims)...)
	for _, key := range b.dropped {
		b.ops = append(b.ops, clientv3.OpDelete(key))
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
	jp := jobPlan{id: id, specRev: e.spec.Revision, triggers: trigs}
	for _, rid := range plan.Replace {
		ar := pt.active[rid]
		if ar == nil {
			continue
		}
		w, ok := pt.runWriteOp(ar, Replaced(ar.run, newestPending(plan), now))
		if !ok {
			return
		}
		jp.replaced = append(jp.replaced, replacedRun{op: len(jp.ops), ar: ar, w: w})
		jp.ops = append(jp.ops, w.op)
	}
	pending := false
	for _, r := range plan.Runs {
		val, err := store.EncodeRun(r)
		if err != nil {
			pt.lg.Error("encoding a run failed", zap.String("run_id", r.ID), zap.Error(err))
			return
		}
		manual := slices.ContainsFunc(trigs, func(t triggerReq) bool { return t.at.Equal(r.ScheduledAt) })
		jp.created = append(jp.created, createdRun{op: len(jp.ops), run: r, size: len(val), manual: manual})
		jp.ops = append(jp.ops, k.CreateRunOp(r, val))
		pending = pending || r.Status == store.RunPending
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
		jp.ops = append(jp.ops, clientv3.OpDelete(t.key))
	}
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
		if plan.Runs[i].Status == store.RunPending {
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
func (pt *partition) appliedLocked(b *fireBatch, resp *clientv3.TxnResponse, now time.Time) (lost []store.Run) {
	rev := resp.Header.Revision
	pt.trimmedLocked(b.trims, resp, len(b.jobs))
	for _, key := range b.dropped {
		delete(pt.triggers, key)
	}
	pending, skipped := 0, 0
	for i, jp := range b.jobs {
		e := pt.jobs[jp.id]
		guard := resp.Responses[i].GetResponseTxn()
		if !guard.Succeeded || e == nil {
			pt.lg.Info("job changed while its fires were being written; not recorded, planning again", zap.String("job_id", jp.id))
			if e != nil {
				e.stale = true
				pt.indexLocked(jp.id)
			}
			continue
		}
		for _, rr := range jp.replaced {
			ar := rr.ar
			if !guard.Responses[rr.op].GetResponseTxn().Succeeded {
				pt.lg.Warn("run changed behind the owner's back; reading it again", zap.String("run_id", ar.run.ID))
				pt.dropActiveLocked(ar.run.ID)
				lost = append(lost, ar.run)
				continue
			}
			running := ar.run.Status == store.RunRunning
			pt.updatedLocked(ar, rr.w, rev, time.Time{}) // final now
			if n := len(ar.run.Attempts); running && n > 0 {
				// Its worker learns it at its next heartbeat, and stops.
				worker := ar.run.Attempts[n-1].Worker
				pt.cancelled[ar.run.ID] = cancelledAttempt{attempt: n, worker: worker, credential: ar.run.Attempts[n-1].Credential, until: now.Add(pt.d.cfg.RunLease)}
				pt.lg.Info("attempt cancelled: its run was replaced", zap.String("job_id", ar.run.JobID), zap.String("run_id", ar.run.ID),
					zap.Int("attempt", n), zap.String("worker", worker))
			}
		}
		for _, t := range jp.triggers {
			delete(pt.triggers, t.key)
		}
		for _, c := range jp.created {
			if !guard.Responses[c.op].GetResponseTxn().Succeeded {
				pt.lg.Warn("run existed already; not fired again", zap.String("run_id", c.run.ID))
				lost = append(lost, c.run)
				continue
			}
			pt.hist.created(c.run.JobID, c.run.ScheduledAt, c.size, c.run.Status.Final())
			if c.run.Status == store.RunPending {
				pending++
				pt.addActiveLocked(&activeRun{run: c.run, modRev: rev, notBefore: now, size: c.size})
				if lag := now.Sub(c.run.ScheduledAt); !c.manual && (lag <= pt.d.cfg.Misfire.Grace || lag <= schedule.DefaultGrace) {
					pt.d.cfg.Metrics.observeLag(lag.Seconds()) // on time; misfires are counted apart
				}
			} else {
				skipped++
			}
			if ce := pt.lg.Check(zap.InfoLevel, "fired"); ce != nil { // a herd fires hundreds of thousands: no fields unless logged
				fields := []zap.Field{zap.String("job_id", c.run.JobID), zap.String("run_id", c.run.ID),
					zap.Time("scheduled_at", c.run.ScheduledAt), zap.Duration("lag", now.Sub(c.run.ScheduledAt)),
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
		e.state, e.dirty = jp.plan.State, false
		pt.indexLocked(jp.id)
	}
	pt.d.cfg.Metrics.fired(string(store.RunPending), pending)
	pt.d.cfg.Metrics.fired(string(store.RunSkipped), skipped)
	return lost
}
