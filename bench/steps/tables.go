package steps

import (
	"fmt"

	"github.com/jobfleet/jobfleet/bench"
	"github.com/jobfleet/jobfleet/bench/report"
)

// Tables returns the run's table.
func (r *Result) Tables() []*report.Table {
	c := r.Config
	t := &report.Table{
		Name: "steps",
		Title: fmt.Sprintf("Runs of steps of %v over 2 worker processes × %d slots (pool=a, pool=b), one orchestrator process, embedded etcd (fsync %v)",
			c.StepTime, c.Concurrency, c.Fsync),
		Columns: []string{"scenario", "runs", "gaps", "gap p50 ms", "gap p99 ms", "gap max ms", "same worker", "upstream spread p50 ms", "last up to last down ms", "took s"},
	}
	for _, s := range r.Scenarios {
		spread := "-"
		if s.Spread.Count > 0 {
			spread = fmt.Sprint(bench.Ms(s.Spread.P50))
		}
		same := fmt.Sprint(s.SameWorker)
		if s.SameWorker < 0 {
			same = "-"
		}
		tail := "-"
		if s.Tail > 0 {
			tail = fmt.Sprint(bench.Ms(s.Tail))
		}
		t.Add(s.Name, s.Runs, s.Gaps.Count, bench.Ms(s.Gaps.P50), bench.Ms(s.Gaps.P99), bench.Ms(s.Gaps.Max), same, spread, tail, fmt.Sprintf("%.1f", s.Took.Seconds()))
	}
	t.Notes = []string{
		"gap: at the endpoint, from the answer to one step's request to the arrival of the next step's request (in a fan-in, from the last upstream step's answer to the joining step's request): the worker's report, the owner's write of the step's end, the next step's grant and its delivery to a polling worker",
		"chain, same worker: every step placed on pool=a (one worker process); workers in turn: the steps placed on pool=a and pool=b alternately, so each gap crosses processes; same worker counts the gaps whose two steps ran on one worker",
		"fan-in: a job of N steps without needs and one step needing all N, in one run (a job's `after` names at most 32 jobs and fires once per upstream run, so a join of N is a step with N needs); upstream spread: from the first upstream step's start to the last one's end",
		"after: N runs of a job triggered at once, each handing over to a job with `after` on it (a durable hand-over written with the upstream run's end); gap: from an upstream run's answer to the start of the downstream run it caused; last up to last down: from the last upstream run's end to the last downstream run's start",
		"the runs are one after the other; every step's attempts are owned by the run's partition's owner, the one orchestrator here",
	}
	return []*report.Table{t}
}

// Charts draws none.
func (r *Result) Charts(string) ([]string, error) { return nil, nil }
