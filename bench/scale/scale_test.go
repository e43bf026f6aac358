package scale_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/jobfleet/jobfleet/bench"
	"github.com/jobfleet/jobfleet/bench/report"
	"github.com/jobfleet/jobfleet/bench/scale"
	"github.com/jobfleet/jobfleet/internal/testkit/binarytest"
	"github.com/jobfleet/jobfleet/internal/testkit/configtest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// jobfleetBinary builds the jobfleet binary into a temporary directory
// and returns its path; with -short it skips the test instead, which would
// start orchestrator processes.
func jobfleetBinary(t *testing.T) string {
	t.Helper()
	if testing.Short() {
		t.Skip("starts orchestrator processes")
	}
	binary := filepath.Join(t.TempDir(), "jobfleet")
	if err := binarytest.Build(binary); err != nil {
		t.Fatal(err)
	}
	return binary
}

// TestTinyScale is the CI miniature of `jobfleet bench scale`: 60 and 120
// jobs on 2 real orchestrator processes with every phase, checking the
// output's structure and that the figures are plausible (not fixed
// values): every job created, listed and fired once in the herd and once
// in the spread, a takeover and a rolling restart with no misfire, sizes
// and memory within sane bounds, and a table, CSV and chart per figure.
func TestTinyScale(t *testing.T) {
	t.Parallel()
	binary := jobfleetBinary(t)
	cfg := scale.DefaultConfig()
	cfg.Jobs, cfg.Members = []int{60, 120}, []int{2}
	cfg.Binary = binary
	cfg.Partitions = 64
	cfg.LeaseTTL = time.Second
	cfg.Fsync = false
	cfg.Quota = 256 << 20
	cfg.Probes = 8
	cfg.MinSpread = 2 * time.Second
	cfg.Jitter = 3 * time.Second
	cfg.StoreLimitDuration = 200 * time.Millisecond
	cfg.StoreWriters = []int{1, 2}
	cfg.Dir = t.TempDir()
	if testing.Verbose() {
		cfg.Progress = bench.NewProgress(os.Stderr)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	res, err := scale.Run(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Points) != 2 {
		t.Fatalf("%d points, want 2", len(res.Points))
	}
	for _, p := range pointsOf(res) {
		if len(p.Errors) > 0 {
			t.Errorf("N=%d: failed phases: %v", p.Jobs, p.Errors)
		}
	}
	if res.Failed() {
		t.Error("Failed: true")
	}
	for _, p := range pointsOf(res) {
		n := p.Jobs
		if p.Partitions != 64 || p.Members != 2 {
			t.Errorf("N=%d: P=%d on %d members, want 64 on 2", n, p.Partitions, p.Members)
		}
		if c := p.Create; c.Rate <= 0 || (c.Method != scale.MethodBatch && c.Method != scale.MethodSingle) || c.TakenIn < 0 {
			t.Errorf("N=%d: create %+v: want a rate, a method and a take-in time", n, c)
		}
		z := p.Size
		for name, b := range map[string]float64{"job": z.JobBytes, "run": z.RunBytes} {
			if b < 100 || b > 10_000 {
				t.Errorf("N=%d: %d bytes per %s, want a few hundred", n, int(b), name)
			}
		}
		// etcd's in-use size also moves with the fleet's compactions
		// (freed pages reused, or given back by a defragmentation), so
		// at this size its growth per job or run may be anything near
		// zero: only the logical sizes above are checked.
		if p.RSS.Min < 5<<20 || p.RSS.Max > 2<<30 || p.RSS.Min > p.RSS.Max {
			t.Errorf("N=%d: members' RSS %+v, want between 5 MiB and 2 GiB", n, p.RSS)
		}
		if h := p.HeapLive; h.Min < 1<<20 || h.Min > h.Max || h.Max > p.RSS.Max {
			t.Errorf("N=%d: members' live heap %+v, want between 1 MiB and the largest RSS %v", n, h, p.RSS.Max)
		}
		if p.List.Jobs != n || p.List.Rate <= 0 {
			t.Errorf("N=%d: listed %+v, want every job", n, p.List)
		}
		k := p.Takeover
		if k.Partitions < 1 || k.Owned <= 0 || k.Owned > time.Minute || k.Rejoin <= 0 {
			t.Errorf("N=%d: takeover %+v: want the victim's partitions owned again within a minute and a rejoin", n, k)
		}
		if k.Probes > 0 && (k.FiresAgain <= 0 || k.FiresAgain > time.Minute) {
			t.Errorf("N=%d: takeover %+v: want the victim's probes firing again within a minute", n, k)
		}
		r := p.Restart
		if len(r.Each) != 2 || r.Total < r.Max || r.Max <= 0 {
			t.Errorf("N=%d: restart %+v: want one time per member", n, r)
		}
		if r.Misfires != 0 {
			t.Errorf("N=%d: %d misfires in a rolling restart, want 0", n, r.Misfires)
		}
		if r.Fires < r.Expected/2 {
			t.Errorf("N=%d: probes fired %d times in a rolling restart, about %d due", n, r.Fires, r.Expected)
		}
		for name, w := range map[string]scale.Workload{"herd": p.Herd, "spread": p.SpreadLoad} {
			if w.Runs != n || w.Rate <= 0 || w.Durable > time.Minute || w.Counted <= 0 || w.Counted > time.Minute {
				t.Errorf("N=%d: %s %+v: want every job fired once, durable (watched and counted) within a minute", n, name, w)
			}
			if l := w.LagFired; l.Count != n || l.P50 > l.P99 || l.P99 > l.Max || l.Max > time.Minute {
				t.Errorf("N=%d: %s lag to fired_at %+v: want N ordered lags under a minute", n, name, l)
			}
			if l := w.LagVisible; l.P99 < w.LagFired.P50 {
				t.Errorf("N=%d: %s visible p99 %v before the fired p50 %v", n, name, l.P99, w.LagFired.P50)
			}
		}
		// The jitter spreads the hourly jobs over its window: every job
		// fired once, within [S, S+jitter) of its second plus the owner's
		// lag, and fewer in the busiest second than in the herd's (all
		// due in one second; with 60 jobs over 3 s, about 20 a second).
		if jw := p.Jittered; jw.Runs != n || jw.Period != cfg.Jitter || jw.LagFired.Max > cfg.Jitter+10*time.Second ||
			jw.LagFired.Max < cfg.Jitter/3 || jw.PeakPerSecond < 1 || jw.PeakPerSecond >= p.Herd.PeakPerSecond || p.Herd.PeakPerSecond < n/2 {
			t.Errorf("N=%d: jitter %+v, herd peak %d a second: want every job fired once, spread over the %v jitter, fewer a second than the herd",
				n, jw, p.Herd.PeakPerSecond, cfg.Jitter)
		}
		if p.StoreLimit <= 0 || len(p.StoreLevels) != 2 {
			t.Errorf("N=%d: store limit %v from %d levels, want a limit from 2", n, p.StoreLimit, len(p.StoreLevels))
		}
		if m, ok := scale.ModelOf(p, cfg.Quota); !ok || m.MemberCPU <= 0 || m.StoreCPU <= 0 {
			t.Errorf("N=%d: model %+v (%v): want the CPU per run of the members and of the store", n, m, ok)
		}
		if p.SpreadLoad.Period != cfg.MinSpread || p.Herd.Period != 0 {
			t.Errorf("N=%d: periods herd %v spread %v, want 0 and %v", n, p.Herd.Period, p.SpreadLoad.Period, cfg.MinSpread)
		}
	}
	if got := len(res.Slopes()); got < len(scale.Figures)-2 {
		t.Errorf("%d growth slopes, want about one per figure (%d)", got, len(scale.Figures))
	}

	dir := t.TempDir()
	if _, err := report.WriteAll(io.Discard, dir, "scale", res, res.Tables()); err != nil {
		t.Fatal(err)
	}
	charts, err := res.Charts(dir)
	if err != nil {
		t.Fatal(err)
	}
	// A chart per figure measured at both N: log axes take only positive
	// values, and the in-use growths may be zero or negative here.
	wantCharts := 0
	for _, f := range scale.Figures {
		if f.Get(res.Points[0]) > 0 && f.Get(res.Points[1]) > 0 {
			wantCharts++
		}
	}
	if len(charts) != wantCharts || wantCharts < len(scale.Figures)-2 {
		t.Errorf("%d charts, want one per figure measured at both N (%d of %d figures)", len(charts), wantCharts, len(scale.Figures))
	}
	for _, want := range []string{"scale.json", "scale_load.csv", "scale_failover.csv", "scale_fires.csv", "scale_growth.csv", "scale_figures.csv", "scale_model_check.csv", "scale_model.csv", "scale_herd_durable.png"} {
		if fi, err := os.Stat(filepath.Join(dir, want)); err != nil || fi.Size() == 0 {
			t.Errorf("%s not written: %v", want, err)
		}
	}
}

// TestTinyScaleReuse keeps a point's directory and starts a fleet on it
// again: the jobs are not created again, and the phases see them all, the
// herd's included; then once more on more members, spreading a slice of
// the jobs (--spread-jobs): only those fire.
func TestTinyScaleReuse(t *testing.T) {
	t.Parallel()
	binary := jobfleetBinary(t)
	cfg := scale.DefaultConfig()
	cfg.Jobs, cfg.Members, cfg.Phases = []int{50}, []int{2}, []string{scale.PhaseList}
	cfg.Binary = binary
	cfg.Partitions = 16
	cfg.LeaseTTL = time.Second
	cfg.Fsync = false
	cfg.Quota = 256 << 20
	cfg.Dir, cfg.KeepDir = t.TempDir(), true
	var progress bytes.Buffer
	cfg.Progress = bench.NewProgress(&progress)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	res, err := scale.Run(ctx, cfg)
	if err != nil || res.Failed() {
		t.Fatalf("first run: %v %+v", err, res)
	}
	kept, err := filepath.Glob(filepath.Join(cfg.Dir, "n50-m2-*"))
	if err != nil || len(kept) != 1 {
		t.Fatalf("kept directories %v (%v), want one", kept, err)
	}
	if !strings.Contains(progress.String(), "kept in "+kept[0]) {
		t.Errorf("progress %q does not say where the point was kept (%s)", progress.String(), kept[0])
	}
	cfg.Progress = nil
	cfg.Reuse = kept[0]
	cfg.Phases = []string{scale.PhaseList, scale.PhaseHerd}
	res, err = scale.Run(ctx, cfg)
	if err != nil || res.Failed() {
		t.Fatalf("run on the kept directory: %v %+v", err, res)
	}
	p := res.Points[0]
	if p.Create.Rate != 0 {
		t.Errorf("create %+v on a reused directory, want none", p.Create)
	}
	if p.List.Jobs != 50 || p.List.Rate <= 0 {
		t.Errorf("listed %+v on a reused directory, want the 50 jobs created before", p.List)
	}
	if p.Herd.Runs != 50 || p.Herd.Rate <= 0 {
		t.Errorf("herd %+v on a reused directory, want the 50 jobs fired", p.Herd)
	}
	if p.RSS.Min <= 0 || p.HeapLive.Min <= 0 || p.HeapLive.Max > p.RSS.Max {
		t.Errorf("members' RSS %+v and live heap %+v on a reused directory, want both measured", p.RSS, p.HeapLive)
	}

	cfg.Jobs, cfg.Phases = []int{100}, []string{scale.PhaseList}
	res, err = scale.Run(ctx, cfg)
	msg := fmt.Sprint(err)
	for _, p := range pointsOf(res) {
		msg += fmt.Sprint(p.Errors)
	}
	if !strings.Contains(msg, "holds 50 jobs, fewer than --jobs 100") {
		t.Errorf("--jobs 100 on a directory kept with 50: %s, want it refused", msg)
	}
	cfg.Jobs = []int{50}

	cfg.Members, cfg.Phases = []int{3}, []string{scale.PhaseSpread}
	cfg.SpreadJobs, cfg.MinSpread = 20, 2*time.Second
	res, err = scale.Run(ctx, cfg)
	if err != nil || res.Failed() {
		t.Fatalf("spread of 20 jobs on 3 members on the kept directory: %v %+v", err, res)
	}
	p = res.Points[0]
	if w := p.SpreadLoad; w.Jobs != 20 || w.Runs != 20 || w.LagFired.Count != 20 || w.Period != cfg.MinSpread || w.Counted <= 0 {
		t.Errorf("spread %+v, want the first 20 of the 50 jobs fired once over %v", w, cfg.MinSpread)
	}
	if p.Members != 3 {
		t.Errorf("%d members, want 3 on a directory kept with 2", p.Members)
	}
}

// TestSlopes checks the growth exponents on made-up points: a figure
// proportional to N has slope 1, a constant one slope 0, one that is not
// measured none.
func TestSlopes(t *testing.T) {
	res := &scale.Result{Config: scale.Config{Members: []int{3}}}
	for _, n := range []int{1_000, 100_000, 10_000} {
		res.Points = append(res.Points, &scale.Point{Jobs: n, Members: 3,
			Create: scale.Create{Rate: 2_000},
			Size:   scale.Size{JobBytes: 800},
			List:   scale.List{Rate: float64(n)},
		})
	}
	got := map[string]scale.Slope{}
	for _, s := range res.Slopes() {
		got[s.Figure] = s
	}
	want := map[string]float64{"create_rate": 0, "job_bytes": 0, "list_rate": 1}
	if len(got) != len(want) {
		t.Errorf("slopes %v, want exactly %v", got, want)
	}
	for f, slope := range want {
		s, ok := got[f]
		if !ok || math.Abs(s.Slope-slope) > 1e-9 || s.FromN != 1_000 || s.ToN != 100_000 {
			t.Errorf("%s: %+v, want slope %v from 1000 to 100000", f, s, slope)
		}
	}
	files, err := res.Charts(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if len(files) != 3 {
		t.Errorf("charts %v, want one per measured figure (3)", files)
	}
}

// TestModel checks the store-shard model's arithmetic: the store bound
// grows with K, the member bound with M, the smaller one holds, job
// capacity grows with K past the history budget, and the K=1 point of one
// shared machine adds the CPU of the store and of the members.
func TestModel(t *testing.T) {
	m := scale.Model{StoreLimit: 40_000, MemberCPU: 100e-6, StoreCPU: 50e-6, Cores: 2,
		JobBytes: 1_000, Quota: 8 << 30, HighWater: 0.8, HistoryBudget: 1 << 30,
		FireBytes: 1_000, CompactionInterval: 300}
	p := m.Predict(1, 3, 2, 1e6)
	if p.StoreBound != 40_000 || p.MemberBound != 60_000 || p.FiresPerSec != 40_000 || p.Bound != "store" {
		t.Errorf("K=1 M=3: %+v, want store-bound 40000 (members 60000)", p)
	}
	wantQuota := (0.8*float64(8<<30) - 1e6*1_000 - float64(1<<30)) / (2 * 300 * 1_000)
	if math.Abs(p.QuotaBound-wantQuota) > 1e-6 {
		t.Errorf("K=1 quota bound %.1f fires/s, want %.1f", p.QuotaBound, wantQuota)
	}
	p = m.Predict(4, 3, 2, 1e6)
	if p.StoreBound != 160_000 || p.FiresPerSec != 60_000 || p.Bound != "members" {
		t.Errorf("K=4 M=3: %+v, want member-bound 60000", p)
	}
	wantJobs := (4*0.8*float64(8<<30) - float64(1<<30)) / 1_000
	if math.Abs(p.Jobs-wantJobs) > 1 {
		t.Errorf("K=4 jobs %.0f, want %.0f", p.Jobs, wantJobs)
	}
	if got, bound := m.Here(); math.Abs(got-2/150e-6) > 1e-6 || bound != "cpu" {
		t.Errorf("here: %v %s, want %v cpu", got, bound, 2/150e-6)
	}
	m.StoreLimit = 10_000
	if got, bound := m.Here(); got != 10_000 || bound != "store" {
		t.Errorf("here with a slow store: %v %s, want 10000 store", got, bound)
	}
}

func TestConfigValidate(t *testing.T) {
	ok := scale.DefaultConfig()
	ok.Binary = "/bin/jobfleet"
	configtest.Rejects(t, ok, map[string]func(*scale.Config){
		"no binary":          func(c *scale.Config) { c.Binary = "" },
		"no jobs":            func(c *scale.Config) { c.Jobs = nil },
		"zero jobs":          func(c *scale.Config) { c.Jobs = []int{0} },
		"one member":         func(c *scale.Config) { c.Members = []int{1} },
		"unknown phase":      func(c *scale.Config) { c.Phases = []string{"herd", "stampede"} },
		"fractional TTL":     func(c *scale.Config) { c.LeaseTTL = 1500 * time.Millisecond },
		"no probes":          func(c *scale.Config) { c.Probes = 0 },
		"no spread rate":     func(c *scale.Config) { c.SpreadRate = 0 },
		"partitions beyond":  func(c *scale.Config) { c.Partitions = 1 << 20 },
		"zero batch":         func(c *scale.Config) { c.BatchSize = 0 },
		"port out of range":  func(c *scale.Config) { c.PortBase = 70_000 },
		"tiny spread period": func(c *scale.Config) { c.MinSpread = time.Millisecond },
		"no store writers":   func(c *scale.Config) { c.StoreWriters = nil },
		"reuse for two N": func(c *scale.Config) {
			c.Reuse, c.Jobs, c.Members, c.Phases = "/tmp/d", []int{10, 20}, []int{3}, []string{"list"}
		},
		"negative spread jobs": func(c *scale.Config) { c.SpreadJobs = -1 },
	})
	reuse := ok
	reuse.Reuse, reuse.Jobs, reuse.Members, reuse.SpreadJobs = "/tmp/d", []int{10}, []int{8}, 5
	if err := reuse.Validate(); err != nil {
		t.Errorf("reusing a directory for every phase, a slice spread: %v", err)
	}
}

// pointsOf returns res's points, none for a nil res.
func pointsOf(res *scale.Result) []*scale.Point {
	if res == nil {
		return nil
	}
	return res.Points
}
