package dispatch

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/jobfleet/jobfleet/api"

	"github.com/jonboulle/clockwork"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/jobfleet/jobfleet/internal/testkit/etcdtest"
	"github.com/jobfleet/jobfleet/internal/testkit/metrictest"
	"github.com/jobfleet/jobfleet/shard"
	"github.com/jobfleet/jobfleet/store"
)

// TestHerdFiresInFlightAreBounded makes every job of a member's
// partitions due in the same second, as a herd does: the runs planned and
// not yet written never exceed FiresInFlight however many are due (each
// partition plans one write at a time, once it has room), the partitions
// beyond the budget wait their turn, and in the end every job has fired
// exactly once.
func TestHerdFiresInFlightAreBounded(t *testing.T) {
	client := etcdtest.New(t).Client(t)
	ctx := context.Background()
	ns := "/herd-bounded/"
	const parts, jobs, batch, budget = 8, 320, 5, 2 * 5
	start := time.Date(2026, 6, 1, 0, 0, 0, 0, time.UTC)
	due := start.Add(time.Minute)
	st := store.NewEtcd(client, ns, parts, api.DefaultLimits(), nil)
	perPartition := make([]int, parts)
	for i := range jobs {
		id := fmt.Sprintf("herd-%03d", i)
		if _, err := st.Create(ctx, api.Job{ID: id, RunAt: &due, Executor: api.Executor{Type: "noop"}}); err != nil {
			t.Fatal(err)
		}
		perPartition[shard.Partition(id, parts)]++
	}
	for p, n := range perPartition {
		if n <= batch {
			t.Fatalf("partition %d has %d jobs: the test needs more than one write in each", p, n)
		}
	}
	clock := clockwork.NewFakeClockAt(start)
	d, reg := newDispatcherOfM(t, client, ns, parts, func(cfg *Config) {
		cfg.Clock = clock
		cfg.FireBatch = batch
		cfg.FiresInFlight = budget
	})

	// The hook counts the runs planned and not yet answered, and holds
	// the answers of writes of runs until the test opens (a partition's
	// first tick writes its jobs' states without runs).
	var mu sync.Mutex
	planned, most, writes, held := 0, 0, 0, 0
	release := make(chan struct{})
	var releaseOnce sync.Once
	open := func() { releaseOnce.Do(func() { close(release) }) }
	d.fireHook = func(p, runs int) func() {
		if runs == 0 {
			return func() {}
		}
		mu.Lock()
		planned += runs
		most = max(most, planned)
		writes++
		held++
		mu.Unlock()
		return func() {
			<-release
			mu.Lock()
			planned -= runs
			held--
			mu.Unlock()
		}
	}
	tooMany := func() string {
		mu.Lock()
		defer mu.Unlock()
		if most > budget {
			return fmt.Sprintf("%d runs planned and not yet written at once, want at most %d", most, budget)
		}
		return ""
	}

	work := newOwnedParts(ctx, t, client, ns, d)
	defer work.stop()
	defer open()
	work.own(0, parts)
	waitUntil(t, "every partition loaded", func() bool { return len(d.Owned()) == parts }, tooMany)

	clock.Advance(due.Sub(start))
	// Two writes of batch runs fill the budget: they are planned, held,
	// and every other partition waits for room.
	waitUntil(t, fmt.Sprintf("2 writes held and %d partitions waiting", parts-2), func() bool {
		mu.Lock()
		h := held
		mu.Unlock()
		return h == 2 && metrictest.Value(t, reg, "jobfleet_dispatch_fires_waiting") == parts-2
	}, tooMany)
	if got := metrictest.Value(t, reg, "jobfleet_dispatch_fires_in_flight"); got != budget {
		t.Errorf("fires in flight gauge %v, want %d", got, budget)
	}

	open()
	count := func() int64 {
		resp, err := client.Get(ctx, store.Keys{NS: ns}.AllRunsPrefix(), clientv3.WithPrefix(), clientv3.WithCountOnly())
		if err != nil {
			t.Fatal(err)
		}
		return resp.Count
	}
	waitUntil(t, fmt.Sprintf("%d runs in etcd", jobs), func() bool { return count() == jobs }, tooMany)
	if msg := tooMany(); msg != "" {
		t.Fatal(msg)
	}
	for i := range jobs {
		id := fmt.Sprintf("herd-%03d", i)
		runs, err := st.Runs(ctx, id, 10)
		if err != nil {
			t.Fatal(err)
		}
		if len(runs) != 1 || runs[0].Status != api.RunPending || !runs[0].ScheduledAt.Equal(due) {
			t.Errorf("job %s: runs %+v, want one pending at %v", id, runs, due)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if writes < jobs/batch {
		t.Errorf("%d writes of fires for %d runs, want at least %d (at most %d runs each)", writes, jobs, jobs/batch, batch)
	}
	for _, name := range []string{"jobfleet_dispatch_fires_in_flight", "jobfleet_dispatch_fires_waiting"} {
		if got := metrictest.Value(t, reg, name); got != 0 {
			t.Errorf("%s %v after the herd, want 0", name, got)
		}
	}
}

// TestQueuedWriteOutlastsTheRequestTimeout: a fenced write that waits in
// the committer's queue for longer than RequestTimeout (a herd's writes
// of every partition waiting for the commit window) is not given up: the
// timeout bounds the request once sent, and the write applies when room
// comes.
func TestQueuedWriteOutlastsTheRequestTimeout(t *testing.T) {
	client := etcdtest.New(t).Client(t)
	ctx := context.Background()
	ns := "/queued-timeout/"
	// Long enough for one fenced write on a slow disk under -race (the
	// test must not depend on the machine being fast); the wait below is
	// longer than it.
	const timeout = time.Second
	d, _ := newDispatcherOfM(t, client, ns, 1, func(cfg *Config) {
		cfg.CommitsInFlight = 1
		cfg.RequestTimeout = timeout
		cfg.CommitLatencyTarget = timeout / 2
	})
	resp, err := client.Put(ctx, shard.OwnerKey(ns, 0), "m")
	if err != nil {
		t.Fatal(err)
	}
	own := shard.NewOwnership(client, ns, "m", 0, resp.Header.Revision)
	wctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel()
	wg.Go(func() { d.Work(wctx, own) })
	waitUntil(t, "the partition loaded", func() bool { return len(d.Owned()) == 1 }, func() string { return "" })
	d.mu.Lock()
	pt := d.parts[0]
	d.mu.Unlock()

	d.commits.mu.Lock()
	d.commits.inFlight = 1 // the only slot is busy
	d.commits.mu.Unlock()
	done := make(chan error, 1)
	go func() {
		pt.wmu.Lock()
		defer pt.wmu.Unlock()
		_, err := pt.commit(wctx, []clientv3.Op{clientv3.OpPut(ns+"data", "v")})
		done <- err
	}()
	waitUntil(t, "the write queued", func() bool {
		d.commits.mu.Lock()
		defer d.commits.mu.Unlock()
		return len(d.commits.queue) == 1
	}, func() string { return "" })
	// More than a timeout passes while it waits: it is still queued.
	waited := time.After(3 * timeout / 2)
	select {
	case err := <-done:
		t.Fatalf("the queued write returned %v before room came, want it to wait", err)
	case <-waited:
	}
	d.commits.release(0)
	if err := <-done; err != nil {
		t.Fatalf("the queued write failed once sent: %v", err)
	}
	got, err := client.Get(ctx, ns+"data")
	if err != nil || len(got.Kvs) != 1 {
		t.Fatalf("the write did not apply: %v %v", got, err)
	}
}
