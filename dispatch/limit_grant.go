package dispatch

import (
	"context"
	"fmt"
	"slices"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/jobfleet/jobfleet/api"
	"github.com/jobfleet/jobfleet/dispatch/limits"
)

// LimitTable is what the scheduler reads of the fleet's limit keys
// (*limits.Table provides it): their room, the grants it prepares, the
// slots held.
type LimitTable interface {
	Bounded(keys []string) ([]string, bool)
	Room(keys []string, want int, now time.Time) (int, string)
	Prepare(keys []string, holders []api.LimitHolder, now time.Time) (limits.Grant, string, bool)
	Granted(g limits.Grant, rev int64)
	Holders(p int) []limits.Holder
	HeldBy(p int, runID string, item, attempt int) []string
	Status(key string, now time.Time) (api.Limit, api.LimitStatus, bool)
	Limits() []api.Limit
	Subscribe(f func())
	Queue(key string) []limits.QueueEntry
	QueuedIn(p int) (map[string]limits.QueueEntry, bool)
}

var _ LimitTable = (*limits.Table)(nil)

// boundedKeys returns the keys job e names that have a stored limit, nil
// if none (or without a limit table). Until the table is read, every key
// counts. The caller holds mu.
func (pt *partition) boundedKeys(e *jobEntry) []string {
	t := pt.d.cfg.Limits
	named := e.spec.controls().Limits
	if t == nil || len(named) == 0 {
		return nil
	}
	keys, _ := t.Bounded(named)
	if len(keys) == 0 {
		return nil
	}
	return keys
}

// limitRoom returns how many of want chains may start under keys now,
// less what this assign reserved already.
func (pt *partition) limitRoom(keys []string, reserved map[string]int, want int, now time.Time) int {
	room := want
	for _, k := range keys {
		r, _ := pt.d.cfg.Limits.Room([]string{k}, want+reserved[k], now)
		room = min(room, max(r-reserved[k], 0))
	}
	return room
}

// grantLimited records the attempts of pick pk, whose job names limit
// keys pk.limits, in a fenced transaction of its own that also takes a
// slot of each key for each chain started (limits.Table.Prepare): it
// applies only if no other grant under those keys applied since the
// table was read, and the run is as memory has it. A conflict leaves the
// run as it was for a later poll (the table follows the other grant by
// then). It is not batched with other writes: two grants under one key
// in one request would write the key's state twice. The caller holds wmu
// and not mu.
func (pt *partition) grantLimited(p *poll, pk pick, now time.Time) ([]AttemptGrant, int) {
	t := pt.d.cfg.Limits
	holders := make([]api.LimitHolder, 0, len(pk.items))
	for _, i := range pk.items {
		c, _ := chainOf(pk.w.run, i, nil)
		holders = append(holders, api.LimitHolder{RunID: pk.ar.run.ID, JobID: pk.ar.run.JobID, Partition: pt.p, Item: i,
			Attempt: len(c.attempts), Worker: p.req.Worker, Since: now})
	}
	g, by, ok := t.Prepare(pk.limits, holders, now)
	if !ok {
		pt.d.cfg.Metrics.limitConflict()
		pt.lg.Debug("no room under a limit key any more", zap.String("run_id", pk.ar.run.ID), zap.String("key", by))
		return nil, 0
	}
	op := pt.d.keys.UpdateRunOp(pk.w.run, pk.w.val, pk.ar.modRev, append(slices.Clip(pk.w.failing), g.Ops...)...)
	resp, err := pt.commitGuarded(pt.ctx, g.Cmps, op)
	if err != nil {
		pt.lg.Warn("recording attempts under limit keys failed", zap.String("run_id", pk.ar.run.ID), zap.Error(err))
		if unknownOutcome(err) {
			pt.queueUnsure([]pick{pk}, p.req.Worker)
		}
		return nil, pk.w.size
	}
	if !resp.Succeeded {
		// Another grant under one of the keys applied first.
		pt.d.cfg.Metrics.limitConflict()
		pt.lg.Debug("grant under limit keys conflicted; the run waits for a later poll", zap.String("run_id", pk.ar.run.ID), zap.Strings("limits", pk.limits))
		return nil, 0
	}
	t.Granted(g, resp.Header.Revision)
	pt.mu.Lock()
	if !resp.Responses[0].GetResponseTxn().Succeeded {
		pt.dropActiveLocked(pk.ar.run.ID)
		pt.mu.Unlock()
		pt.readopt(pt.ctx, []api.Run{pk.ar.run})
		return nil, 0
	}
	defer pt.mu.Unlock()
	pt.updatedLocked(pk.ar, pk.w, resp.Header.Revision, pk.ar.notBefore)
	return pt.grantsLocked(p, pk, now), pk.w.size
}

// commitGuarded runs op fenced on the partition's epoch and guarded by
// cmps, in a request of its own (not batched), within RequestTimeout; the
// response's Succeeded says whether cmps held. The caller holds wmu and
// not mu.
func (pt *partition) commitGuarded(ctx context.Context, cmps []clientv3.Cmp, op clientv3.Op) (*clientv3.TxnResponse, error) {
	rctx, cancel := context.WithTimeout(ctx, pt.d.cfg.RequestTimeout)
	defer cancel()
	resp, err := pt.own.Commit(rctx, cmps, []clientv3.Op{op}, nil)
	if err := pt.committed(ctx, err); err != nil {
		return nil, fmt.Errorf("grant under limit keys: %w", err)
	}
	return resp, nil
}
