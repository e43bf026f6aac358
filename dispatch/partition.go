package dispatch

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/cenkalti/backoff/v5"
	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/jobfleet/jobfleet/dispatch/schedule"
	"github.com/jobfleet/jobfleet/shard"
	"github.com/jobfleet/jobfleet/store"
)

// spaceRecheck is how often a partition looks at the space gate again
// while etcd refuses writes for lack of space.
const spaceRecheck = time.Second

// partition is the scheduler of one owned partition. The loop goroutine
// (run) fires due jobs and expires leases; protocol handlers (assign,
// heartbeat, complete) run in HTTP goroutines. mu serialises them, and is
// held across each etcd write so writes apply in the order decisions were
// made.
type partition struct {
	d     *Dispatcher
	own   *shard.Ownership
	p     int
	lg    *zap.Logger
	nudge chan struct{} // buffer 1: re-evaluate now

	mu      sync.Mutex           // guards the fields below
	jobs    map[string]*jobEntry // by job ID
	active  map[string]*activeRun
	closed  bool      // ownership ended; handlers answer not-owner
	failed  bool      // a write of this tick failed
	retryAt time.Time // no firing before this, after a failed write
}

type jobEntry struct {
	spec     store.Job
	sched    schedule.Schedule
	schedErr error // the spec's schedule does not parse (should not happen: validated)
	state    store.JobState
	dirty    bool // state changed in memory without a fire; persist with the next write
}

type activeRun struct {
	run        store.Run
	modRev     int64     // the run key's mod revision, for compare-and-swap
	notBefore  time.Time // pending/failed: not dispatched before
	leaseUntil time.Time // running: lost after
	assigning  bool      // being handed out by a poll
}

func (pt *partition) now() time.Time { return pt.d.cfg.Clock.Now() }

// run loads the partition and schedules it until ctx is cancelled.
func (pt *partition) run(ctx context.Context) {
	bo := backoff.NewExponentialBackOff()
	bo.InitialInterval = 100 * time.Millisecond
	bo.MaxInterval = 5 * time.Second
	for ctx.Err() == nil {
		rev, err := pt.load(ctx)
		if err != nil {
			pt.lg.Warn("loading partition failed; retrying", zap.Error(err))
			select {
			case <-ctx.Done():
			case <-pt.d.cfg.Clock.After(bo.NextBackOff()):
			}
			continue
		}
		bo.Reset()
		pt.d.register(pt)
		err = pt.schedule(ctx, rev)
		if ctx.Err() == nil {
			pt.lg.Info("spec watch ended; reloading partition", zap.Error(err))
		}
	}
	pt.mu.Lock()
	pt.closed = true
	pt.mu.Unlock()
	pt.d.unregister(pt)
}

