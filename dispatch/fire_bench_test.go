package dispatch

import (
	"context"
	"fmt"
	"runtime"
	"testing"
	"time"

	"github.com/jobfleet/jobfleet/api"

	"github.com/jonboulle/clockwork"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/jobfleet/jobfleet/internal/testkit/etcdtest"
	"github.com/jobfleet/jobfleet/store"
)

// BenchmarkFireHerd is a herd on one member: 2 000 one-off jobs over 8
// partitions, all due at one instant, fired into the package's embedded
// etcd. It reports, per run, the time from the instant until every run
// exists, and the allocations of the whole process meanwhile (the member
// and etcd: both run here), which unlike the time do not depend on what
// else the machine is doing. Compare builds with benchstat:
//
//	go test -run '^$' -bench FireHerd -count 6 ./dispatch
func BenchmarkFireHerd(b *testing.B) {
	client := etcdtest.New(b).Client(b)
	ctx := context.Background()
	const parts, jobs = 8, 2000
	var took time.Duration
	var mallocs, bytes uint64
	for i := range b.N {
		ns := fmt.Sprintf("/fire-herd-%d/", i)
		start := time.Date(2026, 6, 1, 0, 0, 0, 0, time.UTC)
		due := start.Add(time.Minute)
		st := store.NewEtcd(client, ns, parts, api.DefaultLimits(), nil)
		for j := range jobs {
			if _, err := st.Create(ctx, api.Job{ID: fmt.Sprintf("herd-%05d", j), RunAt: &due, Executor: api.Executor{Type: "noop"}}); err != nil {
				b.Fatal(err)
			}
		}
		clock := clockwork.NewFakeClockAt(start)
		cfg := DefaultConfig(ns, parts, "m", "http://m.invalid")
		cfg.Clock, cfg.Logger = clock, zap.NewNop()
		d, err := New(client, cfg)
		if err != nil {
			b.Fatal(err)
		}
		work := newOwnedParts(ctx, b, client, ns, d)
		work.own(0, parts)
		for len(d.Owned()) < parts {
			time.Sleep(time.Millisecond)
		}
		runs := func() int64 {
			resp, err := client.Get(ctx, store.Keys{NS: ns}.AllRunsPrefix(), clientv3.WithPrefix(), clientv3.WithCountOnly())
			if err != nil {
				b.Fatal(err)
			}
			return resp.Count
		}
		var m0, m1 runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&m0)
		t0 := time.Now()
		clock.Advance(due.Sub(start))
		for n, last, since := int64(0), int64(0), time.Now(); n < jobs; n = runs() {
			if n != last {
				last, since = n, time.Now()
			}
			if time.Since(since) > 100*time.Millisecond {
				// A partition that set its timer as the clock moved
				// missed the move: move it again (the jobs stay due).
				clock.Advance(time.Millisecond)
				since = time.Now()
			}
			time.Sleep(2 * time.Millisecond)
		}
		took += time.Since(t0)
		runtime.ReadMemStats(&m1)
		mallocs += m1.Mallocs - m0.Mallocs
		bytes += m1.TotalAlloc - m0.TotalAlloc
		work.stop()
		if _, err := client.Delete(ctx, ns, clientv3.WithPrefix()); err != nil {
			b.Fatal(err)
		}
	}
	n := float64(b.N * jobs)
	b.ReportMetric(float64(took.Nanoseconds())/n, "ns/run")
	b.ReportMetric(float64(mallocs)/n, "allocs/run")
	b.ReportMetric(float64(bytes)/n, "B/run")
}
