package shard

import (
	"context"
	"maps"
	"slices"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/jobfleet/jobfleet/membership"
)

// acquire creates the owner keys of free partitions, in batches of
// AcquireBatch keys per transaction; when a batch loses a race it falls
// back to one transaction per key.
func (r *run) acquire(ctx context.Context, free []int) error {
	c := r.c
	for chunk := range slices.Chunk(free, c.cfg.AcquireBatch) {
		cmps := make([]clientv3.Cmp, len(chunk))
		puts := make([]clientv3.Op, len(chunk))
		for i, part := range chunk {
			key := OwnerKey(c.cfg.Namespace, part)
			cmps[i] = clientv3.Compare(clientv3.CreateRevision(key), "=", 0)
			puts[i] = clientv3.OpPut(key, c.cfg.MemberID, clientv3.WithLease(r.s.Lease()))
		}
		resp, err := r.txn(ctx, cmps, puts)
		if err != nil {
			return err
		}
		if resp.Succeeded {
			for _, part := range chunk {
				r.start(part, resp.Header.Revision, resp.Header.Revision)
			}
			c.lg.Info("partitions acquired", zap.Ints("partitions", chunk), zap.Int64("epoch", resp.Header.Revision))
			continue
		}
		// The batch lost a race for some key: one transaction per key,
		// one log line for what was won.
		var won []int
		var epochs []int64
		for i, part := range chunk {
			resp, err := r.txn(ctx, cmps[i:i+1], puts[i:i+1])
			if err != nil {
				return err
			}
			if resp.Succeeded {
				r.start(part, resp.Header.Revision, resp.Header.Revision)
				won, epochs = append(won, part), append(epochs, resp.Header.Revision)
			}
		}
		if len(won) > 0 {
			c.lg.Info("partitions acquired", zap.Ints("partitions", won), zap.Int64s("epochs", epochs))
		}
	}
	return nil
}

func (r *run) txn(ctx context.Context, cmps []clientv3.Cmp, ops []clientv3.Op) (*clientv3.TxnResponse, error) {
	ctx, cancel := context.WithTimeout(ctx, r.c.cfg.RequestTimeout)
	defer cancel()
	defer context.AfterFunc(r.s.Ctx(), cancel)()
	return r.c.client.Txn(ctx).If(cmps...).Then(ops...).Commit()
}

// start begins Work for a newly owned partition under the session's
// context: its owner key was created at epoch and last written at gen.
func (r *run) start(part int, epoch, gen int64) {
	c := r.c
	wctx, cancel := context.WithCancel(r.s.Ctx())
	own := newOwnership(c.client, c.cfg.Namespace, c.cfg.MemberID, part, epoch, gen)
	own.metrics = c.cfg.Metrics
	own.fenced = func(o *Ownership) {
		c.lg.Warn("fenced write refused; stopping partition", zap.Int("partition", o.Partition), zap.Int64("epoch", o.Epoch))
		cancel()
		r.signal()
	}
	sl := &slot{own: own, cancel: cancel, done: make(chan struct{})}
	r.slots[part] = sl
	if t, ok := r.targetedAt[part]; ok {
		c.cfg.Metrics.acquired(c.cfg.Clock.Since(t).Seconds())
		delete(r.targetedAt, part)
	}
	r.wg.Add(1)
	go func() {
		defer r.wg.Done()
		defer r.signal()
		defer close(sl.done)
		c.work(wctx, own)
	}()
}

func (r *run) signal() {
	select {
	case r.poke <- struct{}{}:
	default:
	}
}

