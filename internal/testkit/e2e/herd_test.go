package e2e_test

import (
	"context"
	"fmt"
	"math"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	jfapi "github.com/jobfleet/jobfleet/api"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/jobfleet/jobfleet/internal/testkit/etcdtest"
	"github.com/jobfleet/jobfleet/internal/testkit/fleettest"
	"github.com/jobfleet/jobfleet/internal/testkit/metrictest"
	"github.com/jobfleet/jobfleet/store"
)

// herdJobs is the size of TestHerdKeepsLeases's herd, and whether it was
// asked for: JOBFLEET_HERD_JOBS, or 10 000 (1 000 under the race
// detector, which slows the embedded etcd, in this process, as much as
// the members: a herd then measures how starved of CPU the process is,
// nothing of the fleet). On a busy 2-core machine 30 000 to 60 000 make
// the members fence themselves as jobfleet bench scale found at 100 000
// jobs (docs/scaling.md, "Herds and lease renewal").
func herdJobs(t *testing.T) (n int, asked bool) {
	if s := os.Getenv("JOBFLEET_HERD_JOBS"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 {
			t.Fatalf("JOBFLEET_HERD_JOBS=%q: want a positive number of jobs", s)
		}
		return n, true
	}
	if raceEnabled {
		return 1000, false
	}
	return 10000, false
}

// span is one request of the store probe.
type span struct{ start, end time.Time }

func (s span) took() time.Duration { return s.end.Sub(s.start) }

// storeProbe measures, each on its own loop and on a connection of its
// own, lease keepalives, serializable reads (answered without raft) and
// linearizable reads (which wait for etcd to apply what it committed),
// and samples how many committed entries etcd has not applied yet (the
// embedded server's metrics).
type storeProbe struct {
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu                        sync.Mutex
	keepalive, serial, linear []span
	gaps                      []struct {
		at  time.Time
		gap float64
	}
}

func newStoreProbe(t *testing.T, c *clientv3.Client) *storeProbe {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	grant, err := c.Grant(ctx, 60)
	if err != nil {
		t.Fatal(err)
	}
	p := &storeProbe{cancel: cancel}
	loop := func(into *[]span, req func() error) {
		for ctx.Err() == nil {
			s := span{start: time.Now()}
			if req() == nil {
				s.end = time.Now()
				p.mu.Lock()
				*into = append(*into, s)
				p.mu.Unlock()
			}
			select {
			case <-ctx.Done():
			case <-time.After(50 * time.Millisecond):
			}
		}
	}
	p.wg.Go(func() {
		loop(&p.keepalive, func() error { _, err := c.KeepAliveOnce(ctx, grant.ID); return err })
	})
	p.wg.Go(func() {
		loop(&p.serial, func() error { _, err := c.Get(ctx, "probe", clientv3.WithSerializable()); return err })
	})
	p.wg.Go(func() { loop(&p.linear, func() error { _, err := c.Get(ctx, "probe"); return err }) })
	p.wg.Go(func() {
		for ctx.Err() == nil {
			gap := applyGap()
			p.mu.Lock()
			p.gaps = append(p.gaps, struct {
				at  time.Time
				gap float64
			}{time.Now(), gap})
			p.mu.Unlock()
			select {
			case <-ctx.Done():
			case <-time.After(20 * time.Millisecond):
			}
		}
	})
	return p
}

// applyGap returns how many entries the embedded etcd committed and has
// not applied yet, from its metrics (NaN if they cannot be read).
func applyGap() float64 {
	mfs, err := prometheus.DefaultGatherer.Gather()
	if err != nil {
		return math.NaN()
	}
	var committed, applied float64
	for _, mf := range mfs {
		switch mf.GetName() {
		case "etcd_server_proposals_committed_total":
			committed = value(mf.Metric[0])
		case "etcd_server_proposals_applied_total":
			applied = value(mf.Metric[0])
		}
	}
	return committed - applied
}

func (p *storeProbe) stop() {
	p.cancel()
	p.wg.Wait()
}

func summary(spans []span) string {
	if len(spans) == 0 {
		return "none"
	}
	d := make([]time.Duration, len(spans))
	for i, s := range spans {
		d[i] = s.took()
	}
	slices.Sort(d)
	q := func(f float64) time.Duration { return d[min(len(d)-1, int(f*float64(len(d))))].Round(time.Millisecond) }
	return fmt.Sprintf("n=%d p50=%v p99=%v max=%v", len(d), q(0.5), q(0.99), d[len(d)-1].Round(time.Millisecond))
}

