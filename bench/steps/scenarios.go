package steps

import (
	"context"
	"fmt"
	"time"

	"github.com/jobfleet/jobfleet/api"
	"github.com/jobfleet/jobfleet/bench"
)

// stepID names step k of a benchmark job.
func stepID(prefix string, k int) string { return fmt.Sprintf("%s-%03d", prefix, k) }

// chains runs Runs chains of Chain steps, one after the other, each step
// needing the one before, all on worker-1 (pool=a), or with spread on the
// two workers in turn, and returns the gaps between consecutive steps.
func (f *fleet) chains(ctx context.Context, spread bool) (Scenario, error) {
	cfg := f.cfg
	s := Scenario{Name: "chain, same worker"}
	if spread {
		s.Name = "chain, workers in turn"
	}
	cfg.Progress.Step("%s: %d runs of %d steps of %v", s.Name, cfg.Runs, cfg.Chain, cfg.StepTime)
	var gaps []time.Duration
	start := time.Now()
	for n := range cfg.Runs {
		j := api.Job{ID: fmt.Sprintf("chain-%v-%d", map[bool]string{false: "same", true: "spread"}[spread], n)}
		for k := range cfg.Chain {
			st := api.Step{ID: stepID("s", k), Executor: api.Executor{Type: api.ExecutorHTTP, URL: f.URL},
				Placement: &api.PlacementPolicy{Selector: "pool=" + pools[0]}}
			if spread {
				st.Placement.Selector = "pool=" + pools[k%len(pools)]
			}
			if k > 0 {
				st.Needs = []string{stepID("s", k-1)}
			}
			j.Steps = append(j.Steps, st)
		}
		run, err := f.runJob(ctx, j)
		if err != nil {
			return s, err
		}
		for k := 1; k < cfg.Chain; k++ {
			a, ok1 := f.Receiver.Exec(run.ID, stepID("s", k-1))
			b, ok2 := f.Receiver.Exec(run.ID, stepID("s", k))
			if !ok1 || !ok2 {
				return s, fmt.Errorf("steps: run %s: steps %d and %d not both seen at the endpoint", run.ID, k-1, k)
			}
			gaps = append(gaps, b.Start.Sub(a.End))
			if workerOf(run, stepID("s", k-1)) == workerOf(run, stepID("s", k)) {
				s.SameWorker++
			}
		}
		s.Runs++
		cfg.Progress.Update("%s: %d/%d runs", s.Name, n+1, cfg.Runs)
	}
	s.Took = time.Since(start)
	s.Gaps = bench.Summarize(gaps)
	cfg.Progress.Step("%s: gap p50 %v, p99 %v", s.Name, s.Gaps.P50.Round(time.Microsecond*100), s.Gaps.P99.Round(time.Microsecond*100))
	return s, nil
}

// fanIn runs FanIn runs, one after the other, of a job of Upstream steps
// with no needs and a step "join" that needs them all, and returns the
// gaps from the last upstream step's end to join's start.
func (f *fleet) fanIn(ctx context.Context) (Scenario, error) {
	cfg := f.cfg
	s := Scenario{Name: fmt.Sprintf("fan-in of %d steps", cfg.Upstream)}
	cfg.Progress.Step("%s: %d runs", s.Name, cfg.FanIn)
	var gaps, spreads []time.Duration
	start := time.Now()
	for n := range cfg.FanIn {
		j := api.Job{ID: fmt.Sprintf("fanin-%d", n)}
		join := api.Step{ID: "join", Executor: api.Executor{Type: api.ExecutorHTTP, URL: f.URL}}
		for k := range cfg.Upstream {
			j.Steps = append(j.Steps, api.Step{ID: stepID("up", k), Executor: api.Executor{Type: api.ExecutorHTTP, URL: f.URL}})
			join.Needs = append(join.Needs, stepID("up", k))
		}
		j.Steps = append(j.Steps, join)
		run, err := f.runJob(ctx, j)
		if err != nil {
			return s, err
		}
		var first, last time.Time
		lastID := ""
		for _, id := range join.Needs {
			e, ok := f.Receiver.Exec(run.ID, id)
			if !ok {
				return s, fmt.Errorf("steps: run %s: step %s not seen at the endpoint", run.ID, id)
			}
			if first.IsZero() || e.Start.Before(first) {
				first = e.Start
			}
			if e.End.After(last) {
				last, lastID = e.End, id
			}
		}
		e, ok := f.Receiver.Exec(run.ID, "join")
		if !ok {
			return s, fmt.Errorf("steps: run %s: join not seen at the endpoint", run.ID)
		}
		gaps = append(gaps, e.Start.Sub(last))
		spreads = append(spreads, last.Sub(first))
		if workerOf(run, lastID) == workerOf(run, "join") {
			s.SameWorker++
		}
		s.Runs++
		cfg.Progress.Update("%s: %d/%d runs", s.Name, n+1, cfg.FanIn)
	}
	s.Took = time.Since(start)
	s.Gaps, s.Spread = bench.Summarize(gaps), bench.Summarize(spreads)
	cfg.Progress.Step("%s: gap p50 %v, p99 %v", s.Name, s.Gaps.P50.Round(time.Microsecond*100), s.Gaps.P99.Round(time.Microsecond*100))
	return s, nil
}