// load reads the partition's specs, triggers, states and active runs at one
// revision and returns that revision.
func (pt *partition) load(ctx context.Context) (int64, error) {
	k := pt.d.keys
	rctx, cancel := context.WithTimeout(ctx, pt.d.cfg.RequestTimeout)
	defer cancel()
	resp, err := pt.d.client.Txn(rctx).Then(
		clientv3.OpGet(k.PartitionJobsPrefix(pt.p), clientv3.WithPrefix()),
		clientv3.OpGet(k.StatePrefix(pt.p), clientv3.WithPrefix()),
		clientv3.OpGet(k.QueuePrefix(pt.p), clientv3.WithPrefix()),
	).Commit()
	if err != nil {
		return 0, fmt.Errorf("load partition %d: %w", pt.p, err)
	}
	rev := resp.Header.Revision
	jobs := map[string]*jobEntry{}
	var triggers []triggerReq
	for _, kv := range resp.Responses[0].GetResponseRange().Kvs {
		id, at, ok := k.ParseSpecKey(pt.p, string(kv.Key))
		switch {
		case !ok:
			pt.lg.Warn("ignoring unexpected key", zap.ByteString("key", kv.Key))
		case !at.IsZero():
			triggers = append(triggers, triggerReq{id: id, at: at, key: string(kv.Key)})
		default:
			if e := pt.entryFromKV(kv); e != nil {
				jobs[id] = e
			}
		}
	}
	var orphans []string   // states of deleted jobs
	var recreated []string // jobs whose state is an earlier job's of the same ID
	for _, kv := range resp.Responses[1].GetResponseRange().Kvs {
		esc := string(kv.Key[len(k.StatePrefix(pt.p)):])
		id, err := store.UnescapeID(esc)
		if err != nil {
			continue
		}
		e := jobs[id]
		if e == nil {
			orphans = append(orphans, id)
			continue
		}
		if err := json.Unmarshal(kv.Value, &e.state); err != nil {
			pt.lg.Warn("corrupt job state; starting afresh", zap.String("job_id", id), zap.Error(err))
			e.state = store.JobState{}
		}
		if last := e.state.Last; !last.IsZero() && last.Before(e.spec.InitialLast()) {
			// A state older than its job is that of an earlier job of the
			// same ID, deleted and created again while the partition had
			// no owner: the new job starts afresh, and the earlier job's
			// runs go (the new job has none yet: every fire writes the
			// state along with its runs).
			e.state = store.JobState{}
			recreated = append(recreated, id)
		}
	}
	var runKeys []string
	for _, kv := range resp.Responses[2].GetResponseRange().Kvs {
		id, at, ok := k.ParseQueueKey(pt.p, string(kv.Key))
		if !ok {
			continue
		}
		if jobs[id] == nil || slices.Contains(recreated, id) {
			if jobs[id] == nil && !slices.Contains(orphans, id) {
				orphans = append(orphans, id)
			}
			continue
		}
		runKeys = append(runKeys, k.Run(pt.p, id, at))
	}
	active, err := pt.loadRuns(ctx, runKeys)
	if err != nil {
		return 0, err
	}

	pt.mu.Lock()
	pt.jobs, pt.active, pt.closed = jobs, active, false
	pt.mu.Unlock()
	lvl := zap.DebugLevel // most partitions of a small fleet are empty: keep the log readable
	if len(jobs)+len(active)+len(triggers) > 0 {
		lvl = zap.InfoLevel
	}
	pt.lg.Log(lvl, "partition loaded", zap.Int("jobs", len(jobs)), zap.Int("active_runs", len(active)), zap.Int("triggers", len(triggers)), zap.Int64("revision", rev))

	for _, id := range orphans {
		pt.deleteJobData(ctx, id)
	}
	for _, id := range recreated {
		pt.lg.Info("job was deleted and created again while the partition had no owner; removing the earlier job's state and runs", zap.String("job_id", id))
		pt.mu.Lock()
		pt.removeJobDataLocked(ctx, id)
		pt.mu.Unlock()
	}
	for _, t := range triggers {
		pt.fireTrigger(ctx, t)
	}
	return rev, nil
}

// loadRuns reads the run documents of the active-run index.
func (pt *partition) loadRuns(ctx context.Context, keys []string) (map[string]*activeRun, error) {
	now := pt.now()
	active := map[string]*activeRun{}
	for chunk := range slices.Chunk(keys, 100) {
		ops := make([]clientv3.Op, len(chunk))
		for i, key := range chunk {
			ops[i] = clientv3.OpGet(key)
		}
		rctx, cancel := context.WithTimeout(ctx, pt.d.cfg.RequestTimeout)
		resp, err := pt.d.client.Txn(rctx).Then(ops...).Commit()
		cancel()
		if err != nil {
			return nil, fmt.Errorf("load runs of partition %d: %w", pt.p, err)
		}
		for _, r := range resp.Responses {
			kvs := r.GetResponseRange().Kvs
			if len(kvs) == 0 {
				continue
			}
			var run store.Run
			if err := json.Unmarshal(kvs[0].Value, &run); err != nil || run.Status.Final() {
				continue
			}
			// Attempts in flight under the previous owner keep running: their
			// workers heartbeat here once redirected. Give them a full lease.
			active[run.ID] = &activeRun{run: run, modRev: kvs[0].ModRevision, notBefore: now, leaseUntil: now.Add(pt.d.cfg.RunLease)}
		}
	}
	return active, nil
}

func (pt *partition) entryFromKV(kv *mvccpb.KeyValue) *jobEntry {
	j, err := store.DecodeStoredJob(kv.Value, kv.ModRevision)
	if err != nil {
		pt.lg.Warn("ignoring corrupt job spec", zap.ByteString("key", kv.Key), zap.Error(err))
		return nil
	}
	e := &jobEntry{spec: j}
	e.sched, e.schedErr = j.ParseSchedule()
	if e.schedErr != nil {
		pt.lg.Warn("job schedule does not parse; not scheduling it", zap.String("job_id", j.ID), zap.Error(e.schedErr))
	}
	return e
}

type triggerReq struct {
	id  string
	at  time.Time
	key string
}