// report logs the probe's figures, and for the slowest keepalives what
// the reads saw while they waited.
func (p *storeProbe) report(t *testing.T, due time.Time) {
	t.Logf("probe on its own connection: keepalive %s; serializable get %s; linearizable get %s", summary(p.keepalive), summary(p.serial), summary(p.linear))
	overlapping := func(spans []span, w span) time.Duration {
		var m time.Duration
		for _, s := range spans {
			if s.start.Before(w.end) && s.end.After(w.start) {
				m = max(m, s.took())
			}
		}
		return m
	}
	slow := slices.SortedFunc(slices.Values(p.keepalive), func(a, b span) int { return int(b.took() - a.took()) })
	for _, k := range slow[:min(len(slow), 5)] {
		gap := 0.0
		for _, g := range p.gaps {
			if !g.at.Before(k.start) && !g.at.After(k.end) {
				gap = max(gap, g.gap)
			}
		}
		t.Logf("  keepalive sent at due%+v took %v; meanwhile serializable gets took up to %v, linearizable up to %v; up to %v entries committed and not applied",
			k.start.Sub(due).Round(time.Millisecond), k.took().Round(time.Millisecond), overlapping(p.serial, k).Round(time.Millisecond), overlapping(p.linear, k).Round(time.Millisecond), gap)
	}
}

// histogram describes the histogram name in reg: its count, mean, and
// the upper bounds of the buckets of its median and 99th percentile.
func histogram(t *testing.T, reg prometheus.Gatherer, name string) string {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name || len(mf.Metric) == 0 {
			continue
		}
		h := mf.Metric[0].GetHistogram()
		n := h.GetSampleCount()
		if n == 0 {
			return "none"
		}
		at := func(q float64) string {
			rank := q * float64(n)
			lower := 0.0
			for _, b := range h.Bucket {
				if float64(b.GetCumulativeCount()) >= rank {
					return (time.Duration(b.GetUpperBound() * float64(time.Second))).String()
				}
				lower = b.GetUpperBound()
			}
			return fmt.Sprintf(">%v", time.Duration(lower*float64(time.Second)))
		}
		return fmt.Sprintf("n=%d mean=%v p50≤%s p99≤%s", n, time.Duration(h.GetSampleSum()/float64(n)*float64(time.Second)).Round(time.Millisecond), at(0.5), at(0.99))
	}
	return "absent"
}

func value(m *dto.Metric) float64 {
	switch {
	case m.Counter != nil:
		return m.Counter.GetValue()
	case m.Gauge != nil:
		return m.Gauge.GetValue()
	}
	return math.NaN()
}

