package chaos

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/jobfleet/jobfleet/api"
	"github.com/jobfleet/jobfleet/store"
)

// LimitSpec is the checker's view of the fault suite's limit keys: each
// key's limit, and the keys each job names.
type LimitSpec struct {
	Limits    map[string]api.Limit `json:"limits"`     // by key
	JobLimits map[string][]string  `json:"job_limits"` // by job ID
}

// LimitStart is one attempt's start under limit keys, as its run
// document records it (the granting member's clock, which also stamps
// the key's rate window).
type LimitStart struct {
	Run     string    `json:"run"`
	Item    int       `json:"item"` // noItem: the run's own chain
	Attempt int       `json:"attempt"`
	At      time.Time `json:"at"`
}

// Limits are the checker's figures of limit keys (invariants 1 to 3 of
// docs/ownership.md, "Limit keys").
type Limits struct {
	Keys       int            `json:"keys"`
	Executions int            `json:"executions"`  // executions of jobs naming a key
	MaxOverlap map[string]int `json:"max_overlap"` // the most executions of a key at one instant
	// RateStarts counts the starts of rate keys' jobs checked.
	RateStarts int `json:"rate_starts"`
	// RateExceededSkewed counts starts over a rate key's count within a
	// window of its per that overlaps a clock offset of a member (the
	// window is measured by the granting members' clocks: not
	// guaranteed then).
	RateExceededSkewed int `json:"rate_exceeded_skewed"`
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
	// Found describes each must-be-zero count's cases (the checker lists
	// them as violations).
	Found []LimitViolation `json:"-"`
}

// LimitViolation is one case of a must-be-zero count of Limits.
type LimitViolation struct {
	Check string    // over_running, rate_exceeded or slots_leaked
	Key   string    // the limit key
	At    time.Time // the start that broke the rule (zero for a leak)
	// Detail names the executions, starts or holders involved.
	Detail string
}

// CheckLimits checks the executions recorded (execs), the attempts'
// start times the run documents record (starts, by job ID) and the
// slots held when the run had quiesced (heldAtEnd, by key) against spec.
// A rate key's starts over its count within a window of its per are
// counted apart (RateExceededSkewed, not a violation) if the window
// overlaps one of skewed, widened by its Skew and the key's per: a
// member's clock was off then. It is a pure function of what it is given.
func CheckLimits(spec LimitSpec, execs []Execution, starts map[string][]LimitStart, heldAtEnd map[string][]api.LimitHolder, skewed []Window) Limits {
	out := Limits{Keys: len(spec.Limits), MaxOverlap: map[string]int{}}
	type ev struct {
		at    time.Time
		delta int
		exec  int // index into execs
	}
	byKey := map[string][]ev{}
	for i, e := range execs {
		keys := spec.JobLimits[e.Job]
		if len(keys) == 0 {
			continue
		}
		out.Executions++
		end := e.End
		if end.IsZero() || end.Before(e.Start) {
			end = e.Start.Add(100 * 365 * 24 * time.Hour) // still open at the end of the history: running from its start on
		}
		if end.Equal(e.Start) {
			continue // over as it began: overlaps nothing (an end comes before a start at one instant)
		}
		for _, k := range keys {
			byKey[k] = append(byKey[k], ev{e.Start, 1, i}, ev{end, -1, i})
		}
	}
	for _, k := range slices.Sorted(maps.Keys(byKey)) {
		evs := byKey[k]
		slices.SortStableFunc(evs, func(a, b ev) int {
			if c := a.at.Compare(b.at); c != 0 {
				return c
			}
			return a.delta - b.delta // an end before a start at the same instant
		})
		l, ok := spec.Limits[k]
		open := map[int]bool{}
		most := 0
		for _, e := range evs {
			if e.delta < 0 {
				delete(open, e.exec)
				continue
			}
			open[e.exec] = true
			most = max(most, len(open))
			if ok && l.MaxRunning != nil && len(open) > *l.MaxRunning {
				out.OverRunning++
				var names []string
				for n, i := range slices.Sorted(maps.Keys(open)) {
					if n == 10 {
						names = append(names, fmt.Sprintf("and %d more", len(open)-n))
						break
					}
					names = append(names, execName(execs[i]))
				}
				out.Found = append(out.Found, LimitViolation{Check: "over_running", Key: k, At: e.at,
					Detail: fmt.Sprintf("key %q (max_running %d): %d executions at %s: %s", k, *l.MaxRunning, len(open), ts(e.at), strings.Join(names, "; "))})
			}
		}
		out.MaxOverlap[k] = most
	}
	for _, k := range slices.Sorted(maps.Keys(spec.Limits)) {
		r := spec.Limits[k].Rate
		if r == nil {
			continue
		}
		type start struct {
			job string
			LimitStart
		}
		var ss []start
		for _, job := range slices.Sorted(maps.Keys(spec.JobLimits)) {
			if slices.Contains(spec.JobLimits[job], k) {
				for _, s := range starts[job] {
					ss = append(ss, start{job, s})
				}
			}
		}
		slices.SortStableFunc(ss, func(a, b start) int { return a.At.Compare(b.At) })
		out.RateStarts += len(ss)
		per := r.Per.Std()
		for i := r.Count; i < len(ss); i++ {
			from, to := ss[i-r.Count].At, ss[i].At
			if to.Sub(from) >= per {
				continue
			}
			if skewedWithin(skewed, from, to, per) {
				out.RateExceededSkewed++
				continue
			}
			out.RateExceeded++
			var names []string
			for _, s := range ss[i-r.Count : i+1] {
				names = append(names, fmt.Sprintf("%s attempt %d at %s", chainName(s.Run, s.Item), s.Attempt, ts(s.At)))
			}
			out.Found = append(out.Found, LimitViolation{Check: "rate_exceeded", Key: k, At: to,
				Detail: fmt.Sprintf("key %q (rate %d per %v): %d starts within %v: %s", k, r.Count, per, r.Count+1, to.Sub(from).Round(time.Millisecond), strings.Join(names, "; "))})
		}
	}
	for _, k := range slices.Sorted(maps.Keys(heldAtEnd)) {
		for _, h := range heldAtEnd[k] {
			out.SlotsLeaked++
			out.Found = append(out.Found, LimitViolation{Check: "slots_leaked", Key: k,
				Detail: fmt.Sprintf("key %q: slot still held at the end by %s attempt %d (job %q, worker %s, partition %d, since %s)", k, chainName(h.RunID, h.Item), h.Attempt, h.JobID, h.Worker, h.Partition, ts(h.Since))})
		}
	}
	return out
}