// schedule watches the partition's specs from rev and fires due jobs until
// ctx ends or the watch fails (then the caller reloads).
func (pt *partition) schedule(ctx context.Context, rev int64) error {
	wctx, cancel := context.WithCancel(clientv3.WithRequireLeader(ctx))
	defer cancel()
	wch := pt.d.client.Watch(wctx, pt.d.keys.PartitionJobsPrefix(pt.p), clientv3.WithPrefix(), clientv3.WithRev(rev+1))
	clock := pt.d.cfg.Clock
	timer := clock.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		next := pt.tick(ctx)
		if next.IsZero() {
			timer.Reset(time.Hour)
		} else {
			timer.Reset(max(clock.Until(next), 0))
		}
		select {
		case <-ctx.Done():
			return nil
		case wr, ok := <-wch:
			if !ok {
				return errors.New("watch closed")
			}
			if err := wr.Err(); err != nil {
				return err
			}
			pt.apply(ctx, wr.Events)
		case <-timer.Chan():
		case <-pt.nudge:
		}
	}
}

func (pt *partition) poke() {
	select {
	case pt.nudge <- struct{}{}:
	default:
	}
}

// apply handles spec and trigger changes.
func (pt *partition) apply(ctx context.Context, events []*clientv3.Event) {
	k := pt.d.keys
	for _, ev := range events {
		id, at, ok := k.ParseSpecKey(pt.p, string(ev.Kv.Key))
		if !ok {
			continue
		}
		switch {
		case !at.IsZero() && ev.Type == mvccpb.PUT:
			pt.fireTrigger(ctx, triggerReq{id: id, at: at, key: string(ev.Kv.Key)})
		case !at.IsZero():
			// our own deletion of a consumed trigger
		case ev.Type == mvccpb.DELETE:
			pt.lg.Info("job deleted; removing its state and runs", zap.String("job_id", id))
			pt.deleteJobData(ctx, id)
		default:
			e := pt.entryFromKV(ev.Kv)
			if e == nil {
				continue
			}
			pt.mu.Lock()
			if old := pt.jobs[id]; old != nil {
				e.state = old.state
				if old.spec.Paused && !e.spec.Paused {
					e.state = Resumed(e.state, pt.now())
					e.dirty = true
				}
				if !old.spec.CreatedAt.Equal(e.spec.CreatedAt) { // deleted and created again
					e.state = store.JobState{}
				}
			}
			pt.jobs[id] = e
			pt.mu.Unlock()
		}
	}
}

// tick fires every due job, expires lost attempts, wakes pollers when runs
// are dispatchable, and returns when it next has something to do (zero: only
// on an event).
func (pt *partition) tick(ctx context.Context) time.Time {
	pt.mu.Lock()
	defer pt.mu.Unlock()
	now := pt.now()
	if pt.closed {
		return time.Time{} // fenced: ownership is ending; wait for ctx
	}
	if now.Before(pt.retryAt) {
		return pt.retryAt // a write failed: etcd gets a moment
	}
	if pt.d.writesRefused() != nil {
		return now.Add(spaceRecheck) // etcd is full: the gate logged it; no write would apply
	}
	pt.expireLocked(ctx, now)
	pt.fireDueLocked(ctx, now)
	if pt.failed {
		pt.failed = false
		pt.retryAt = now.Add(time.Second)
		return pt.retryAt
	}

	var next time.Time
	earlier := func(t time.Time) {
		if !t.IsZero() && (next.IsZero() || t.Before(next)) {
			next = t
		}
	}
	dispatchable := false
	for _, ar := range pt.active {
		switch {
		case ar.run.Status == store.RunRunning:
			earlier(ar.leaseUntil)
			if j := pt.jobs[ar.run.JobID]; j != nil && len(ar.run.Attempts) > 0 {
				earlier(ar.run.Attempts[len(ar.run.Attempts)-1].StartedAt.Add(j.spec.Timeout.Std() + pt.d.cfg.RunLease))
			}
		case now.Before(ar.notBefore):
			earlier(ar.notBefore)
		default:
			dispatchable = true
		}
	}
	for _, e := range pt.jobs {
		if !e.spec.Paused && e.schedErr == nil {
			earlier(e.state.Next)
		}
	}
	if dispatchable {
		pt.d.wakePollers()
	}
	return next
}