// stop cancels the Work of parts, waits for it to return (bounded by
// ReleaseTimeout in all), and forgets the slots; with deleteKey their owner
// keys are queued for deletion.
func (r *run) stop(parts []int, reason string, deleteKey bool) {
	c := r.c
	start := c.cfg.Clock.Now()
	slices.Sort(parts)
	for _, part := range parts {
		r.slots[part].cancel()
	}
	deadline := c.cfg.Clock.After(c.cfg.ReleaseTimeout)
	epochs := make([]int64, len(parts))
	for i, part := range parts {
		sl := r.slots[part]
		select {
		case <-sl.done:
		case <-deadline:
			c.lg.Error("partition work did not stop within the release timeout; releasing anyway (its writes are fenced)",
				zap.Int("partition", part), zap.Int64("epoch", sl.own.Epoch), zap.Duration("release_timeout", c.cfg.ReleaseTimeout))
		}
		epochs[i] = sl.own.Epoch
		if deleteKey {
			r.pendingDelete[part] = sl.own.Epoch
		}
		delete(r.slots, part)
		c.cfg.Metrics.released(reason, c.cfg.Clock.Since(start).Seconds())
	}
	if !deleteKey {
		return
	}
	c.lg.Info("partitions released", zap.Ints("partitions", parts), zap.Int64s("epochs", epochs), zap.String("reason", reason))
}

// deletePending deletes the owner keys of released partitions, each only if
// it still has the epoch it was owned under.
func (r *run) deletePending(ctx context.Context) error {
	if len(r.pendingDelete) == 0 {
		return nil
	}
	if ctx.Err() != nil || r.s.Ctx().Err() != nil {
		ctx = context.Background() // handing over at shutdown: a fresh, bounded context
	}
	parts := slices.Sorted(maps.Keys(r.pendingDelete))
	for chunk := range slices.Chunk(parts, r.c.cfg.AcquireBatch) {
		cmps := make([]clientv3.Cmp, len(chunk))
		dels := make([]clientv3.Op, len(chunk))
		for i, part := range chunk {
			key := OwnerKey(r.c.cfg.Namespace, part)
			cmps[i] = clientv3.Compare(clientv3.CreateRevision(key), "=", r.pendingDelete[part])
			dels[i] = clientv3.OpDelete(key)
		}
		resp, err := r.txnFresh(ctx, cmps, dels)
		if err != nil {
			return err
		}
		r.deletedRev = max(r.deletedRev, resp.Header.Revision)
		if !resp.Succeeded { // some key already gone or re-created: one by one
			for i := range chunk {
				one, err := r.txnFresh(ctx, cmps[i:i+1], dels[i:i+1])
				if err != nil {
					return err
				}
				r.deletedRev = max(r.deletedRev, one.Header.Revision)
			}
		}
		for _, part := range chunk {
			delete(r.pendingDelete, part)
		}
	}
	return nil
}

// txnFresh is txn without the session bound: deleting our own keys is
// still right after the session ended (the epoch compare keeps it safe).
func (r *run) txnFresh(ctx context.Context, cmps []clientv3.Cmp, ops []clientv3.Op) (*clientv3.TxnResponse, error) {
	ctx, cancel := context.WithTimeout(ctx, r.c.cfg.RequestTimeout)
	defer cancel()
	return r.c.client.Txn(ctx).If(cmps...).Then(ops...).Commit()
}

// shutdown hands every partition over after Run's context was cancelled.
func (r *run) shutdown() error {
	r.draining = true
	r.reconcile(context.Background())
	if len(r.pendingDelete) > 0 {
		r.c.lg.Warn("could not delete some owner keys at shutdown; they go with the lease", zap.Ints("partitions", slices.Sorted(maps.Keys(r.pendingDelete))))
	}
	r.wg.Wait()
	r.c.cfg.Metrics.setOwned(0, 0)
	r.c.setStatus(Status{Reason: "stopped", Owned: map[int]int64{}})
	return nil
}

// sessionLost stops all Work (already cancelled through the session's
// context) and returns the session's error. Keys are left to the lease.
func (r *run) sessionLost() error {
	parts := slices.Sorted(maps.Keys(r.slots))
	if len(parts) > 0 {
		r.c.lg.Warn("session ended; stopped acting as owner", zap.Ints("partitions", parts), zap.Error(r.s.Err()))
		r.stop(parts, "lease_lost", false)
	}
	r.wg.Wait()
	r.c.cfg.Metrics.setOwned(0, 0)
	r.c.setStatus(Status{Reason: "session lost: " + errString(r.s.Err()), Owned: map[int]int64{}})
	err := r.s.Err()
	if err == nil {
		err = membership.ErrSessionClosed
	}
	return err
}
