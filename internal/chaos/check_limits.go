package chaos

import (
	"maps"
	"slices"
	"time"

	"github.com/jobfleet/jobfleet/api"
)

// LimitSpec is the checker's view of the fault suite's limit keys: each
// key's limit, and the keys each job names.
type LimitSpec struct {
	Limits    map[string]api.Limit `json:"limits"`     // by key
	JobLimits map[string][]string  `json:"job_limits"` // by job ID
}

// Limits are the checker's figures of limit keys (invariants 1 to 3 of
// docs/ownership.md, "Limit keys").
type Limits struct {
	Keys       int            `json:"keys"`
	Executions int            `json:"executions"`  // executions of jobs naming a key
	MaxOverlap map[string]int `json:"max_overlap"` // the most executions of a key at one instant
	// The must-be-zero counts.
	// OverRunning: instants (execution starts) at which more executions
	// of a key ran, counted on the workers' side from the recorder's
	// intervals, than its max_running.
	OverRunning int `json:"over_running"`
	// RateExceeded: starts (as the grants record them) that made more
	// than a rate key's count within one window of its per.
	RateExceeded int `json:"rate_exceeded"`
	// SlotsLeaked: slots still held once the workload was quiet for
	// longer than a run lease and a worker registration TTL.
	SlotsLeaked int `json:"slots_leaked"`
}

// CheckLimits checks the executions recorded (execs), the attempts'
// start times the run documents record (starts, by job ID) and the slots
// held when the run had quiesced (heldAtEnd, by key) against spec. It is
// a pure function of what it is given.
func CheckLimits(spec LimitSpec, execs []Execution, starts map[string][]time.Time, heldAtEnd map[string]int) Limits {
	out := Limits{Keys: len(spec.Limits), MaxOverlap: map[string]int{}}
	type ev struct {
		at    time.Time
		delta int
	}
	byKey := map[string][]ev{}
	for _, e := range execs {
		keys := spec.JobLimits[e.Job]
		if len(keys) == 0 {
			continue
		}
		out.Executions++
		end := e.End
		if end.IsZero() || end.Before(e.Start) {
			end = e.Start.Add(100 * 365 * 24 * time.Hour) // still open at the end of the history: running from its start on
		}
		for _, k := range keys {
			byKey[k] = append(byKey[k], ev{e.Start, 1}, ev{end, -1})
		}
	}
	for _, k := range slices.Sorted(maps.Keys(byKey)) {
		evs := byKey[k]
		slices.SortFunc(evs, func(a, b ev) int {
			if c := a.at.Compare(b.at); c != 0 {
				return c
			}
			return a.delta - b.delta // an end before a start at the same instant
		})
		l, ok := spec.Limits[k]
		cur, most := 0, 0
		for _, e := range evs {
			cur += e.delta
			most = max(most, cur)
			if e.delta > 0 && ok && l.MaxRunning != nil && cur > *l.MaxRunning {
				out.OverRunning++
			}
		}
		out.MaxOverlap[k] = most
	}
	for _, k := range slices.Sorted(maps.Keys(spec.Limits)) {
		r := spec.Limits[k].Rate
		if r == nil {
			continue
		}
		var ts []time.Time
		for job, keys := range spec.JobLimits {
			if slices.Contains(keys, k) {
				ts = append(ts, starts[job]...)
			}
		}
		slices.SortFunc(ts, time.Time.Compare)
		for i := r.Count; i < len(ts); i++ {
			if ts[i].Sub(ts[i-r.Count]) < r.Per.Std() {
				out.RateExceeded++
			}
		}
	}
	for _, n := range heldAtEnd {
		out.SlotsLeaked += n
	}
	return out
}