// handOvers triggers Upstream runs of a job at once and measures the
// hand-overs to a job with "after" on it: from each upstream run's end
// (its answer) to the start of the downstream run it caused, and from the
// last upstream end to the last downstream start.
func (f *fleet) handOvers(ctx context.Context) (Scenario, error) {
	cfg := f.cfg
	s := Scenario{Name: fmt.Sprintf("after: %d upstream runs", cfg.Upstream), SameWorker: -1}
	cfg.Progress.Step("%s: triggered at once, one downstream job", s.Name)
	hook := api.Executor{Type: api.ExecutorHTTP, URL: f.URL}
	// A far schedule: the upstream job runs on the triggers only.
	up := benchJob(api.Job{ID: "handover-up", Schedule: "0 0 1 1 *", Executor: hook})
	down := benchJob(api.Job{ID: "handover-down", Executor: hook, After: []api.Dependency{{Job: up.ID}}})
	if _, err := f.API.CreateJob(ctx, up); err != nil {
		return s, err
	}
	if _, err := f.API.CreateJob(ctx, down); err != nil {
		return s, err
	}
	start := time.Now()
	for range cfg.Upstream {
		if _, err := f.API.TriggerJob(ctx, up.ID); err != nil {
			return s, err
		}
	}
	var runs []api.Run
	done := func() bool {
		rs, err := f.API.ListRuns(ctx, down.ID, cfg.Upstream)
		if err != nil || len(rs) < cfg.Upstream {
			return false
		}
		for _, r := range rs {
			if !r.Status.Final() {
				return false
			}
		}
		runs = rs
		return true
	}
	if err := f.WaitFor(ctx, fmt.Sprintf("%d final downstream runs", cfg.Upstream), cfg.Timeout, done); err != nil {
		return s, err
	}
	var gaps []time.Duration
	var first, lastUp, lastDown time.Time
	for _, r := range runs {
		if r.CausedBy == nil {
			return s, fmt.Errorf("steps: downstream run %s names no upstream run", r.ID)
		}
		u, ok1 := f.Receiver.Exec(r.CausedBy.Run, "")
		d, ok2 := f.Receiver.Exec(r.ID, "")
		if !ok1 || !ok2 {
			return s, fmt.Errorf("steps: run %s or %s not seen at the endpoint", r.CausedBy.Run, r.ID)
		}
		gaps = append(gaps, d.Start.Sub(u.End))
		if first.IsZero() || u.Start.Before(first) {
			first = u.Start
		}
		if u.End.After(lastUp) {
			lastUp = u.End
		}
		if d.Start.After(lastDown) {
			lastDown = d.Start
		}
		s.Runs++
	}
	s.Took = time.Since(start)
	s.Gaps = bench.Summarize(gaps)
	s.Spread = bench.Summarize([]time.Duration{lastUp.Sub(first)})
	s.Tail = lastDown.Sub(lastUp)
	cfg.Progress.Step("%s: hand-over p50 %v, p99 %v; last upstream end to last downstream start %v", s.Name,
		s.Gaps.P50.Round(time.Microsecond*100), s.Gaps.P99.Round(time.Microsecond*100), s.Tail.Round(time.Microsecond*100))
	return s, nil
}