// fireDueLocked fires every job whose next time has come, in batched
// fenced transactions.
func (pt *partition) fireDueLocked(ctx context.Context, now time.Time) {
	var batch fireBatch
	for _, id := range slices.Sorted(maps.Keys(pt.jobs)) {
		e := pt.jobs[id]
		if e.spec.Paused || e.schedErr != nil {
			continue
		}
		planned := e.state.SpecRevision == e.spec.Revision && !e.state.Last.IsZero() && !e.dirty
		if planned && (e.state.Next.IsZero() || now.Before(e.state.Next)) {
			continue // not due, or its schedule is exhausted
		}
		active := pt.activeOfLocked(id)
		plan, err := PlanFires(&e.spec, e.sched, e.state, active, now, pt.d.cfg.Misfire, pt.own.Member, pt.own.Epoch)
		if err != nil {
			pt.lg.Error("planning fires failed", zap.String("job_id", id), zap.Error(err))
			continue
		}
		CapActive(&e.spec, &plan, len(active), pt.d.cfg.MaxActivePerJob)
		if len(plan.Runs) == 0 && len(plan.Replace) == 0 && plan.State == e.state && !e.dirty {
			continue
		}
		if batch.runs+len(plan.Runs) > pt.d.cfg.FireBatch && batch.runs > 0 {
			pt.commitFiresLocked(ctx, &batch, now)
		}
		batch.add(id, plan)
	}
	if len(batch.plans) > 0 {
		pt.commitFiresLocked(ctx, &batch, now)
	}
}

type fireBatch struct {
	ids   []string
	plans []FirePlan
	runs  int
}

func (b *fireBatch) add(id string, plan FirePlan) {
	b.ids = append(b.ids, id)
	b.plans = append(b.plans, plan)
	b.runs += len(plan.Runs)
}

// commitFiresLocked writes one batch: for each run, created only if absent
// (so a time fires at most once even if a previous owner fired it), its
// queue entry if it is to run; each job's new state; each replaced run
// ended. Then it updates memory to match.
func (pt *partition) commitFiresLocked(ctx context.Context, b *fireBatch, now time.Time) {
	defer func() { *b = fireBatch{} }()
	k := pt.d.keys
	var ops []clientv3.Op
	type created struct {
		op  int // index in ops of the run's nested txn
		run store.Run
	}
	var runs []created
	for i, id := range b.ids {
		plan := b.plans[i]
		e := pt.jobs[id]
		for _, rid := range plan.Replace {
			ar := pt.active[rid]
			if ar == nil {
				continue
			}
			r := ar.run
			r.Status = store.RunDead
			r.Reason = "replaced by a newer run (concurrency_policy replace)"
			if op, ok := pt.runWriteOp(ar, r); ok {
				ops = append(ops, op)
			}
		}
		for _, r := range plan.Runs {
			val, _ := json.Marshal(r)
			runKey := k.Run(pt.p, id, r.ScheduledAt)
			then := []clientv3.Op{clientv3.OpPut(runKey, string(val))}
			if r.Status == store.RunPending {
				then = append(then, clientv3.OpPut(k.Queue(pt.p, id, r.ScheduledAt), ""))
			}
			runs = append(runs, created{op: len(ops), run: r})
			ops = append(ops, clientv3.OpTxn([]clientv3.Cmp{clientv3.Compare(clientv3.CreateRevision(runKey), "=", 0)}, then, nil))
		}
		st := plan.State
		st.Runs = e.state.Runs + len(plan.Runs)
		b.plans[i].State = st
		val, _ := json.Marshal(st)
		ops = append(ops, clientv3.OpPut(k.State(pt.p, id), string(val)))
	}
	resp, err := pt.commitLocked(ctx, ops)
	if err != nil {
		pt.lg.Warn("recording fires failed; will retry", zap.Strings("job_ids", b.ids), zap.Error(err))
		return
	}
	rev := resp.Header.Revision
	// Replaced runs are final now.
	for _, plan := range b.plans {
		for _, rid := range plan.Replace {
			delete(pt.active, rid)
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
			if lag := now.Sub(c.run.ScheduledAt); lag <= pt.d.cfg.Misfire.Grace || lag <= schedule.DefaultGrace {
				pt.d.cfg.Metrics.observeLag(lag.Seconds()) // on time; misfires are counted apart
			}
		} else {
			skipped++
		}
		pt.lg.Info("fired", zap.String("job_id", c.run.JobID), zap.String("run_id", c.run.ID),
			zap.Time("scheduled_at", c.run.ScheduledAt), zap.Duration("lag", now.Sub(c.run.ScheduledAt)),
			zap.String("status", string(c.run.Status)))
	}
	pt.d.cfg.Metrics.fired(string(store.RunPending), pending)
	pt.d.cfg.Metrics.fired(string(store.RunSkipped), skipped)
	for i, id := range b.ids {
		e := pt.jobs[id]
		d := b.plans[i].Decision
		if d.Missed > 0 {
			pt.lg.Info("misfire handled", zap.String("job_id", id), zap.String("misfire_policy", string(e.spec.MisfirePolicy)),
				zap.Int("missed", d.Missed), zap.Int("skipped", d.Skipped), zap.Int("dropped", d.Dropped))
			pt.d.cfg.Metrics.misfire("fired", d.Missed-d.Skipped-d.Dropped)
			pt.d.cfg.Metrics.misfire("skipped", d.Skipped)
			pt.d.cfg.Metrics.misfire("dropped", d.Dropped)
		}
		e.state, e.dirty = b.plans[i].State, false
		if e.state.Runs > pt.d.cfg.HistoryLimit+pt.d.cfg.HistoryLimit/10 {
			pt.trimLocked(ctx, id)
		}
	}
}

