package scaling

import (
	"fmt"
	"slices"

	"github.com/jobfleet/jobfleet/bench"
	"github.com/jobfleet/jobfleet/bench/report"
)

// Tables returns the run's tables: summary, drain, steady, store limit.
func (r *Result) Tables() []*report.Table {
	cfg := r.Config
	where := fmt.Sprintf("P=%d, delay %v per store call, fsync %v, batch %d", cfg.Partitions, cfg.Delay, onOff(cfg.Fsync), cfg.FireBatch)

	sum := &report.Table{
		Name:    "scaling_summary",
		Title:   "Headline: drain throughput, sharded vs global-lock, and vs the store limit (" + where + ")",
		Columns: []string{"orchestrators", "sharded fires/s", "global-lock fires/s", "sharded/global-lock", "sharded % of store limit", "global-lock % of store limit"},
	}
	_, unbatched := r.find(ShardedUnbatched, Drain)
	if unbatched {
		sum.Columns = append(sum.Columns, "sharded-unbatched fires/s", "sharded/unbatched")
	}
	for _, n := range cfg.Members {
		sh, ok1 := r.Find(Sharded, n, Drain)
		gl, ok2 := r.Find(GlobalLock, n, Drain)
		if !ok1 && !ok2 {
			continue
		}
		ratio := "-"
		if v, ok := r.Ratios[n]; ok {
			ratio = fmt.Sprintf("%.1f×", v)
		}
		row := []any{n, opt(ok1, sh.FiresPerSec), opt(ok2, gl.FiresPerSec), ratio, pct(ok1, sh.FiresPerSec, r.Limit), pct(ok2, gl.FiresPerSec, r.Limit)}
		if unbatched {
			ub, ok3 := r.Find(ShardedUnbatched, n, Drain)
			ubRatio := "-"
			if ok1 && ok3 && ub.FiresPerSec > 0 {
				ubRatio = fmt.Sprintf("%.1f×", sh.FiresPerSec/ub.FiresPerSec)
			}
			row = append(row, opt(ok3, ub.FiresPerSec), ubRatio)
		}
		sum.Add(row...)
	}
	sum.Notes = []string{fmt.Sprintf("store limit: %.0f runs/s (fenced transactions of %d runs, best of %v writers × %v partitions per request, before and after the trials)", r.Limit, cfg.FireBatch, cfg.StoreLimitConcurrency, cfg.StoreLimitShares)}

	drain := &report.Table{
		Name:    "scaling_drain",
		Title:   fmt.Sprintf("Backlog drain: %d one-off jobs due at one instant (%s)", cfg.DrainJobs, where),
		Columns: []string{"strategy", "orchestrators", "runs", "misses", "duplicates", "errors", "drain s", "fires/s", "% of store limit"},
	}
	steady := &report.Table{
		Name:    "scaling_steady",
		Title:   fmt.Sprintf("Steady: %d jobs @every 1s for %v (%s)", cfg.SteadyJobs, cfg.SteadyWindow, where),
		Columns: []string{"strategy", "orchestrators", "expected", "runs", "misses", "duplicates", "errors", "lag p50 ms", "lag p99 ms", "lag max ms", "durable p50 ms", "durable p99 ms"},
	}
	for _, t := range r.sortedTrials() {
		switch t.Workload {
		case Drain:
			drain.Add(t.Strategy, t.Members, t.Runs, t.Misses, t.Duplicates, t.Errors, t.Elapsed.Seconds(), t.FiresPerSec, pct(true, t.FiresPerSec, r.Limit))
		case Steady:
			steady.Add(t.Strategy, t.Members, t.Expected, t.Runs, t.Misses, t.Duplicates, t.Errors,
				bench.Ms(t.Lag.P50), bench.Ms(t.Lag.P99), bench.Ms(t.Lag.Max), bench.Ms(t.Durable.P50), bench.Ms(t.Durable.P99))
		}
	}
	drain.Notes = []string{"duplicates: fires decided for a run another orchestrator had created (refused by the run key's create-if-absent check; without it they would run twice)"}
	steady.Notes = []string{"lag: fired_at − scheduled_at from the run documents; durable: scheduled_at until an observer's watch saw the run created"}

	limit := &report.Table{
		Name:    "store_limit",
		Title:   fmt.Sprintf("Store limit: fenced transactions of %d runs, one partition per request (shard.Ownership.Commit) or several (shard.CommitBatch), same etcd, same delay", cfg.FireBatch),
		Columns: []string{"measured", "writers", "partitions per request", "requests", "runs", "runs/s", "request p50 ms", "request p99 ms"},
	}
	for _, l := range r.StoreLimit {
		limit.Add(l.When, l.Writers, max(l.Shares, 1), l.Txns, l.Runs, l.RunsPerSec, l.TxnP50Ms, l.TxnP99Ms)
	}
	limit.Notes = []string{"measured before and after the trials; the limit is the best level of either"}
	var tables []*report.Table
	if len(sum.Rows) > 0 {
		tables = append(tables, sum)
	}
	if len(drain.Rows) > 0 {
		tables = append(tables, drain)
	}
	if len(steady.Rows) > 0 {
		tables = append(tables, steady)
	}
	return append(tables, limit)
}

