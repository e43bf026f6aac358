package items

import (
	"fmt"

	"github.com/jobfleet/jobfleet/bench"
	"github.com/jobfleet/jobfleet/bench/report"
)

// Tables returns the run's table.
func (r *Result) Tables() []*report.Table {
	c := r.Config
	if len(r.Grants) > 0 {
		return r.grantTables()
	}
	t := &report.Table{
		Name: "items",
		Title: fmt.Sprintf("A sharded run of %d items of %v over %d worker processes × %d slots, one orchestrator process, embedded etcd (fsync %v)",
			c.Items, c.ItemTime, c.Workers, c.Concurrency, c.Fsync),
		Columns: []string{"scenario", "ideal s", "took s", "took / ideal", "first start ms", "status", "succeeded", "executions", "repeated", "retried", "killed at s", "lost", "redone after s", "run document bytes"},
	}
	for _, s := range r.Scenarios {
		killed, redone := "-", "-"
		if s.KilledAt > 0 {
			killed, redone = fmt.Sprintf("%.2f", s.KilledAt.Seconds()), fmt.Sprintf("%.2f", s.Redone.Seconds())
		}
		t.Add(s.Name, fmt.Sprintf("%.2f", s.Ideal.Seconds()), fmt.Sprintf("%.2f", s.Took.Seconds()), fmt.Sprintf("%.2f", s.Ratio),
			bench.Ms(s.FirstStart), s.Status, s.Succeeded, s.Executions, s.Repeated, s.Retried, killed, s.Lost, redone, s.MaxRunBytes)
	}
	t.Notes = []string{
		"ideal: items × item time / slots, no cost of scheduling; after the kill, the first half at every worker's slots, then the rest and the killed worker's attempts in flight at the others'",
		"took: from the job's creation (its one run fires at once) until the run is read final (read every 50 ms)",
		"lost: the killed worker's attempts in flight (their requests aborted); redone after: from the kill until the last of them started again on another worker, which waits for the killed worker's registration to expire (--worker-ttl)",
		"repeated: items the endpoint answered more than once; retried: items with more than one attempt",
	}
	return []*report.Table{t}
}

func (r *Result) grantTables() []*report.Table {
	c := r.Config
	t := &report.Table{
		Name: "grants",
		Title: fmt.Sprintf("The grant rate: %d items of %v in %d sharded jobs over %d worker processes × %d slots in %d pools, one orchestrator process, embedded etcd (fsync %v)",
			c.Items, c.ItemTime, c.Pools, c.Workers, c.Concurrency, c.Pools, c.Fsync),
		Columns: []string{"scenario", "took s", "items / s", "ratio to not placed", "succeeded", "misplaced", "workers used"},
	}
	var unplaced float64
	for _, s := range r.Grants {
		if !s.Placed {
			unplaced = s.PerSecond
		}
	}
	for _, s := range r.Grants {
		ratio := "-"
		if unplaced > 0 {
			ratio = fmt.Sprintf("%.2f", s.PerSecond/unplaced)
		}
		t.Add(s.Name, fmt.Sprintf("%.2f", s.Took.Seconds()), fmt.Sprintf("%.0f", s.PerSecond), ratio, s.Succeeded, s.Misplaced, s.Workers)
	}
	t.Notes = []string{
		"took: from the first job's creation (each run fires at once) until every run is read final (read every 50 ms)",
		"items / s: attempts handed out, executed and recorded a second; ratio: placed over not placed, in this one run",
		"misplaced: items whose succeeding attempt ran on a worker outside its job's pool (the selector forbids it: must be 0)",
	}
	return []*report.Table{t}
}

// Charts draws none.
func (r *Result) Charts(string) ([]string, error) { return nil, nil }