// activeOfLocked returns the IDs of job id's active runs.
func (pt *partition) activeOfLocked(id string) []string {
	var ids []string
	for rid, ar := range pt.active {
		if ar.run.JobID == id {
			ids = append(ids, rid)
		}
	}
	slices.Sort(ids)
	return ids
}

// runWriteOp returns the compare-and-swap write of ar's run as r: applied
// only if the run key still has ar.modRev; the queue entry goes when r is
// final.
func (pt *partition) runWriteOp(ar *activeRun, r store.Run) (clientv3.Op, bool) {
	k := pt.d.keys
	val, err := json.Marshal(r)
	if err != nil {
		return clientv3.Op{}, false
	}
	runKey := k.Run(pt.p, r.JobID, r.ScheduledAt)
	then := []clientv3.Op{clientv3.OpPut(runKey, string(val))}
	if r.Status.Final() {
		then = append(then, clientv3.OpDelete(k.Queue(pt.p, r.JobID, r.ScheduledAt)))
	}
	return clientv3.OpTxn([]clientv3.Cmp{clientv3.Compare(clientv3.ModRevision(runKey), "=", ar.modRev)}, then, nil), true
}

// commitLocked runs ops in one transaction fenced on the partition's epoch.
func (pt *partition) commitLocked(ctx context.Context, ops []clientv3.Op) (*clientv3.TxnResponse, error) {
	rctx, cancel := context.WithTimeout(ctx, pt.d.cfg.RequestTimeout)
	defer cancel()
	resp, err := pt.d.commits.commit(rctx, pt.own, ops)
	if err != nil && !errors.Is(err, shard.ErrFenced) {
		err = store.Classify(err)
	}
	pt.d.recordWrite(err)
	if err != nil {
		pt.d.cfg.Metrics.commitError()
		pt.failed = true
		if errors.Is(err, shard.ErrFenced) {
			pt.closed = true
		}
		return nil, err
	}
	return resp, nil
}

// writeRunLocked replaces ar's run with r (compare-and-swap, fenced) and
// updates memory. It returns false if the write did not apply.
func (pt *partition) writeRunLocked(ctx context.Context, ar *activeRun, r store.Run) bool {
	op, ok := pt.runWriteOp(ar, r)
	if !ok {
		return false
	}
	resp, err := pt.commitLocked(ctx, []clientv3.Op{op})
	if err != nil {
		pt.lg.Warn("recording run failed", zap.String("run_id", r.ID), zap.Error(err))
		return false
	}
	if !resp.Responses[0].GetResponseTxn().Succeeded {
		pt.lg.Warn("run changed behind the owner's back; dropping it from memory", zap.String("run_id", r.ID))
		delete(pt.active, r.ID)
		return false
	}
	ar.run, ar.modRev = r, resp.Header.Revision
	if r.Status.Final() {
		delete(pt.active, r.ID)
	}
	return true
}