// skewedWithin reports whether the span [from, to] of a rate window of
// per overlaps one of windows, each widened on both sides by its skew
// (the starts of its member are stamped by its clock), per (a start
// stamped by a skewed clock counts in the windows of later grants) and
// skewSettle.
func skewedWithin(windows []Window, from, to time.Time, per time.Duration) bool {
	for _, w := range windows {
		widen := max(w.Skew, -w.Skew) + per + skewSettle
		if !to.Before(w.Start.Add(-widen)) && !from.After(w.End.Add(widen)) {
			return true
		}
	}
	return false
}

// execName names an execution in violations.
func execName(e Execution) string {
	item := noItem
	if e.Item != nil {
		item = *e.Item
	}
	end := "still open"
	if !e.End.IsZero() {
		end = ts(e.End)
	}
	return fmt.Sprintf("%s attempt %d [%s, %s]", chainName(e.Run, item), e.Attempt, ts(e.Start), end)
}

// checkLimits checks the limit keys of the workload (CheckLimits): the
// recorder's executions of the jobs naming them, the starts their run
// documents record, and the slots held at the end. The clock offsets
// injected into members excuse rate windows they overlap.
func (c *checker) checkLimits() {
	spec := c.in.Limits
	if spec == nil {
		return
	}
	starts := map[string][]LimitStart{}
	for _, key := range slices.Sorted(maps.Keys(c.in.History.Runs)) {
		h := c.in.History.Runs[key]
		if len(spec.JobLimits[h.JobID]) == 0 || len(h.Creates) == 0 {
			continue
		}
		runID := store.RunID(h.JobID, h.At)
		type attemptKey struct{ item, attempt int }
		seen := map[attemptKey]bool{}
		for _, v := range h.Versions {
			for n, as := range runChains(v.Run) {
				for _, a := range as {
					k := attemptKey{n - 1, a.Attempt}
					if seen[k] {
						continue
					}
					seen[k] = true
					starts[h.JobID] = append(starts[h.JobID], LimitStart{Run: runID, Item: n - 1, Attempt: a.Attempt, At: a.StartedAt})
				}
			}
		}
	}
	var skewed []Window
	for _, f := range c.in.Faults {
		if f.ClockOffset == 0 {
			continue
		}
		end := f.Healed
		if end.IsZero() {
			end = f.Start.Add(recoveryTimeout)
		}
		skewed = append(skewed, Window{Start: f.Start, End: end, Skew: f.ClockOffset})
	}
	l := CheckLimits(*spec, c.in.Executions, starts, c.in.LimitsHeld, skewed)
	for _, v := range l.Found {
		k := Kind("")
		if !v.At.IsZero() {
			k = c.kindOf(v.At)
		}
		c.violate("limit_"+v.Check, k, v.Detail)
	}
	l.Found = nil
	c.res.Global.Limits = &l
}
