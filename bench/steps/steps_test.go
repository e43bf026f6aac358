package steps

import (
	"strings"
	"testing"
	"time"

	"github.com/jobfleet/jobfleet/bench"
	"github.com/jobfleet/jobfleet/internal/testkit/configtest"
)

func TestConfigValidate(t *testing.T) {
	ok := DefaultConfig()
	ok.Binary, ok.Dir = "jobfleet", "/tmp"
	configtest.Rejects(t, ok, map[string]func(*Config){
		"no binary":      func(c *Config) { c.Binary = "" },
		"chain of one":   func(c *Config) { c.Chain = 1 },
		"chain too long": func(c *Config) { c.Chain = 257 },
		"no runs":        func(c *Config) { c.Runs = 0 },
		"upstream 256":   func(c *Config) { c.Upstream = 256 },
		"no step time":   func(c *Config) { c.StepTime = 0 },
	})
}

// The table shows "-" where a scenario has no figure.
func TestTables(t *testing.T) {
	r := &Result{Config: DefaultConfig(), Scenarios: []Scenario{
		{Name: "chain, same worker", Runs: 1, Gaps: bench.Summary{Count: 9, P50: 10 * time.Millisecond, P99: 20 * time.Millisecond}, SameWorker: 9},
		{Name: "after: 100 upstream runs", Runs: 100, SameWorker: -1, Tail: 18 * time.Millisecond, Spread: bench.Summary{Count: 1, P50: time.Second}},
	}}
	tabs := r.Tables()
	if len(tabs) != 1 || len(tabs[0].Rows) != 2 {
		t.Fatalf("tables %+v, want one of 2 rows", tabs)
	}
	row := strings.Join(tabs[0].Rows[1], " ")
	if !strings.Contains(row, " - 1000 18 ") {
		t.Fatalf("hand-over row %q, want no same-worker count, the spread and the tail", row)
	}
}