// TestHerdKeepsLeases makes N one-off jobs (herdJobs) due in the same
// second on three members over an etcd that syncs its log to disk, and
// checks that every job gets exactly one run, all durable, whatever
// handoffs the herd causes. Members that fence themselves under the herd
// (lease renewal starved) are reported, and fail the test when
// JOBFLEET_HERD_JOBS asked for the herd: in one process a member's CPU is
// etcd's, so on a loaded machine the outcome measures the machine as
// much as the fleet, and the default run does not depend on it.
// Meanwhile a probe on its own connection to etcd times keepalives and
// reads, which tells a slow store from a slow connection.
func TestHerdKeepsLeases(t *testing.T) {
	n, asked := herdJobs(t)
	srv := etcdtest.NewDurable(t)
	logs, observed := observer.New(zap.WarnLevel)
	const parts = 64
	f := fleettest.New(t, srv, fleettest.Options{Partitions: parts, Scheduler: true, Quiet: true, Logs: logs, LeaseTTL: 5 * time.Second})
	ids := []string{"m1", "m2", "m3"}
	for _, id := range ids {
		f.Join(id)
	}
	f.WaitSettled(30 * time.Second)
	ctx := context.Background()
	st := store.NewEtcd(f.Client, f.NS, parts, jfapi.DefaultLimits(), nil)
	keys := store.Keys{NS: f.NS}

	// write writes every job with run_at at, in batches, 8 in flight.
	write := func(at time.Time, mode store.BatchMode) time.Duration {
		start := time.Now()
		const size = 100
		var wg sync.WaitGroup
		sem := make(chan struct{}, 8)
		var mu sync.Mutex
		var failed error
		for b := 0; b < n; b += size {
			wg.Add(1)
			sem <- struct{}{}
			go func() {
				defer wg.Done()
				defer func() { <-sem }()
				items := make([]store.BatchItem, 0, size)
				for i := b; i < min(b+size, n); i++ {
					items = append(items, store.BatchItem{Job: jfapi.Job{ID: fmt.Sprintf("herd-%06d", i), RunAt: &at, Executor: jfapi.Executor{Type: "herd-noop"}}})
				}
				res, err := st.WriteBatch(ctx, items, mode)
				if err == nil && res[0].Err != nil {
					err = res[0].Err
				}
				if err != nil {
					mu.Lock()
					failed = err
					mu.Unlock()
				}
			}()
		}
		wg.Wait()
		if failed != nil {
			t.Fatalf("writing jobs: %v", failed)
		}
		return time.Since(start)
	}
	count := func(prefix string) int64 {
		t.Helper()
		resp, err := f.Client.Get(ctx, prefix, clientv3.WithPrefix(), clientv3.WithCountOnly())
		if err != nil {
			t.Fatal(err)
		}
		return resp.Count
	}
	start := time.Now()
	write(time.Now().Add(time.Hour), store.BatchCreate)
	waitFor(t, 2*time.Minute, func() bool { return count(keys.AllStatePrefix()) >= int64(n) })
	took := time.Since(start)
	t.Logf("%d jobs created and taken in by their owners in %v", n, took.Round(time.Millisecond))

	// The herd's second: after the rewrite, which takes about as long as
	// the creation did.
	due := time.Now().Add(took*3/2 + 3*time.Second).Truncate(time.Second)
	write(due, store.BatchApply)
	if time.Now().After(due) {
		t.Fatalf("rewriting the jobs ended after their due time %v", due)
	}

	// The probe: a lease and reads on a connection of its own.
	probe := newStoreProbe(t, etcdtest.NewClient(t, srv.Endpoints()))
	time.Sleep(time.Until(due))
	var runs int64
	for deadline := time.Now().Add(3 * time.Minute); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if runs = count(keys.AllRunsPrefix()); runs >= int64(n) {
			break
		}
	}
	durable := time.Since(due)
	probe.stop()
	if runs < int64(n) {
		t.Errorf("herd of %d: %d runs durable %v after their second", n, runs, durable.Round(time.Millisecond))
	} else {
		t.Logf("herd of %d: all runs durable %v after their second (%.0f runs/s)", n, durable.Round(time.Millisecond), float64(n)/durable.Seconds())
	}
	probe.report(t, due)
	t.Logf("etcd: wal fsync %s; backend commit %s", histogram(t, prometheus.DefaultGatherer, "etcd_disk_wal_fsync_duration_seconds"), histogram(t, prometheus.DefaultGatherer, "etcd_disk_backend_commit_duration_seconds"))
	for _, e := range observed.FilterMessageSnippet("fencing").All() {
		t.Logf("  fenced at due+%v: %v", e.Time.Sub(due).Round(time.Millisecond), e.ContextMap())
	}
	fenced := 0.0
	for _, id := range ids {
		reg := f.Member(id).Metrics
		ended := metrictest.Value(t, reg, "jobfleet_lease_sessions_ended_total", "reason", "renew_deadline") + metrictest.Value(t, reg, "jobfleet_lease_sessions_ended_total", "reason", "lost")
		fenced += ended
		t.Logf("member %s: sessions ended %v; keepalive %s; commit %s; commit errors %v", id, ended,
			histogram(t, reg, "jobfleet_lease_keepalive_seconds"), histogram(t, reg, "jobfleet_dispatch_commit_seconds"),
			metrictest.Value(t, reg, "jobfleet_dispatch_commit_errors_total"))
	}
	fences := observed.FilterMessageSnippet("fencing").Len()
	switch {
	case (fenced > 0 || fences > 0) && asked:
		t.Errorf("members fenced themselves under the herd: %v sessions ended, %d fencing log lines", fenced, fences)
	case fenced > 0 || fences > 0:
		t.Logf("members fenced themselves under the herd: %v sessions ended, %d fencing log lines (not a failure without JOBFLEET_HERD_JOBS)", fenced, fences)
	}

	// Exactly once: one run per job.
	resp, err := f.Client.Get(ctx, keys.AllRunsPrefix(), clientv3.WithPrefix(), clientv3.WithKeysOnly())
	if err != nil {
		t.Fatal(err)
	}
	perJob := map[string]int{}
	for _, kv := range resp.Kvs {
		parts := strings.Split(strings.TrimPrefix(string(kv.Key), keys.AllRunsPrefix()), "/")
		if len(parts) < 2 {
			t.Fatalf("unexpected run key %q", kv.Key)
		}
		perJob[parts[1]]++
	}
	if len(perJob) != n {
		t.Errorf("%d of %d jobs have runs", len(perJob), n)
	}
	for job, k := range perJob {
		if k != 1 {
			t.Errorf("job %s has %d runs, want 1", job, k)
		}
	}
}
