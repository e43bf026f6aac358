package dispatch

import (
	"context"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/jobfleet/jobfleet/api"
	"github.com/jobfleet/jobfleet/dispatch/limits"
	"github.com/jobfleet/jobfleet/store"
)

// Slots of limit keys are given back (docs/ownership.md, "Limit keys"):
//
//   - with the write that records the attempt's result, which its worker
//     reported (releaseOps): the executor has ended;
//   - by the partition's loop (releaseHolders) for a holder whose attempt
//     is no longer running in memory (lost, cancelled, taken back,
//     deleted with its job, or held across a handoff by an attempt the
//     new owner does not know) once its execution is known ended: the
//     worker reported it (a cancelled attempt's report), or one run lease
//     passed since this owner first saw it so (a worker stops an attempt
//     holding slots once no heartbeat succeeded for a run lease). The end
//     of the worker's registration is no such proof: a worker cut off
//     from the member it renews through loses it while it executes.

// chainAttempt names one attempt of a chain.
type chainAttempt struct {
	run     string
	item    int
	attempt int
}

// releaseOps returns the deletions of the slots held by the attempts of
// ar whose results u records (reported by their workers).
func (pt *partition) releaseOps(u runUpdate) []clientv3.Op {
	t := pt.d.cfg.Limits
	if t == nil || len(u.reported) == 0 {
		return nil
	}
	var ops []clientv3.Op
	for _, ca := range u.reported {
		for _, k := range t.HeldBy(pt.p, u.ar.run.ID, ca.item, ca.attempt) {
			ops = append(ops, clientv3.OpDelete(k))
		}
	}
	return ops
}

// markEndedLocked records that the worker of attempt ca reported it
// without a write of its result (a cancelled attempt): its slots go at
// the loop's next tick. The caller holds mu.
func (pt *partition) markEndedLocked(ca chainAttempt) {
	if pt.d.cfg.Limits == nil {
		return
	}
	if pt.heldEnded == nil {
		pt.heldEnded = map[chainAttempt]bool{}
	}
	pt.heldEnded[ca] = true
	pt.poke()
}

// releaseHolders deletes the slots held by attempts of this partition
// that no longer run and whose workers are known gone (see above), in
// one fenced write, and returns when it must look again (zero: on an
// event). The caller holds wmu and not mu.
func (pt *partition) releaseHolders(ctx context.Context, now time.Time) time.Time {
	t := pt.d.cfg.Limits
	if t == nil {
		return time.Time{}
	}
	holders := t.Holders(pt.p)
	var ops []clientv3.Op
	var next time.Time
	seen := make(map[string]bool, len(holders))
	pt.mu.Lock()
	for _, h := range holders {
		seen[h.Key] = true
		ca := chainAttempt{run: h.RunID, item: h.Item, attempt: h.Attempt}
		if pt.runningLocked(ca) {
			delete(pt.heldLost, h.Key)
			continue
		}
		since, ok := pt.heldLost[h.Key]
		if !ok {
			if pt.heldLost == nil {
				pt.heldLost = map[string]time.Time{}
			}
			since = now
			pt.heldLost[h.Key] = now
		}
		// Not on the end of the worker's registration alone: a worker cut
		// off from the member it renews through loses its registration
		// while it still executes, until a run lease without a heartbeat
		// stops it (docs/ownership.md, "Limit keys").
		free := pt.heldEnded[ca] || !now.Before(since.Add(pt.d.cfg.RunLease))
		if !free {
			if at := since.Add(pt.d.cfg.RunLease); next.IsZero() || at.Before(next) {
				next = at
			}
			continue
		}
		ops = append(ops, clientv3.OpDelete(h.Key))
		if len(ops) == maxTxnOps/2 {
			break
		}
	}
	for k := range pt.heldLost {
		if !seen[k] {
			delete(pt.heldLost, k)
		}
	}
	for ca := range pt.heldEnded {
		if !pt.heldByLocked(holders, ca) {
			delete(pt.heldEnded, ca)
		}
	}
	pt.mu.Unlock()
	if len(ops) == 0 {
		return next
	}
	if _, err := pt.commit(ctx, ops); err != nil {
		pt.lg.Warn("giving back slots of limit keys failed; retrying", zap.Int("slots", len(ops)), zap.Error(err))
		return next
	}
	pt.lg.Info("slots of limit keys given back", zap.Int("slots", len(ops)))
	return next
}

