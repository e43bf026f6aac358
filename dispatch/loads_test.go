package dispatch

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/jobfleet/jobfleet/api"

	"github.com/prometheus/client_golang/prometheus"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap/zaptest"

	"github.com/jobfleet/jobfleet/internal/testkit/etcdtest"
	"github.com/jobfleet/jobfleet/internal/testkit/metrictest"
	"github.com/jobfleet/jobfleet/shard"
	"github.com/jobfleet/jobfleet/store"
)

// newDispatcherOfM makes the dispatcher of member "m" (ownedParts' member)
// for parts partitions under ns, its configuration edited by edit, with
// its metrics in the registry returned and its log the test's.
func newDispatcherOfM(t *testing.T, client *clientv3.Client, ns string, parts int, edit func(*Config)) (*Dispatcher, *prometheus.Registry) {
	t.Helper()
	reg := prometheus.NewRegistry()
	cfg := DefaultConfig(ns, parts, "m", "http://m.invalid")
	cfg.Metrics = NewMetrics(reg)
	cfg.Logger = zaptest.NewLogger(t)
	edit(&cfg)
	d, err := New(client, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return d, reg
}

// ownedParts runs d.Work, as member "m", on partitions a test acquires
// for it (owner keys put without a lease), until the test releases them.
type ownedParts struct {
	t       testing.TB
	ctx     context.Context
	client  *clientv3.Client
	ns      string
	d       *Dispatcher
	cancels map[int]context.CancelFunc
	wg      sync.WaitGroup
}

func newOwnedParts(ctx context.Context, t testing.TB, client *clientv3.Client, ns string, d *Dispatcher) *ownedParts {
	return &ownedParts{t: t, ctx: ctx, client: client, ns: ns, d: d, cancels: map[int]context.CancelFunc{}}
}

// own acquires partitions from to to-1 and works them.
func (o *ownedParts) own(from, to int) {
	o.t.Helper()
	for p := from; p < to; p++ {
		resp, err := o.client.Put(o.ctx, shard.OwnerKey(o.ns, p), "m")
		if err != nil {
			o.t.Fatal(err)
		}
		own := shard.NewOwnership(o.client, o.ns, "m", p, resp.Header.Revision)
		wctx, cancel := context.WithCancel(o.ctx)
		o.cancels[p] = cancel
		o.wg.Go(func() { o.d.Work(wctx, own) })
	}
}

// release ends partition p's work.
func (o *ownedParts) release(p int) { o.cancels[p]() }

// stop ends every partition's work and waits for it.
func (o *ownedParts) stop() {
	for _, c := range o.cancels {
		c()
	}
	o.wg.Wait()
}

// waitUntil polls cond until it holds, failing the test after 10 s, or
// at once if bad returns a complaint.
func waitUntil(t *testing.T, what string, cond func() bool, bad func() string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if msg := bad(); msg != "" {
			t.Fatal(msg)
		}
		if time.Now().After(deadline) {
			t.Fatalf("not within 10s: %s", what)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// TestLoadsInFlightAreBounded gives a member many partitions at once, as
// a takeover or a start does: at most LoadsInFlight of them load at a
// time while the others wait their turn, a partition released while it
// waits leaves without loading, and every other partition is loaded and
// served in the end.
func TestLoadsInFlightAreBounded(t *testing.T) {
	client := etcdtest.New(t).Client(t)
	ctx := context.Background()
	ns := "/loads-bounded/"
	const parts, bound = 16, 2
	st := store.NewEtcd(client, ns, parts, api.DefaultLimits(), nil)
	for i := range 4 * parts {
		if _, err := st.Create(ctx, api.Job{ID: fmt.Sprintf("job-%03d", i), Schedule: "@every 1h", Executor: api.Executor{Type: "noop"}}); err != nil {
			t.Fatal(err)
		}
	}
	d, reg := newDispatcherOfM(t, client, ns, parts, func(cfg *Config) { cfg.LoadsInFlight = bound })

	var mu sync.Mutex
	loading, most := 0, 0
	started := map[int]bool{}
	release := make(chan struct{})
	var releaseOnce sync.Once
	open := func() { releaseOnce.Do(func() { close(release) }) }
	d.loadHook = func(p int) func() {
		mu.Lock()
		loading++
		most = max(most, loading)
		started[p] = true
		mu.Unlock()
		<-release
		return func() {
			mu.Lock()
			loading--
			mu.Unlock()
		}
	}
	tooMany := func() string {
		mu.Lock()
		defer mu.Unlock()
		if most > bound {
			return fmt.Sprintf("%d partitions loading at once, want at most %d", most, bound)
		}
		return ""
	}

	work := newOwnedParts(ctx, t, client, ns, d)
	defer work.stop()
	defer open() // loads the test holds end
	work.own(0, parts)

	waitUntil(t, fmt.Sprintf("%d partitions loading and %d waiting", bound, parts-bound), func() bool {
		mu.Lock()
		n := loading
		mu.Unlock()
		return n == bound && metrictest.Value(t, reg, "jobfleet_dispatch_loads_waiting") == parts-bound
	}, tooMany)
	if got := metrictest.Value(t, reg, "jobfleet_dispatch_loads_in_flight"); got != bound {
		t.Errorf("loads in flight gauge %v, want %d", got, bound)
	}

	// A partition released while it waits for its turn leaves the queue.
	gone := -1
	mu.Lock()
	for p := range parts {
		if !started[p] {
			gone = p
			break
		}
	}
	mu.Unlock()
	work.release(gone)
	waitUntil(t, "the released partition to leave the queue", func() bool {
		return metrictest.Value(t, reg, "jobfleet_dispatch_loads_waiting") == parts-bound-1
	}, tooMany)

	open()
	waitUntil(t, "every partition but the released one loaded", func() bool { return len(d.Owned()) == parts-1 }, tooMany)
	if msg := tooMany(); msg != "" {
		t.Fatal(msg)
	}
	for _, p := range d.Owned() {
		if p == gone {
			t.Errorf("partition %d was loaded after it was released", gone)
		}
	}
	if got := metrictest.Value(t, reg, "jobfleet_dispatch_loads_waiting"); got != 0 {
		t.Errorf("loads waiting gauge %v after every load, want 0", got)
	}
	for i := range 4 * parts {
		id := fmt.Sprintf("job-%03d", i)
		if p := shard.Partition(id, parts); p != gone {
			if _, err := d.partitionFor(id); err != nil {
				t.Errorf("job %s of loaded partition %d: %v", id, p, err)
			}
		}
	}
}

// TestLoadsAreBoundedByJobs weighs each load by its partition's jobs:
// with a budget of 8 jobs, partitions of 2 jobs load 4 at once (not one
// per slot, nor all at once), and partitions larger than the budget load
// one at a time, each taking the whole budget; the jobs of the loads in
// flight never exceed the budget but for one larger partition alone.
func TestLoadsAreBoundedByJobs(t *testing.T) {
	client := etcdtest.New(t).Client(t)
	ctx := context.Background()
	ns := "/loads-by-jobs/"
	const parts, budget, small, big = 16, 8, 2, 12
	st := store.NewEtcd(client, ns, parts, api.DefaultLimits(), nil)
	size := func(p int) int { // small partitions 0..11, big ones 12..15
		if p < 12 {
			return small
		}
		return big
	}
	have := make([]int, parts)
	for i, left := 0, 12*small+4*big; left > 0; i++ {
		id := fmt.Sprintf("job-%04d", i)
		if p := shard.Partition(id, parts); have[p] < size(p) {
			if _, err := st.Create(ctx, api.Job{ID: id, Schedule: "@every 1h", Executor: api.Executor{Type: "noop"}}); err != nil {
				t.Fatal(err)
			}
			have[p]++
			left--
		}
	}
	d, reg := newDispatcherOfM(t, client, ns, parts, func(cfg *Config) {
		cfg.LoadsInFlight = -1 // only the jobs bound
		cfg.LoadJobsInFlight = budget
	})

	var mu sync.Mutex
	loading, jobs, complaint := 0, 0, ""
	release := make(chan struct{})
	d.loadHook = func(p int) func() {
		mu.Lock()
		loading++
		jobs += size(p)
		if loading > 1 && jobs > budget && complaint == "" {
			complaint = fmt.Sprintf("%d partitions of %d jobs loading at once, want at most %d jobs (or one partition)", loading, jobs, budget)
		}
		wait := release // nil: not held
		mu.Unlock()
		if wait != nil {
			<-wait
		}
		return func() {
			mu.Lock()
			loading--
			jobs -= size(p)
			mu.Unlock()
		}
	}
	bad := func() string {
		mu.Lock()
		defer mu.Unlock()
		return complaint
	}
	inFlight := func(n, waiting int) func() bool {
		return func() bool {
			mu.Lock()
			l := loading
			mu.Unlock()
			return l == n && metrictest.Value(t, reg, "jobfleet_dispatch_loads_waiting") == float64(waiting)
		}
	}

	openAll := func() { // lets the held loads, and every later one, go
		mu.Lock()
		defer mu.Unlock()
		if release != nil {
			close(release)
			release = nil
		}
	}
	work := newOwnedParts(ctx, t, client, ns, d)
	defer work.stop()
	defer openAll()
	work.own(0, 12)
	waitUntil(t, "4 partitions of 2 jobs loading and 8 waiting", inFlight(budget/small, 12-budget/small), bad)
	if got := metrictest.Value(t, reg, "jobfleet_dispatch_load_jobs_in_flight"); got != budget {
		t.Errorf("load jobs in flight gauge %v, want %d", got, budget)
	}
	openAll()
	waitUntil(t, "the small partitions loaded", func() bool { return len(d.Owned()) == 12 }, bad)

	mu.Lock()
	release = make(chan struct{}) // hold loads again
	mu.Unlock()
	work.own(12, 16)
	waitUntil(t, "1 partition larger than the budget loading and 3 waiting", inFlight(1, 3), bad)
	if got := metrictest.Value(t, reg, "jobfleet_dispatch_load_jobs_in_flight"); got != budget {
		t.Errorf("load jobs in flight gauge %v with a partition larger than the budget, want %d", got, budget)
	}
	openAll()
	waitUntil(t, "every partition loaded", func() bool { return len(d.Owned()) == parts }, bad)
	if msg := bad(); msg != "" {
		t.Fatal(msg)
	}
	if got := metrictest.Value(t, reg, "jobfleet_dispatch_load_jobs_in_flight"); got != 0 {
		t.Errorf("load jobs in flight gauge %v after every load, want 0", got)
	}
}

// BenchmarkLoadSmallPartitions is a member starting on a small fleet's
// share: 340 partitions of about 10 jobs each, acquired at once. It
// reports the time until every one is loaded and served, by load bound:
// two partitions at a time (the bound before loads were weighed by
// their jobs), the defaults, and no bound.
//
//	go test -run '^$' -bench LoadSmallPartitions -benchtime 5x ./dispatch
func BenchmarkLoadSmallPartitions(b *testing.B) {
	client := etcdtest.New(b).Client(b)
	ctx := context.Background()
	ns := "/loads-small/"
	const parts, jobs = 340, 3400
	st := store.NewEtcd(client, ns, parts, api.DefaultLimits(), nil)
	for i := range jobs {
		if _, err := st.Create(ctx, api.Job{ID: fmt.Sprintf("job-%05d", i), Schedule: "@every 1h", Executor: api.Executor{Type: "noop"}}); err != nil {
			b.Fatal(err)
		}
	}
	owns := make([]*shard.Ownership, parts)
	for p := range parts {
		resp, err := client.Put(ctx, shard.OwnerKey(ns, p), "m")
		if err != nil {
			b.Fatal(err)
		}
		owns[p] = shard.NewOwnership(client, ns, "m", p, resp.Header.Revision)
	}
	for _, bc := range []struct {
		name        string
		loads, jobs int
	}{
		{"partitions=2", 2, -1},
		{"defaults", DefaultConfig(ns, parts, "m", "").LoadsInFlight, DefaultConfig(ns, parts, "m", "").LoadJobsInFlight},
		{"unbounded", -1, -1},
	} {
		b.Run(bc.name, func(b *testing.B) {
			cfg := DefaultConfig(ns, parts, "m", "http://m.invalid")
			cfg.LoadsInFlight, cfg.LoadJobsInFlight = bc.loads, bc.jobs
			var took time.Duration
			for range b.N {
				d, err := New(client, cfg)
				if err != nil {
					b.Fatal(err)
				}
				wctx, cancel := context.WithCancel(ctx)
				var wg sync.WaitGroup
				start := time.Now()
				for _, own := range owns {
					wg.Go(func() { d.Work(wctx, own) })
				}
				for len(d.Owned()) < parts {
					time.Sleep(time.Millisecond)
				}
				took += time.Since(start)
				cancel()
				wg.Wait()
			}
			b.ReportMetric(took.Seconds()*1e3/float64(b.N), "ms/start")
		})
	}
}

// TestLoadedAnnouncesALoad: a partition acquired but still loading is not
// Loaded (a member waiting for its load is not ready); the channel Loaded
// returns is closed when it loads, and it is Loaded from then on.
func TestLoadedAnnouncesALoad(t *testing.T) {
	client := etcdtest.New(t).Client(t)
	ctx := context.Background()
	ns := "/loaded/"
	d, _ := newDispatcherOfM(t, client, ns, 2, func(*Config) {})
	held := make(chan struct{})
	entered := make(chan int, 1)
	d.loadHook = func(p int) func() {
		entered <- p
		<-held
		return func() {}
	}
	o := newOwnedParts(ctx, t, client, ns, d)
	defer o.stop()
	o.own(1, 2)
	if p := <-entered; p != 1 {
		t.Fatalf("partition %d loading, want 1", p)
	}
	loaded, changed := d.Loaded(1)
	if loaded {
		t.Fatal("partition 1 is Loaded while its load is held")
	}
	select {
	case <-changed:
		t.Fatal("the change channel closed while nothing loaded")
	default:
	}
	close(held)
	select {
	case <-changed:
	case <-time.After(30 * time.Second):
		t.Fatal("the change channel did not close when the partition loaded")
	}
	if loaded, _ := d.Loaded(1); !loaded {
		t.Fatal("partition 1 is not Loaded after its load")
	}
	if loaded, _ := d.Loaded(0); loaded {
		t.Fatal("partition 0, never acquired, is Loaded")
	}
}
