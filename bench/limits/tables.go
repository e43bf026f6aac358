package limits

import (
	"fmt"

	"github.com/jobfleet/jobfleet/bench"
	"github.com/jobfleet/jobfleet/bench/report"
)

// Tables returns the run's table.
func (r *Result) Tables() []*report.Table {
	c := r.Config
	t := &report.Table{
		Name: "limits",
		Title: fmt.Sprintf("%d one-off jobs of %v due at once, per scenario, over %d worker processes × %d slots and %d orchestrator processes, embedded etcd (fsync %v)",
			c.Jobs, c.AttemptTime, c.Workers, c.Concurrency, c.Members, c.Fsync),
		Columns: []string{"scenario", "keys", "max_running", "slots", "attempts / s", "ideal / s", "ratio", "to no limit", "utilisation",
			"wait p50 ms", "wait p99 ms", "max at once", "succeeded", "executions", "repeated", "late", "makespan s"},
	}
	var none float64
	for _, s := range r.Scenarios {
		if s.Keys == 0 {
			none = s.PerSecond
		}
	}
	for _, s := range r.Scenarios {
		keys, maxRunning, toNone := "-", "-", "-"
		if s.Keys > 0 {
			keys, maxRunning = fmt.Sprint(s.Keys), fmt.Sprint(s.MaxRunning)
		}
		if none > 0 {
			toNone = fmt.Sprintf("%.2f", s.PerSecond/none)
		}
		t.Add(s.Name, keys, maxRunning, s.Slots, fmt.Sprintf("%.1f", s.PerSecond), fmt.Sprintf("%.1f", s.Ideal), fmt.Sprintf("%.2f", s.Ratio), toNone,
			fmt.Sprintf("%.2f", s.Utilisation), bench.Ms(s.Wait.P50), bench.Ms(s.Wait.P99), s.MaxConcurrent, s.Succeeded, s.Executions, s.Repeated, s.Late,
			fmt.Sprintf("%.2f", s.Makespan.Seconds()))
	}
	t.Notes = []string{
		"slots: what bounds the attempts running at once, the keys' max_running in all or the workers' slots, the smaller; ideal: slots / attempt time, no cost of scheduling",
		"attempts / s: jobs / makespan, the makespan from the instant the jobs were due (run_at, after every job was created) to the endpoint's last answer; ratio: attempts / s over ideal; to no limit: attempts / s over the no-limit scenario's, in this one run",
		"utilisation: the endpoint's busy time over slots × makespan (a slot is held from the grant until the worker's report is written, longer than the endpoint sees)",
		"wait: from the due instant to each job's first request at the endpoint; max at once: the most requests of one key open at the endpoint at one instant (without keys, of all jobs), never above max_running",
		"late: jobs created after their due instant (their wait counts from it)",
	}
	return []*report.Table{t}
}

// Charts draws none.
func (r *Result) Charts(string) ([]string, error) { return nil, nil }