// find tells whether any trial of strategy s ran workload w.
func (r *Result) find(s, w string) (Trial, bool) {
	for _, t := range r.Trials {
		if t.Strategy == s && t.Workload == w {
			return t, true
		}
	}
	return Trial{}, false
}

func (r *Result) sortedTrials() []Trial {
	order := map[string]int{GlobalLock: 0, NoCoordination: 1, ShardedUnbatched: 2, Sharded: 3}
	ts := slices.Clone(r.Trials)
	slices.SortStableFunc(ts, func(a, b Trial) int {
		if a.Workload != b.Workload {
			return cmpStr(a.Workload, b.Workload)
		}
		if order[a.Strategy] != order[b.Strategy] {
			return order[a.Strategy] - order[b.Strategy]
		}
		return a.Members - b.Members
	})
	return ts
}

func cmpStr(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

func opt(ok bool, v float64) any {
	if !ok {
		return "-"
	}
	return v
}

func pct(ok bool, v, limit float64) string {
	if !ok || limit <= 0 {
		return "-"
	}
	return fmt.Sprintf("%.0f%%", 100*v/limit)
}

func onOff(b bool) string {
	if b {
		return "on"
	}
	return "off"
}

// Charts draws the drain throughput and the steady p99 lag per strategy
// against the orchestrator count into dir, and returns the files.
func (r *Result) Charts(dir, prefix string) ([]string, error) {
	var files []string
	drain := report.Chart{
		Title:  fmt.Sprintf("Backlog drain, %d jobs (delay %v)", r.Config.DrainJobs, r.Config.Delay),
		XLabel: "orchestrators", YLabel: "fires/s",
		HLines: []report.Series{{Name: "store limit", Y: []float64{r.Limit}}},
	}
	lag := report.Chart{
		Title:  fmt.Sprintf("Steady, %d jobs @every 1s: p99 schedule lag (delay %v)", r.Config.SteadyJobs, r.Config.Delay),
		XLabel: "orchestrators", YLabel: "p99 lag (ms, log)", LogY: true,
	}
	for _, s := range r.Config.Strategies {
		var d, l report.Series
		d.Name, l.Name = s, s
		for _, n := range r.Config.Members {
			if t, ok := r.Find(s, n, Drain); ok {
				d.X, d.Y = append(d.X, float64(n)), append(d.Y, t.FiresPerSec)
			}
			if t, ok := r.Find(s, n, Steady); ok {
				l.X, l.Y = append(l.X, float64(n)), append(l.Y, max(bench.Ms(t.Lag.P99), 0.1))
			}
		}
		if len(d.X) > 0 {
			drain.Series = append(drain.Series, d)
		}
		if len(l.X) > 0 {
			lag.Series = append(lag.Series, l)
		}
	}
	if len(drain.Series) > 0 {
		p, err := drain.WritePNG(dir, prefix+"drain.png")
		if err != nil {
			return files, err
		}
		files = append(files, p)
	}
	if len(lag.Series) > 0 {
		p, err := lag.WritePNG(dir, prefix+"lag.png")
		if err != nil {
			return files, err
		}
		files = append(files, p)
	}
	return files, nil
}
