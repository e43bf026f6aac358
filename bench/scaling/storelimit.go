package scaling

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"time"

	"github.com/jobfleet/jobfleet/api"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/jobfleet/jobfleet/bench"
	"github.com/jobfleet/jobfleet/dispatch"
	"github.com/jobfleet/jobfleet/shard"
	"github.com/jobfleet/jobfleet/store"
)

// storeLimit measures the physical limit: for each writer count w and
// shares k, w writers each own k partitions (owner keys under a lease, as
// a member would) and commit, as fast as etcd takes them, for
// StoreLimitDuration, requests of k fenced transactions (through
// shard.Ownership.Commit for k = 1, shard.CommitBatch otherwise) of
// FireBatch runs each, of exactly the scheduler's shape: per run a nested
// create-if-absent of the run key with its queue entry, and the job's
// state put.
func (e *env) storeLimit(ctx context.Context, when string) ([]StoreLevel, error) {
	var levels []StoreLevel
	for _, k := range e.cfg.StoreLimitShares {
		for _, w := range e.cfg.StoreLimitConcurrency {
			l, err := e.storeLevel(ctx, w, max(k, 1))
			if err != nil {
				return nil, err
			}
			l.When = when
			e.cfg.Progress.Step("store limit (%s): %3d writers × %d partitions per request: %.0f runs/s (request p50 %.1f ms, p99 %.1f ms)", when, w, l.Shares, l.RunsPerSec, l.TxnP50Ms, l.TxnP99Ms)
			levels = append(levels, l)
		}
	}
	return levels, nil
}

func (e *env) storeLevel(ctx context.Context, writers, shares int) (StoreLevel, error) {
	ns := fmt.Sprintf("/jobfleet-bench/store-limit-%d-%d-%d/", writers, shares, time.Now().UnixNano())
	defer e.cleanup(ns)
	lease, err := e.observer.Grant(ctx, 120)
	if err != nil {
		return StoreLevel{}, err
	}
	defer e.observer.Revoke(context.Background(), lease.ID)
	owns := make([][]*shard.Ownership, writers)
	for w := range writers {
		c := e.clients[w%len(e.clients)]
		for k := range shares {
			part := w*shares + k
			resp, err := e.observer.Put(ctx, shard.OwnerKey(ns, part), "store-limit", clientv3.WithLease(lease.ID))
			if err != nil {
				return StoreLevel{}, err
			}
			owns[w] = append(owns[w], shard.NewOwnership(c, ns, "store-limit", part, resp.Header.Revision))
		}
	}
	keys := store.Keys{NS: ns}
	batch := e.cfg.FireBatch
	stateVal, _ := json.Marshal(api.JobState{Last: time.Now(), Next: time.Now().Add(time.Second), SpecRevision: 12345, Fired: 1, Runs: 1})
	fires := func(own *shard.Ownership, seq int, now time.Time) []clientv3.Op {
		ops := make([]clientv3.Op, 0, 2*batch)
		for k := range batch {
			j := benchJob(fmt.Sprintf("limit-%d-%d-%d", own.Partition, seq, k))
			j.Partition = own.Partition
			r := dispatch.NewRun(&j, now.Truncate(time.Millisecond), now, "store-limit", own.Epoch)
			val, _ := json.Marshal(r)
			runKey := keys.Run(own.Partition, j.ID, r.ScheduledAt)
			ops = append(ops,
				clientv3.OpTxn([]clientv3.Cmp{clientv3.Compare(clientv3.CreateRevision(runKey), "=", 0)},
					[]clientv3.Op{clientv3.OpPut(runKey, string(val)), clientv3.OpPut(keys.Queue(own.Partition, j.ID, r.ScheduledAt), "")}, nil),
				clientv3.OpPut(keys.State(own.Partition, j.ID), string(stateVal)))
		}
		return ops
	}
	var mu sync.Mutex
	var lat []time.Duration
	var firstErr error
	fail := func(err error) {
		mu.Lock()
		defer mu.Unlock()
		if firstErr == nil {
			firstErr = err
		}
	}
	start := time.Now()
	deadline := start.Add(e.cfg.StoreLimitDuration)
	var wg sync.WaitGroup
	for w := range owns {
		mine := owns[w]
		c := e.clients[w%len(e.clients)]
		wg.Go(func() {
			var took []time.Duration
			for seq := 0; time.Now().Before(deadline) && ctx.Err() == nil; seq++ {
				now := time.Now()
				txns := make([]shard.FencedTxn, len(mine))
				for i, own := range mine {
					txns[i] = shard.FencedTxn{Own: own, Then: fires(own, seq, now)}
				}
				t0 := time.Now()
				if len(txns) == 1 {
					if _, err := txns[0].Own.Commit(ctx, nil, txns[0].Then, nil); err != nil {
						fail(err)
						return
					}
				} else {
					for _, r := range shard.CommitBatch(ctx, c, txns) {
						if r.Err != nil {
							fail(r.Err)
							return
						}
					}
				}
				took = append(took, time.Since(t0))
			}
			mu.Lock()
			lat = append(lat, took...)
			mu.Unlock()
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	if firstErr != nil {
		return StoreLevel{}, firstErr
	}
	s := bench.Summarize(lat)
	runs := len(lat) * batch * shares
	return StoreLevel{
		Writers:    writers,
		Shares:     shares,
		Txns:       len(lat),
		Runs:       runs,
		RunsPerSec: float64(runs) / elapsed.Seconds(),
		TxnP50Ms:   bench.Ms(s.P50),
		TxnP99Ms:   bench.Ms(s.P99),
	}, nil
}

// StoreLimitOn measures only the store limit, as RunOn does before and
// after its trials (cfg's StoreLimitConcurrency, StoreLimitShares,
// StoreLimitDuration, FireBatch and Delay), against the etcd at endpoints,
// and returns every level and the best runs/s. Other commands use it to
// measure the limit of a store they have filled.
func StoreLimitOn(ctx context.Context, endpoints []string, cfg Config) ([]StoreLevel, float64, error) {
	if err := cfg.Validate(); err != nil {
		return nil, 0, err
	}
	env, err := newEnv(endpoints, cfg)
	if err != nil {
		return nil, 0, err
	}
	defer env.close()
	levels, err := env.storeLimit(ctx, "alone")
	if err != nil {
		return nil, 0, fmt.Errorf("store limit: %w", err)
	}
	best := 0.0
	for _, l := range levels {
		best = max(best, l.RunsPerSec)
	}
	return levels, best, nil
}