// expireLocked ends attempts whose lease ran out or that ran past their
// timeout, scheduling retries or marking runs dead.
func (pt *partition) expireLocked(ctx context.Context, now time.Time) {
	for _, rid := range slices.Sorted(maps.Keys(pt.active)) {
		ar := pt.active[rid]
		e := pt.jobs[ar.run.JobID]
		var spec *store.Job
		if e != nil {
			spec = &e.spec
		}
		lost, reason := LeaseExpired(spec, ar.run, ar.leaseUntil, now, pt.d.cfg.RunLease)
		if !lost || spec == nil {
			continue
		}
		r, notBefore := FinishAttempt(spec, ar.run, Outcome{Error: reason}, now, jitter())
		if pt.writeRunLocked(ctx, ar, r) {
			ar.notBefore = notBefore
			pt.d.cfg.Metrics.attemptLost()
			pt.d.cfg.Metrics.finishedRun(string(r.Status))
			pt.lg.Warn("attempt lost", zap.String("job_id", r.JobID), zap.String("run_id", r.ID),
				zap.Int("attempt", len(r.Attempts)), zap.String("reason", reason), zap.String("status", string(r.Status)))
		}
	}
}

// fireTrigger fires a manual trigger request once and deletes it.
func (pt *partition) fireTrigger(ctx context.Context, t triggerReq) {
	pt.mu.Lock()
	defer pt.mu.Unlock()
	k := pt.d.keys
	e := pt.jobs[t.id]
	if e == nil {
		// The job is gone; drop the request.
		if _, err := pt.commitLocked(ctx, []clientv3.Op{clientv3.OpDelete(t.key)}); err != nil {
			pt.lg.Warn("dropping trigger of a deleted job failed", zap.String("job_id", t.id), zap.Error(err))
		}
		return
	}
	now := pt.now()
	r := NewRun(&e.spec, t.at, now, pt.own.Member, pt.own.Epoch)
	r.Reason = "triggered manually"
	if e.spec.ConcurrencyPolicy == store.ConcurrencyForbid && len(pt.activeOfLocked(t.id)) > 0 {
		r.Status = store.RunSkipped
		r.Reason = "triggered manually; concurrency_policy forbid: an earlier run is still active"
	}
	var replaced []string
	var ops []clientv3.Op
	if e.spec.ConcurrencyPolicy == store.ConcurrencyReplace {
		for _, rid := range pt.activeOfLocked(t.id) {
			ar := pt.active[rid]
			old := ar.run
			old.Status, old.Reason = store.RunDead, "replaced by a newer run (concurrency_policy replace)"
			if op, ok := pt.runWriteOp(ar, old); ok {
				ops = append(ops, op)
				replaced = append(replaced, rid)
			}
		}
	}
	val, _ := json.Marshal(r)
	runKey := k.Run(pt.p, t.id, t.at)
	then := []clientv3.Op{clientv3.OpPut(runKey, string(val))}
	if r.Status == store.RunPending {
		then = append(then, clientv3.OpPut(k.Queue(pt.p, t.id, t.at), ""))
	}
	st := e.state
	st.Runs++
	if r.Status == store.RunPending {
		st.Fired++
	} else {
		st.Skipped++
	}
	stVal, _ := json.Marshal(st)
	createAt := len(ops)
	ops = append(ops,
		clientv3.OpTxn([]clientv3.Cmp{clientv3.Compare(clientv3.CreateRevision(runKey), "=", 0)}, then, nil),
		clientv3.OpPut(k.State(pt.p, t.id), string(stVal)),
		clientv3.OpDelete(t.key))
	resp, err := pt.commitLocked(ctx, ops)
	if err != nil {
		pt.lg.Warn("firing trigger failed; it stays until the next attempt", zap.String("job_id", t.id), zap.Error(err))
		return
	}
	for _, rid := range replaced {
		delete(pt.active, rid)
	}
	e.state = st
	if resp.Responses[createAt].GetResponseTxn().Succeeded && r.Status == store.RunPending {
		pt.active[r.ID] = &activeRun{run: r, modRev: resp.Header.Revision, notBefore: now}
		pt.d.wakePollers()
	}
	pt.d.cfg.Metrics.fired(string(r.Status), 1)
	pt.lg.Info("fired", zap.String("job_id", t.id), zap.String("run_id", r.ID), zap.Time("scheduled_at", t.at),
		zap.String("status", string(r.Status)), zap.String("reason", "trigger"))
}

// deleteJobData removes a deleted job's state, runs and queue entries, and
// forgets it.
func (pt *partition) deleteJobData(ctx context.Context, id string) {
	pt.mu.Lock()
	defer pt.mu.Unlock()
	pt.removeJobDataLocked(ctx, id)
	delete(pt.jobs, id)
	for _, rid := range pt.activeOfLocked(id) {
		delete(pt.active, rid)
	}
}