// runningLocked reports whether attempt ca is its chain's running attempt
// in memory. The caller holds mu.
func (pt *partition) runningLocked(ca chainAttempt) bool {
	ar := pt.active[ca.run]
	if ar == nil {
		return false
	}
	c, ok := ar.chain(ca.item)
	if !ok {
		return false
	}
	_, running := c.current()
	return running && len(c.attempts) == ca.attempt
}

func (pt *partition) heldByLocked(holders []limits.Holder, ca chainAttempt) bool {
	for _, h := range holders {
		if h.RunID == ca.run && h.Item == ca.item && h.Attempt == ca.attempt {
			return true
		}
	}
	return false
}

// limitWaitingLocked returns the key a run of ar's waits for: it could
// start now but for the key's room; "" if none. The caller holds mu.
func (pt *partition) limitWaitingLocked(ar *activeRun, now time.Time) string {
	e := pt.jobs[ar.run.JobID]
	if e == nil {
		return ""
	}
	keys := pt.boundedKeys(e)
	if keys == nil {
		return ""
	}
	if len(ar.run.Items) == 0 && !Dispatchable(ar.run, ar.notBefore, now) {
		return ""
	}
	if len(ar.run.Items) > 0 && len(DispatchableItems(ar.run, ar.notBefores(), now, func(int) bool { return true }, 1)) == 0 {
		return ""
	}
	room, by := pt.d.cfg.Limits.Room(keys, 1, now)
	if room > 0 {
		return ""
	}
	return by
}

// limitUse returns, for the partitions owned here, the slots held by key
// and the runs waiting by the key they wait for.
func (d *Dispatcher) limitUse() (running, waiting map[string]int) {
	running, waiting = map[string]int{}, map[string]int{}
	t := d.cfg.Limits
	if t == nil {
		return running, waiting
	}
	parts, _ := d.snapshot()
	now := d.cfg.Clock.Now()
	for _, pt := range parts {
		for _, h := range t.Holders(pt.p) {
			running[h.Limit]++
		}
		pt.mu.Lock()
		for _, ar := range pt.active {
			if k := pt.limitWaitingLocked(ar, now); k != "" {
				waiting[k]++
			}
		}
		pt.mu.Unlock()
	}
	return running, waiting
}

// LimitStatus returns limit key's use: the slots held fleet-wide (as
// etcd records them), the runs waiting for it on the partitions owned
// here, and the starts of its rate window; false if it has no limit.
func (d *Dispatcher) LimitStatus(key string) (api.LimitStatus, bool) {
	t := d.cfg.Limits
	if t == nil {
		return api.LimitStatus{}, false
	}
	_, st, ok := t.Status(key, d.cfg.Clock.Now())
	if !ok {
		return st, false
	}
	_, waiting := d.limitUse()
	st.Waiting = waiting[key]
	return st, true
}

// WaitLimits blocks until this member's limit table reflects etcd
// revision rev (a limit written at rev is in effect for the runs of the
// partitions owned here), or ctx ends (its error). Without a table it
// returns nil at once.
func (d *Dispatcher) WaitLimits(ctx context.Context, rev int64) error {
	t, ok := d.cfg.Limits.(interface {
		WaitRevision(ctx context.Context, rev int64) error
	})
	if !ok || t == nil {
		return nil
	}
	return t.WaitRevision(ctx, rev)
}

// RunWaitingFor returns the limit key run runID waits for and how many
// runs waiting for that key rank ahead of it (priority order, see
// priority.go) on the partitions owned here; "" if it waits for none or
// if its partition is not owned here.
func (d *Dispatcher) RunWaitingFor(runID string) (key string, ahead int) {
	id, _, err := store.ParseRunID(runID)
	if err != nil {
		return "", 0
	}
	pt, err := d.partitionFor(id)
	if err != nil {
		return "", 0
	}
	now := d.cfg.Clock.Now()
	pt.mu.Lock()
	ar := pt.active[runID]
	if ar == nil {
		pt.mu.Unlock()
		return "", 0
	}
	key = pt.limitWaitingLocked(ar, now)
	me := pt.rankLocked(ar, now)
	pt.mu.Unlock()
	if key == "" {
		return "", 0
	}
	parts, _ := d.snapshot()
	for _, other := range parts {
		other.mu.Lock()
		for _, o := range other.active {
			if o != ar && compareRanked(other.rankLocked(o, now), me) < 0 && other.limitWaitingLocked(o, now) == key {
				ahead++
			}
		}
		other.mu.Unlock()
	}
	return key, ahead
}
