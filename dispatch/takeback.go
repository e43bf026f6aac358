package dispatch

import (
	"context"
	"encoding/json"
	"errors"
	"maps"
	"slices"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/jobfleet/jobfleet/store"
)

// queueTakeBack asks the loop to undo the hand-out of attempt a, which
// its worker never received (its poll ended first). The loop writes the
// run back without the attempt (takeBackQueued) under the partition's
// context, fenced, and retries after a failed write; a take-back that
// never applies (the partition is handed over meanwhile) leaves the
// attempt to expire with its lease, and the run is retried. It is a reader.
func (pt *partition) queueTakeBack(worker string, a AttemptGrant) {
	pt.mu.Lock()
	if pt.closed {
		pt.mu.Unlock()
		return
	}
	pt.takeBacks[a.RunID] = undelivered{attempt: a.Attempt, worker: worker}
	pt.mu.Unlock()
	pt.poke()
}

// undelivered is an attempt recorded for a poll that ended before its
// worker got it.
type undelivered struct {
	attempt int
	worker  string
	// unsure: the attempt's write failed with an unknown outcome (a
	// timeout, a lost connection), so memory may not show it although
	// etcd does: the run is read again before it is taken back.
	unsure bool
}

// takeBackQueued writes back the runs of queued take-backs without their
// undelivered attempts: pending, or failed with the attempts they had. A
// take-back whose attempt is no longer the run's current one is moot; one
// whose write fails stays queued for the next tick. The caller holds wmu.
func (pt *partition) takeBackQueued(ctx context.Context) {
	pt.resolveUnsure(ctx)
	type back struct {
		runID     string
		u         undelivered
		ar        *activeRun
		r         store.Run
		notBefore time.Time
	}
	var todo []back
	pt.mu.Lock()
	for _, rid := range slices.Sorted(maps.Keys(pt.takeBacks)) {
		u := pt.takeBacks[rid]
		ar := pt.active[rid]
		if u.unsure {
			continue // not read yet: resolveUnsure failed
		}
		if ar == nil || ar.run.Status != store.RunRunning || len(ar.run.Attempts) != u.attempt ||
			ar.run.Attempts[u.attempt-1].Worker != u.worker {
			delete(pt.takeBacks, rid) // finished, expired or taken back already
			continue
		}
		r := ar.run
		r.Attempts = slices.Clone(r.Attempts[:len(r.Attempts)-1])
		r.Status = store.RunPending
		if len(r.Attempts) > 0 {
			r.Status = store.RunFailed
		}
		todo = append(todo, back{runID: rid, u: u, ar: ar, r: r, notBefore: ar.notBefore})
	}
	pt.mu.Unlock()
	for _, b := range todo {
		_, err := pt.writeRun(ctx, b.ar, b.r, b.notBefore)
		if err != nil && !errors.Is(err, errChangedBehind) {
			continue // retried at the next tick
		}
		pt.mu.Lock()
		if pt.takeBacks[b.runID] == b.u {
			delete(pt.takeBacks, b.runID)
		}
		pt.mu.Unlock()
		if err == nil {
			pt.lg.Info("attempt taken back: its poll ended before delivery", zap.String("run_id", b.runID), zap.Int("attempt", b.u.attempt),
				zap.String("worker", b.u.worker))
			pt.d.wakePollers()
		}
	}
}

// resolveUnsure settles take-backs whose attempt's write had an unknown
// outcome: a run whose memory shows the attempt (read again meanwhile
// after a refused write) is taken back; the others are read, and a run
// stored with the attempt (the write applied) is taken into memory as
// stored, to be taken back, while one stored without it (the write did
// not apply) needs none. A failed read leaves them for the next tick. The
// caller holds wmu.
func (pt *partition) resolveUnsure(ctx context.Context) {
	holds := func(r store.Run, u undelivered) bool {
		return r.Status == store.RunRunning && len(r.Attempts) == u.attempt && r.Attempts[u.attempt-1].Worker == u.worker
	}
	pt.mu.Lock()
	var runs []store.Run
	for _, rid := range slices.Sorted(maps.Keys(pt.takeBacks)) {
		u, ar := pt.takeBacks[rid], pt.active[rid]
		switch {
		case !u.unsure:
		case ar == nil:
			delete(pt.takeBacks, rid) // final, or deleted with its job
		case holds(ar.run, u):
			u.unsure = false
			pt.takeBacks[rid] = u
		default:
			runs = append(runs, ar.run)
		}
	}
	pt.mu.Unlock()
	if len(runs) == 0 {
		return
	}
	kvs, err := pt.readRuns(ctx, runs)
	if err != nil {
		pt.lg.Warn("reading runs whose attempt's write had an unknown outcome failed; retrying", zap.Int("runs", len(runs)), zap.Error(err))
		pt.failed = true
		return
	}
	pt.mu.Lock()
	defer pt.mu.Unlock()
	for i, r := range runs {
		u, ar := pt.takeBacks[r.ID], pt.active[r.ID]
		delete(pt.takeBacks, r.ID)
		kv := kvs[i]
		if ar == nil || kv == nil {
			continue
		}
		var stored store.Run
		if err := json.Unmarshal(kv.Value, &stored); err != nil || !holds(stored, u) {
			continue // the write did not apply (or the run moved on)
		}
		if kv.ModRevision != ar.modRev {
			pt.hist.rewritten(stored.JobID, stored.ScheduledAt, ar.size, len(kv.Value), false)
			ar.run, ar.modRev, ar.size = stored, kv.ModRevision, len(kv.Value)
		}
		u.unsure = false
		pt.takeBacks[r.ID] = u
		pt.lg.Info("attempt whose write had an unknown outcome found applied; taking it back", zap.String("run_id", r.ID),
			zap.Int("attempt", u.attempt), zap.String("worker", u.worker))
	}
}

// readRuns reads the stored documents of runs in one transaction; nil
// for a run that is not stored. The caller holds neither lock or wmu only.
func (pt *partition) readRuns(ctx context.Context, runs []store.Run) ([]*mvccpb.KeyValue, error) {
	ops := make([]clientv3.Op, len(runs))
	for i, r := range runs {
		ops[i] = clientv3.OpGet(pt.d.keys.Run(pt.p, r.JobID, r.ScheduledAt))
	}
	rctx, cancel := context.WithTimeout(ctx, pt.d.cfg.RequestTimeout)
	defer cancel()
	resp, err := pt.d.client.Txn(rctx).Then(ops...).Commit()
	if err != nil {
		return nil, err
	}
	out := make([]*mvccpb.KeyValue, len(runs))
	for i, rr := range resp.Responses {
		if kvs := rr.GetResponseRange().Kvs; len(kvs) > 0 {
			out[i] = kvs[0]
		}
	}
	return out, nil
}
