package limits

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/jobfleet/jobfleet/bench/procfleet"
	"github.com/jobfleet/jobfleet/internal/testkit/binarytest"
	"github.com/jobfleet/jobfleet/internal/testkit/configtest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestConfigValidate(t *testing.T) {
	ok := DefaultConfig()
	ok.Binary, ok.Dir = "jobfleet", "/tmp"
	configtest.Rejects(t, ok, map[string]func(*Config){
		"no binary":           func(c *Config) { c.Binary = "" },
		"no members":          func(c *Config) { c.Members = 0 },
		"no workers":          func(c *Config) { c.Workers = 0 },
		"no slots":            func(c *Config) { c.Concurrency = 0 },
		"no jobs":             func(c *Config) { c.Jobs = 0 },
		"more keys than jobs": func(c *Config) { c.Jobs, c.Keys = 10, 11 },
		"max_running 0":       func(c *Config) { c.MaxRunning = 0 },
		"no attempt time":     func(c *Config) { c.AttemptTime = 0 },
	})
}

// summarize counts overlaps per key, an end and a start at one instant
// not overlapping, and waits from the due instant.
func TestSummarize(t *testing.T) {
	due := time.Unix(1000, 0)
	at := func(ms int) time.Time { return due.Add(time.Duration(ms) * time.Millisecond) }
	execs := []procfleet.Execution{
		{Job: "a-1", Start: at(10), End: at(110)},
		{Job: "a-2", Start: at(20), End: at(120)},
		{Job: "a-3", Start: at(110), End: at(210)}, // starts as a-1 ends
		{Job: "b-1", Start: at(30), End: at(130)},  // another key
		{Job: "a-2", Start: at(300), End: at(400)}, // a-2 again
	}
	fig := summarize(execs, due, func(job string) string { return job[:1] })
	if fig.maxConcurrent != 2 {
		t.Errorf("max concurrent %d, want 2", fig.maxConcurrent)
	}
	if fig.makespan != 400*time.Millisecond || fig.busy != 500*time.Millisecond || fig.repeated != 1 {
		t.Errorf("makespan %v, busy %v, repeated %d; want 400ms, 500ms, 1", fig.makespan, fig.busy, fig.repeated)
	}
	if fig.wait.Count != 4 || fig.wait.Max != 110*time.Millisecond {
		t.Errorf("wait %+v, want 4 first arrivals, the latest 110ms after due", fig.wait)
	}
}

// TestTinyLimits runs the benchmark at a small size: 2 orchestrator
// processes, 3 workers of 2 slots, keys of max_running 2, and checks the
// bound held at the endpoint and the figures are sane.
func TestTinyLimits(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the jobfleet binary and starts orchestrator and worker processes")
	}
	dir := t.TempDir()
	bin := filepath.Join(dir, "jobfleet")
	if err := binarytest.Build(bin); err != nil {
		t.Fatal(err)
	}
	cfg := DefaultConfig()
	cfg.Binary, cfg.Dir = bin, filepath.Join(dir, "run")
	cfg.Members, cfg.Workers, cfg.Concurrency = 2, 3, 2
	cfg.Jobs, cfg.Keys, cfg.MaxRunning = 30, 3, 2
	cfg.AttemptTime, cfg.Partitions, cfg.Fsync, cfg.Timeout = 50*time.Millisecond, 8, false, 2*time.Minute
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	res, err := Run(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Scenarios) != 3 {
		t.Fatalf("%d scenarios, want 3", len(res.Scenarios))
	}
	for k, s := range res.Scenarios {
		wantSlots := []int{2, 6, 6}[k]
		if s.Slots != wantSlots {
			t.Errorf("%s: %d slots, want %d", s.Name, s.Slots, wantSlots)
		}
		if s.Keys > 0 && (s.MaxConcurrent < 1 || s.MaxConcurrent > cfg.MaxRunning) {
			t.Errorf("%s: %d executions of one key at once, want 1 to %d", s.Name, s.MaxConcurrent, cfg.MaxRunning)
		}
		if s.Keys == 0 && s.MaxConcurrent > cfg.Slots() {
			t.Errorf("%s: %d executions at once, more than the %d slots", s.Name, s.MaxConcurrent, cfg.Slots())
		}
		if s.Succeeded != cfg.Jobs || s.Executions < cfg.Jobs {
			t.Errorf("%s: %d succeeded, %d executions; want %d and at least as many", s.Name, s.Succeeded, s.Executions, cfg.Jobs)
		}
		// Nothing runs faster than its slots allow, or before it is due.
		if s.Ratio <= 0 || s.Ratio > 1.05 || s.Utilisation <= 0 || s.Utilisation > 1.05 {
			t.Errorf("%s: ratio %.2f, utilisation %.2f; want in (0, 1]", s.Name, s.Ratio, s.Utilisation)
		}
		if s.Wait.Count != cfg.Jobs || s.Wait.P50 < 0 || s.Wait.P99 < s.Wait.P50 || s.Wait.Max > s.Makespan {
			t.Errorf("%s: wait %+v over a makespan of %v", s.Name, s.Wait, s.Makespan)
		}
	}
	tabs := res.Tables()
	if len(tabs) != 1 || len(tabs[0].Rows) != 3 || !strings.Contains(strings.Join(tabs[0].Rows[2], " "), "1.00") {
		t.Errorf("tables %+v, want one of 3 rows, the last 1.00 of itself", tabs)
	}
}
