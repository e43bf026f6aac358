package bench_test

// Benchmarks of the hot paths, for `go test -bench . ./bench`:
//
//   - BenchmarkRing: computing the assignment ring afresh (every member
//     does it when it starts) and updating it by one member (every member
//     does it on a membership change);
//   - BenchmarkPlanFires: the scheduler's pure decision for one job;
//   - BenchmarkFencedCommit: one fenced transaction of 25 runs of the
//     scheduler's shape through shard.Ownership.Commit, on an embedded
//     etcd with fsync on, one writer and 16 in parallel.

import (
	"context"
	"encoding/json"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jobfleet/jobfleet/api"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/jobfleet/jobfleet/bench"
	"github.com/jobfleet/jobfleet/dispatch"
	"github.com/jobfleet/jobfleet/schedule"
	"github.com/jobfleet/jobfleet/shard"
	"github.com/jobfleet/jobfleet/store"
)

func BenchmarkRing(b *testing.B) {
	ids := make([]string, 64)
	for i := range ids {
		ids[i] = fmt.Sprintf("orchestrator-%d", i+1)
	}
	cfg := shard.DefaultRingConfig(1024)
	for _, n := range []int{3, 8, 64} {
		b.Run(fmt.Sprintf("P=1024/fresh/n=%d", n), func(b *testing.B) {
			for b.Loop() {
				if _, err := shard.NewRing(ids[:n], cfg); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
	// What a member computes on a join or leave: the Assigner updates the
	// previous ring by one member (alternately 63 → 64 and 64 → 63).
	b.Run("P=1024/update/n=64", func(b *testing.B) {
		a, err := shard.NewAssigner(cfg)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := a.Ring(ids[:63]); err != nil {
			b.Fatal(err)
		}
		n := 63
		for b.Loop() {
			n = 63 + 64 - n
			if _, err := a.Ring(ids[:n]); err != nil {
				b.Fatal(err)
			}
		}
	})
}

func BenchmarkPlanFires(b *testing.B) {
	created := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for _, spec := range []string{"@every 1s", "*/5 * * * *"} {
		b.Run(spec, func(b *testing.B) {
			j := api.Job{ID: "nightly-report", Schedule: spec, CreatedAt: created, Partition: 7, Revision: 42}
			sched, err := schedule.Parse(spec, "")
			if err != nil {
				b.Fatal(err)
			}
			state := api.JobState{Last: created.Add(time.Hour), SpecRevision: 42}
			now := created.Add(time.Hour + 5*time.Minute)
			for b.Loop() {
				if _, err := dispatch.PlanFires(&j, sched, state, nil, now, schedule.Policy{}, nil, "orchestrator-1", 7); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func BenchmarkFencedCommit(b *testing.B) {
	etcd, err := bench.StartEtcd(true)
	if err != nil {
		b.Fatal(err)
	}
	defer etcd.Close()
	c, err := bench.NewClient(etcd.Endpoints(), 0)
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	ctx := context.Background()
	lease, err := c.Grant(ctx, 60)
	if err != nil {
		b.Fatal(err)
	}
	const ns, batch = "/bench-commit/", 25
	keys := store.Keys{NS: ns}
	owns := make([]*shard.Ownership, 16)
	for p := range owns {
		resp, err := c.Put(ctx, shard.OwnerKey(ns, p), "bench", clientv3.WithLease(lease.ID))
		if err != nil {
			b.Fatal(err)
		}
		owns[p] = shard.NewOwnership(c, ns, "bench", p, resp.Header.Revision)
	}
	var seq atomic.Int64
	commit := func(own *shard.Ownership) error {
		s := seq.Add(1)
		now := time.Now()
		ops := make([]clientv3.Op, 0, 2*batch)
		for k := range batch {
			j := api.Job{ID: fmt.Sprintf("job-%d-%d", s, k), Partition: own.Partition}
			r := dispatch.NewRun(&j, now, now, "bench", own.Epoch)
			val, _ := json.Marshal(r)
			runKey := keys.Run(own.Partition, j.ID, now)
			ops = append(ops,
				clientv3.OpTxn([]clientv3.Cmp{clientv3.Compare(clientv3.CreateRevision(runKey), "=", 0)},
					[]clientv3.Op{clientv3.OpPut(runKey, string(val)), clientv3.OpPut(keys.Queue(own.Partition, j.ID, now), "")}, nil),
				clientv3.OpPut(keys.State(own.Partition, j.ID), `{"last":"2026-01-01T00:00:00Z"}`))
		}
		_, err := own.Commit(ctx, nil, ops, nil)
		return err
	}
	b.Run("writers=1", func(b *testing.B) {
		for b.Loop() {
			if err := commit(owns[0]); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(b.N*batch)/b.Elapsed().Seconds(), "runs/s")
	})
	b.Run("writers=16", func(b *testing.B) {
		var next atomic.Int64
		b.SetParallelism(16)
		b.RunParallel(func(pb *testing.PB) {
			own := owns[int(next.Add(1)-1)%len(owns)]
			for pb.Next() {
				if err := commit(own); err != nil {
					b.Error(err)
					return
				}
			}
		})
		b.ReportMetric(float64(b.N*batch)/b.Elapsed().Seconds(), "runs/s")
	})
}