// removeJobDataLocked deletes job id's state, runs and queue entries from
// etcd (not its spec, nor anything in memory).
func (pt *partition) removeJobDataLocked(ctx context.Context, id string) {
	k := pt.d.keys
	ops := []clientv3.Op{
		clientv3.OpDelete(k.State(pt.p, id)),
		clientv3.OpDelete(k.RunPrefix(pt.p, id), clientv3.WithPrefix()),
		clientv3.OpDelete(k.QueuePrefix(pt.p)+store.EscapeID(id)+"/", clientv3.WithPrefix()),
	}
	if _, err := pt.commitLocked(ctx, ops); err != nil {
		pt.lg.Warn("removing a deleted job's data failed; retried at the next load", zap.String("job_id", id), zap.Error(err))
	}
}

// trimLocked deletes job id's oldest final runs beyond HistoryLimit.
func (pt *partition) trimLocked(ctx context.Context, id string) {
	e := pt.jobs[id]
	k := pt.d.keys
	excess := e.state.Runs - pt.d.cfg.HistoryLimit
	rctx, cancel := context.WithTimeout(ctx, pt.d.cfg.RequestTimeout)
	resp, err := pt.d.client.Get(rctx, k.RunPrefix(pt.p, id), clientv3.WithPrefix(), clientv3.WithKeysOnly(),
		clientv3.WithSort(clientv3.SortByKey, clientv3.SortAscend), clientv3.WithLimit(int64(excess+len(pt.activeOfLocked(id)))))
	cancel()
	if err != nil {
		return
	}
	total := resp.Count
	activeKeys := map[string]bool{}
	for _, rid := range pt.activeOfLocked(id) {
		ar := pt.active[rid]
		activeKeys[k.Run(pt.p, id, ar.run.ScheduledAt)] = true
	}
	var ops []clientv3.Op
	for _, kv := range resp.Kvs {
		if len(ops) >= excess || len(ops) >= 100 {
			break
		}
		if !activeKeys[string(kv.Key)] {
			ops = append(ops, clientv3.OpDelete(string(kv.Key)))
		}
	}
	st := e.state
	st.Runs = int(total) - len(ops)
	val, _ := json.Marshal(st)
	ops = append(ops, clientv3.OpPut(k.State(pt.p, id), string(val)))
	if _, err := pt.commitLocked(ctx, ops); err == nil {
		e.state = st
	}
}

// assign hands up to n dispatchable runs whose executor the worker runs to
// worker, recording each attempt (fenced, compare-and-swap) first.
func (pt *partition) assign(ctx context.Context, worker string, executors map[string]bool, n int) []Assignment {
	pt.mu.Lock()
	defer pt.mu.Unlock()
	if pt.closed || pt.d.writesRefused() != nil {
		return nil
	}
	now := pt.now()
	var picked []*activeRun
	for _, rid := range slices.Sorted(maps.Keys(pt.active)) {
		if len(picked) >= n {
			break
		}
		ar := pt.active[rid]
		e := pt.jobs[ar.run.JobID]
		if e == nil || ar.assigning || !Dispatchable(ar.run, ar.notBefore, now) || !executors[e.spec.Executor.Type] {
			continue
		}
		picked = append(picked, ar)
	}
	if len(picked) == 0 {
		return nil
	}
	ops := make([]clientv3.Op, 0, len(picked))
	next := make([]store.Run, len(picked))
	for i, ar := range picked {
		next[i] = StartAttempt(ar.run, worker, now)
		op, _ := pt.runWriteOp(ar, next[i])
		ops = append(ops, op)
	}
	resp, err := pt.commitLocked(ctx, ops)
	if err != nil {
		pt.lg.Warn("recording attempts failed", zap.Error(err))
		return nil
	}
	var out []Assignment
	for i, ar := range picked {
		if !resp.Responses[i].GetResponseTxn().Succeeded {
			delete(pt.active, ar.run.ID)
			continue
		}
		ar.run, ar.modRev, ar.leaseUntil = next[i], resp.Header.Revision, now.Add(pt.d.cfg.RunLease)
		e := pt.jobs[ar.run.JobID]
		payload := e.spec.Payload
		out = append(out, Assignment{
			RunID:       ar.run.ID,
			JobID:       ar.run.JobID,
			Attempt:     len(ar.run.Attempts),
			ScheduledAt: ar.run.ScheduledAt,
			Executor:    e.spec.Executor,
			Payload:     payload,
			Timeout:     e.spec.Timeout,
			Lease:       store.Duration(pt.d.cfg.RunLease),
			Owner:       pt.own.Member,
			OwnerAddr:   pt.d.cfg.MemberAddr,
		})
		pt.poke() // the loop's timer must cover the new lease
		pt.d.cfg.Metrics.attemptStarted()
		pt.lg.Info("attempt started", zap.String("job_id", ar.run.JobID), zap.String("run_id", ar.run.ID),
			zap.Int("attempt", len(ar.run.Attempts)), zap.String("worker", worker))
	}
	return out
}

