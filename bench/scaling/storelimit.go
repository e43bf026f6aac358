package scaling

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/jobfleet/jobfleet/bench"
	"github.com/jobfleet/jobfleet/dispatch"
	"github.com/jobfleet/jobfleet/shard"
	"github.com/jobfleet/jobfleet/store"
)

// storeLimit measures the physical limit: for each writer count w, w
// writers each own a partition (an owner key under a lease, as a member
// would) and commit, through shard.Ownership.Commit, transactions of
// FireBatch runs of exactly the scheduler's shape (per run a nested
// create-if-absent of the run key with its queue entry, and the job's
// state put), as fast as etcd takes them, for StoreLimitDuration.
func (e *env) storeLimit(ctx context.Context, when string) ([]StoreLevel, error) {
	var levels []StoreLevel
	for _, w := range e.cfg.StoreLimitConcurrency {
		l, err := e.storeLevel(ctx, w)
		if err != nil {
			return nil, err
		}
		l.When = when
		e.cfg.Progress.Step("store limit (%s): %3d writers: %.0f runs/s (txn p50 %.1f ms, p99 %.1f ms)", when, w, l.RunsPerSec, l.TxnP50Ms, l.TxnP99Ms)
		levels = append(levels, l)
	}
	return levels, nil
}

func (e *env) storeLevel(ctx context.Context, writers int) (StoreLevel, error) {
	ns := fmt.Sprintf("/jobfleet-bench/store-limit-%d-%d/", writers, time.Now().UnixNano())
	defer e.cleanup(ns)
	lease, err := e.observer.Grant(ctx, 120)
	if err != nil {
		return StoreLevel{}, err
	}
	defer e.observer.Revoke(context.Background(), lease.ID)
	owns := make([]*shard.Ownership, writers)
	for w := range writers {
		c := e.clients[w%len(e.clients)]
		key := shard.OwnerKey(ns, w)
		resp, err := e.observer.Put(ctx, key, "store-limit", clientv3.WithLease(lease.ID))
		if err != nil {
			return StoreLevel{}, err
		}
		owns[w] = shard.NewOwnership(c, ns, "store-limit", w, resp.Header.Revision)
	}
	keys := store.Keys{NS: ns}
	batch := e.cfg.FireBatch
	stateVal, _ := json.Marshal(store.JobState{Last: time.Now(), Next: time.Now().Add(time.Second), SpecRevision: 12345, Fired: 1, Runs: 1})
	var mu sync.Mutex
	var lat []time.Duration
	var firstErr error
	start := time.Now()
	deadline := start.Add(e.cfg.StoreLimitDuration)
	var wg sync.WaitGroup
	for w, own := range owns {
		wg.Go(func() {
			var mine []time.Duration
			for seq := 0; time.Now().Before(deadline) && ctx.Err() == nil; seq++ {
				now := time.Now()
				ops := make([]clientv3.Op, 0, 2*batch)
				for k := range batch {
					j := benchJob(fmt.Sprintf("limit-%d-%d-%d", w, seq, k))
					j.Partition = w
					r := dispatch.NewRun(&j, now.Truncate(time.Millisecond), now, "store-limit", own.Epoch)
					val, _ := json.Marshal(r)
					runKey := keys.Run(w, j.ID, r.ScheduledAt)
					ops = append(ops,
						clientv3.OpTxn([]clientv3.Cmp{clientv3.Compare(clientv3.CreateRevision(runKey), "=", 0)},
							[]clientv3.Op{clientv3.OpPut(runKey, string(val)), clientv3.OpPut(keys.Queue(w, j.ID, r.ScheduledAt), "")}, nil),
						clientv3.OpPut(keys.State(w, j.ID), string(stateVal)))
				}
				t0 := time.Now()
				_, err := own.Commit(ctx, nil, ops, nil)
				if err != nil {
					mu.Lock()
					if firstErr == nil {
						firstErr = err
					}
					mu.Unlock()
					return
				}
				mine = append(mine, time.Since(t0))
			}
			mu.Lock()
			lat = append(lat, mine...)
			mu.Unlock()
		})
	}
	wg.Wait()
	took := time.Since(start)
	if firstErr != nil {
		return StoreLevel{}, firstErr
	}
	s := bench.Summarize(lat)
	return StoreLevel{
		Writers:    writers,
		Txns:       len(lat),
		Runs:       len(lat) * batch,
		RunsPerSec: float64(len(lat)*batch) / took.Seconds(),
		TxnP50Ms:   bench.Ms(s.P50),
		TxnP99Ms:   bench.Ms(s.P99),
	}, nil
}
