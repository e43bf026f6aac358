package dispatch

import (
	"context"
	"encoding/json"
	"maps"
	"slices"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/jobfleet/jobfleet/api"
	"github.com/jobfleet/jobfleet/dispatch/limits"
)

// This file orders the grants of a limit key across the fleet: each
// partition's owner publishes, per key, the best run of the partition
// waiting for the key's room (limits/queue/<key>/<partition>, at most once
// per LimitQueueInterval and only when it changed), every member reads
// them from its limit table, and a partition does not grant a slot to a
// run that an entry of another partition outranks. Entries only hold
// grants back: what a grant may take is decided by limit_grant.go as
// before. The protocol is in docs/ownership.md ("Priority across the
// fleet").

// wantedFor is how long a run a poll could have taken but for a key's
// room counts as wanted (published): a worker polls again within
// MaxPollWait while it has free slots.
const wantedFor = 2*MaxPollWait + time.Second

// wantLocked marks ar as wanted by poll p (its worker could take it but
// for a key's room), nudging the loop to publish it if it was not. The
// caller holds mu.
func (pt *partition) wantLocked(p *poll, e *jobEntry, ar *activeRun, now time.Time) {
	if pt.d.cfg.LimitQueueInterval < 0 || !p.may(e, ar.run.JobID) {
		return
	}
	fresh := now.Sub(ar.wantedAt) > wantedFor
	ar.wantedAt = now
	if fresh {
		pt.poke()
	}
}

// outrankedLocked reports whether an entry of another partition, whose
// publisher owns it, ranks strictly ahead of r under one of keys. The
// caller holds mu.
func (pt *partition) outrankedLocked(keys []string, r ranked, now time.Time) bool {
	if pt.d.cfg.LimitQueueInterval < 0 {
		return false
	}
	for _, k := range keys {
		for _, e := range pt.d.cfg.Limits.Queue(k) {
			if e.Partition == pt.p || !pt.d.publishedByOwner(e) {
				continue
			}
			eff := api.EffectivePriority(e.Priority, e.Since, now, pt.d.cfg.PriorityAging)
			if eff > r.eff || eff == r.eff && e.Since.Before(r.since) {
				return true
			}
		}
	}
	return false
}

// publishedByOwner reports whether entry e was published by its
// partition's current owner.
func (d *Dispatcher) publishedByOwner(e limits.QueueEntry) bool {
	if d.cfg.Lookup == nil {
		return false
	}
	owner, _ := d.cfg.Lookup(e.Partition)
	return owner != "" && owner == e.Member
}

// queueWantedLocked returns, by limit key, the entry of the partition's
// best run naming the key that may be handed out now and that a poll
// wanted lately (it found no room, or was held back). A run is published
// whether or not the key has room at the moment: a slot freed does not
// withdraw the runs waiting for it before one is granted. The caller
// holds mu.
func (pt *partition) queueWantedLocked(now time.Time) map[string]limits.QueueEntry {
	best := map[string]ranked{}
	prio := map[string]int{}
	for _, ar := range pt.active {
		if now.Sub(ar.wantedAt) > wantedFor {
			continue
		}
		e := pt.jobs[ar.run.JobID]
		if e == nil || !pt.waitingLocked(ar, now) {
			continue
		}
		r := pt.rankLocked(ar, now)
		for _, k := range pt.boundedKeys(e) {
			if b, ok := best[k]; !ok || compareRanked(r, b) < 0 {
				best[k] = r
				prio[k] = e.spec.priorityOf(&ar.run)
			}
		}
	}
	out := make(map[string]limits.QueueEntry, len(best))
	for k, r := range best {
		out[k] = limits.QueueEntry{Member: pt.own.Member, Priority: prio[k], Since: r.since.UTC()}
	}
	return out
}

// publishQueue writes the partition's waiting entries that differ from
// what the limit table holds for the partition (deleting the others'),
// at most once per LimitQueueInterval, and returns when the loop should
// look again (zero: when something happens). The caller holds wmu and
// not mu.
func (pt *partition) publishQueue(ctx context.Context, now time.Time) time.Time {
	t, every := pt.d.cfg.Limits, pt.d.cfg.LimitQueueInterval
	if t == nil || every < 0 {
		return time.Time{}
	}
	stored, ok := t.QueuedIn(pt.p)
	if !ok {
		return time.Time{}
	}
	pt.mu.Lock()
	want := pt.queueWantedLocked(now)
	pt.mu.Unlock()
	var ops []clientv3.Op
	for _, k := range slices.Sorted(maps.Keys(want)) {
		if s, ok := stored[k]; !ok || !s.Same(want[k]) {
			v, err := json.Marshal(want[k])
			if err != nil {
				continue
			}
			ops = append(ops, clientv3.OpPut(pt.d.keys.LimitQueue(k, pt.p), string(v)))
		}
	}
	for _, k := range slices.Sorted(maps.Keys(stored)) {
		if _, ok := want[k]; !ok {
			ops = append(ops, clientv3.OpDelete(pt.d.keys.LimitQueue(k, pt.p)))
		}
	}
	if len(want) == 0 && len(ops) == 0 {
		return time.Time{}
	}
	next := now.Add(every)
	if len(ops) == 0 || now.Before(pt.queueAt) {
		if next.Before(pt.queueAt) {
			return pt.queueAt // written within the interval
		}
		return next
	}
	pt.queueAt = next
	for chunk := range slices.Chunk(ops, 64) {
		rctx, cancel := context.WithTimeout(ctx, pt.d.cfg.RequestTimeout)
		_, err := pt.d.client.Txn(rctx).Then(chunk...).Commit()
		cancel()
		if err != nil {
			pt.lg.Debug("publishing the runs waiting for limit keys failed; trying again", zap.Error(err))
			break
		}
	}
	return next
}