// current returns the active run whose current attempt is (attempt,
// worker), or ErrStaleAttempt.
func (pt *partition) currentLocked(runID string, attempt int, worker string) (*activeRun, error) {
	ar := pt.active[runID]
	if ar == nil || ar.run.Status != store.RunRunning || len(ar.run.Attempts) != attempt || ar.run.Attempts[attempt-1].Worker != worker {
		pt.d.cfg.Metrics.staleReport()
		return nil, fmt.Errorf("%w: run %s attempt %d by %s", ErrStaleAttempt, runID, attempt, worker)
	}
	return ar, nil
}

func (pt *partition) notOwnedLocked() error {
	owner, addr := pt.d.cfg.Lookup(pt.p)
	if owner == pt.own.Member {
		owner, addr = "", ""
	}
	return &NotOwnerError{Partition: pt.p, Owner: owner, OwnerAddr: addr}
}

// takeBack undoes the hand-out of attempt a, which its worker never
// received: the run goes back to the state it had, without the attempt.
func (pt *partition) takeBack(ctx context.Context, a Assignment) {
	pt.mu.Lock()
	defer pt.mu.Unlock()
	if pt.closed {
		return
	}
	ar := pt.active[a.RunID]
	if ar == nil || ar.run.Status != store.RunRunning || len(ar.run.Attempts) != a.Attempt {
		return
	}
	r := ar.run
	r.Attempts = r.Attempts[:len(r.Attempts)-1]
	r.Status = store.RunPending
	if n := len(r.Attempts); n > 0 {
		r.Status = store.RunFailed
	}
	if pt.writeRunLocked(ctx, ar, r) {
		pt.lg.Info("attempt taken back: its poll was cancelled before delivery", zap.String("run_id", a.RunID), zap.Int("attempt", a.Attempt))
		pt.d.wakePollers()
	}
}

func (pt *partition) heartbeat(req HeartbeatRequest) (HeartbeatResponse, error) {
	pt.mu.Lock()
	defer pt.mu.Unlock()
	if pt.closed {
		return HeartbeatResponse{}, pt.notOwnedLocked()
	}
	ar, err := pt.currentLocked(req.RunID, req.Attempt, req.Worker)
	if err != nil {
		return HeartbeatResponse{}, err
	}
	ar.leaseUntil = pt.now().Add(pt.d.cfg.RunLease)
	return HeartbeatResponse{Lease: store.Duration(pt.d.cfg.RunLease)}, nil
}

func (pt *partition) complete(ctx context.Context, req CompleteRequest) (CompleteResponse, error) {
	pt.mu.Lock()
	defer pt.mu.Unlock()
	if pt.closed {
		return CompleteResponse{}, pt.notOwnedLocked()
	}
	ar, err := pt.currentLocked(req.RunID, req.Attempt, req.Worker)
	if err != nil {
		return CompleteResponse{}, err
	}
	e := pt.jobs[ar.run.JobID]
	if e == nil {
		return CompleteResponse{}, fmt.Errorf("%w: job %q was deleted", ErrStaleAttempt, ar.run.JobID)
	}
	now := pt.now()
	r, notBefore := FinishAttempt(&e.spec, ar.run, Outcome{Success: req.Success, Error: req.Error, Output: req.Output}, now, jitter())
	if !pt.writeRunLocked(ctx, ar, r) {
		if pt.closed {
			return CompleteResponse{}, pt.notOwnedLocked()
		}
		return CompleteResponse{}, fmt.Errorf("recording the result of run %s failed; report it again", r.ID)
	}
	ar.notBefore = notBefore
	pt.d.cfg.Metrics.finishedRun(string(r.Status))
	pt.lg.Info("attempt finished", zap.String("job_id", r.JobID), zap.String("run_id", r.ID), zap.Int("attempt", req.Attempt),
		zap.String("worker", req.Worker), zap.String("status", string(r.Status)), zap.String("error", req.Error))
	if !r.Status.Final() {
		pt.poke() // a retry's backoff timer
	}
	return CompleteResponse{Status: r.Status}, nil
}
