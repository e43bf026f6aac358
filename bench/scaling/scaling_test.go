package scaling_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/jobfleet/jobfleet/bench"
	"github.com/jobfleet/jobfleet/bench/report"
	"github.com/jobfleet/jobfleet/bench/scaling"
)

// TestTinyScaling runs every strategy on both workloads at tiny sizes and
// checks the structural facts the report relies on: the sharded fleet
// neither misses nor duplicates, the baselines fire everything, the ratio
// and the store limit are computed, and CSV, JSON and PNG files are
// written. It keeps the benchmark from rotting; its numbers mean nothing.
func TestTinyScaling(t *testing.T) {
	etcd, err := bench.StartEtcd(false)
	if err != nil {
		t.Fatal(err)
	}
	defer etcd.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	cfg := scaling.DefaultConfig()
	cfg.Members = []int{1, 2}
	cfg.Workloads = []string{scaling.Drain}
	cfg.Partitions = 16
	cfg.DrainJobs = 60
	cfg.StoreLimitConcurrency = []int{1, 4}
	cfg.StoreLimitDuration = 200 * time.Millisecond
	cfg.Fsync = false
	cfg.Timeout = time.Minute
	drain, err := scaling.RunOn(ctx, etcd.Endpoints(), cfg)
	if err != nil {
		t.Fatal(err)
	}

	cfg.Members = []int{2}
	cfg.Workloads = []string{scaling.Steady}
	cfg.SteadyJobs = 10
	cfg.SteadyWindow = time.Second
	cfg.StoreLimitConcurrency = []int{2}
	cfg.Delay = time.Millisecond // the interceptor path
	steady, err := scaling.RunOn(ctx, etcd.Endpoints(), cfg)
	if err != nil {
		t.Fatal(err)
	}

	for _, res := range []*scaling.Result{drain, steady} {
		if res.Limit <= 0 {
			t.Errorf("store limit %v, want > 0", res.Limit)
		}
		for _, tr := range res.Trials {
			if tr.Expected == 0 || tr.Runs != tr.Expected || tr.Misses != 0 {
				t.Errorf("%s n=%d %s: %d of %d runs, %d misses; want all, none missed", tr.Strategy, tr.Members, tr.Workload, tr.Runs, tr.Expected, tr.Misses)
			}
			if tr.Duplicates < 0 || (tr.Strategy != scaling.NoCoordination && tr.Duplicates != 0) {
				t.Errorf("%s n=%d %s: %d duplicates, want 0", tr.Strategy, tr.Members, tr.Workload, tr.Duplicates)
			}
			if tr.Strategy == scaling.Sharded && tr.Errors != 0 {
				t.Errorf("sharded n=%d %s: %d errors, want 0", tr.Members, tr.Workload, tr.Errors)
			}
			if tr.Workload == scaling.Drain && tr.FiresPerSec <= 0 {
				t.Errorf("%s n=%d drain: %v fires/s", tr.Strategy, tr.Members, tr.FiresPerSec)
			}
			if tr.Workload == scaling.Steady && (tr.Lag.Count != tr.Runs || tr.Lag.P99 < 0) {
				t.Errorf("%s n=%d steady: lag %+v for %d runs", tr.Strategy, tr.Members, tr.Lag, tr.Runs)
			}
		}
	}
	for _, n := range []int{1, 2} {
		if r := drain.Ratios[n]; r <= 0 {
			t.Errorf("sharded/global-lock ratio at n=%d is %v, want > 0", n, r)
		}
	}

	dir := t.TempDir()
	files, err := report.WriteAll(ioDiscard{}, dir, "scaling", drain, append(drain.Tables(), steady.Tables()...))
	if err != nil {
		t.Fatal(err)
	}
	charts, err := drain.Charts(dir, "drain_")
	if err != nil {
		t.Fatal(err)
	}
	more, err := steady.Charts(dir, "steady_")
	if err != nil {
		t.Fatal(err)
	}
	files = append(append(files, charts...), more...)
	for _, want := range []string{"scaling_summary.csv", "scaling_drain.csv", "scaling_steady.csv", "store_limit.csv", "scaling.json", "drain_drain.png", "steady_lag.png"} {
		fi, err := os.Stat(filepath.Join(dir, want))
		if err != nil || fi.Size() == 0 {
			t.Errorf("%s not written (files: %v): %v", want, files, err)
		}
	}
}

type ioDiscard struct{}

func (ioDiscard) Write(p []byte) (int, error) { return len(p), nil }
