package dispatch

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"maps"
	"slices"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/jobfleet/jobfleet/api"
)

// queueTakeBack asks the loop to undo the hand-out of attempt a, which
// its worker never received (its poll ended first). The loop writes the
// run back without the attempt (takeBackQueued) under the partition's
// context, fenced, and retries after a failed write; a take-back that
// never applies (the partition is handed over meanwhile) leaves the
// attempt to expire with its lease, and the run (or item) is retried. It
// is a reader.
func (pt *partition) queueTakeBack(worker string, a AttemptGrant) {
	pt.mu.Lock()
	if pt.closed {
		pt.mu.Unlock()
		return
	}
	k := chainKey{run: a.RunID, item: noItem}
	if a.Item != nil {
		k.item = a.Item.Index
	}
	pt.takeBacks[k] = undelivered{attempt: a.Attempt, worker: worker}
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

// sortedKeys returns the take-backs' chains in order: by run, then item.
func sortedKeys[V any](m map[chainKey]V) []chainKey {
	return slices.SortedFunc(maps.Keys(m), func(a, b chainKey) int {
		return cmp.Or(cmp.Compare(a.run, b.run), cmp.Compare(a.item, b.item))
	})
}

// withoutAttempt returns r without chain item's last attempt: the chain
// pending, or failed with the attempts it had; the run of items settled
// again.
func withoutAttempt(r api.Run, item int) api.Run {
	back := func(status *api.RunStatus, as []api.Attempt) []api.Attempt {
		as = slices.Clone(as[:len(as)-1])
		*status = api.RunPending
		if len(as) > 0 {
			*status = api.RunFailed
		}
		return as
	}
	if item == noItem {
		r.Attempts = back(&r.Status, r.Attempts)
		return r
	}
	r.Items = slices.Clone(r.Items)
	it := &r.Items[item]
	it.Attempts = back(&it.Status, it.Attempts)
	r, _ = Settle(r, time.Time{}) // undecided: an attempt less decides nothing
	return r
}

// takeBackQueued writes back the runs of queued take-backs without their
// undelivered attempts: the chain pending, or failed with the attempts it
// had. A take-back whose attempt is no longer its chain's current one is
// moot; one whose write fails stays queued for the next tick. The
// take-backs of one run's items go in one write. The caller holds wmu.
func (pt *partition) takeBackQueued(ctx context.Context) {
	pt.resolveUnsure(ctx)
	type back struct {
		keys      []chainKey
		us        []undelivered
		ar        *activeRun
		r         api.Run
		notBefore time.Time
	}
	var todo []*back
	pt.mu.Lock()
	byRun := map[string]*back{}
	for _, k := range sortedKeys(pt.takeBacks) {
		u := pt.takeBacks[k]
		ar := pt.active[k.run]
		if u.unsure {
			continue // not read yet: resolveUnsure failed
		}
		var c chain
		ok := ar != nil
		if ok {
			c, ok = ar.chain(k.item)
		}
		if !ok || !c.holds(u.attempt, u.worker) {
			delete(pt.takeBacks, k) // finished, expired or taken back already
			continue
		}
		b := byRun[k.run]
		if b == nil {
			b = &back{ar: ar, r: ar.run, notBefore: ar.notBefore}
			byRun[k.run] = b
			todo = append(todo, b)
		}
		b.r = withoutAttempt(b.r, k.item)
		b.keys, b.us = append(b.keys, k), append(b.us, u)
	}
	pt.mu.Unlock()
	for _, b := range todo {
		_, err := pt.writeRun(ctx, b.ar, b.r, b.notBefore)
		if err != nil && !errors.Is(err, errChangedBehind) {
			continue // retried at the next tick
		}
		pt.mu.Lock()
		for i, k := range b.keys {
			if pt.takeBacks[k] == b.us[i] {
				delete(pt.takeBacks, k)
			}
		}
		pt.mu.Unlock()
		if err == nil {
			for i, k := range b.keys {
				pt.lg.Info("attempt taken back: its poll ended before delivery", zap.String("run_id", k.run), itemField(k.item),
					zap.Int("attempt", b.us[i].attempt), zap.String("worker", b.us[i].worker))
			}
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
	holds := func(r api.Run, k chainKey, u undelivered) bool {
		c, ok := chainOf(r, k.item, nil)
		return ok && c.holds(u.attempt, u.worker)
	}
	pt.mu.Lock()
	var runs []api.Run
	reading := map[string]bool{}
	for _, k := range sortedKeys(pt.takeBacks) {
		u, ar := pt.takeBacks[k], pt.active[k.run]
		switch {
		case !u.unsure:
		case ar == nil:
			delete(pt.takeBacks, k) // final, or deleted with its job
		case holds(ar.run, k, u):
			u.unsure = false
			pt.takeBacks[k] = u
		case !reading[k.run]:
			reading[k.run] = true
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
		ar := pt.active[r.ID]
		kv := kvs[i]
		var stored api.Run
		applied := ar != nil && kv != nil && json.Unmarshal(kv.Value, &stored) == nil
		adopted := false
		for _, k := range sortedKeys(pt.takeBacks) {
			u := pt.takeBacks[k]
			if k.run != r.ID || !u.unsure {
				continue
			}
			delete(pt.takeBacks, k)
			if !applied || !holds(stored, k, u) {
				continue // the write did not apply (or the run moved on)
			}
			if !adopted && kv.ModRevision != ar.modRev {
				pt.hist.rewritten(stored.JobID, stored.ScheduledAt, ar.size, len(kv.Value), false)
				ar.run, ar.modRev, ar.size = stored, kv.ModRevision, len(kv.Value)
			}
			adopted = true
			u.unsure = false
			pt.takeBacks[k] = u
			pt.lg.Info("attempt whose write had an unknown outcome found applied; taking it back", zap.String("run_id", r.ID), itemField(k.item),
				zap.Int("attempt", u.attempt), zap.String("worker", u.worker))
		}
	}
}

// readRuns reads the stored documents of runs in one transaction; nil
// for a run that is not stored. The caller holds neither lock or wmu only.
func (pt *partition) readRuns(ctx context.Context, runs []api.Run) ([]*mvccpb.KeyValue, error) {
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
