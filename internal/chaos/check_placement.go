package chaos

import (
	"fmt"
	"maps"
	"slices"
	"strconv"

	"github.com/jobfleet/jobfleet/dispatch/placement"
)

// checkPlacement checks that placement holds: every attempt the history
// records (and so every execution the recorder saw, each of which is of
// a recorded attempt: checkExecutions) went to a worker whose labels
// match its job's placement selector, and whose credential allows those
// labels. The selector is that of a spec version the owner may have
// decided with: one current at some revision from the run's creation to
// the version that first lists the attempt (an owner sees spec changes
// through a watch, a moment late). Each attempt is checked once, in the
// first version that lists it with its worker.
func (c *checker) checkPlacement() {
	g := &c.res.Global
	misplaced := func(k Kind, format string, args ...any) {
		g.AttemptsMisplaced++
		c.violate("attempts_misplaced", k, fmt.Sprintf(format, args...))
	}
	for _, key := range slices.Sorted(maps.Keys(c.in.History.Runs)) {
		h := c.in.History.Runs[key]
		if len(h.Creates) == 0 {
			continue
		}
		k := c.kindOf(h.At)
		from := h.Creates[0].Rev
		checked := map[int]string{} // attempt → its worker, as checked
		for _, v := range h.Versions {
			for _, a := range v.Run.Attempts {
				if w, ok := checked[a.Attempt]; ok && w == a.Worker {
					continue
				}
				checked[a.Attempt] = a.Worker
				g.AttemptsPlaced++
				life, known := c.in.Workers[a.Worker]
				if !known {
					misplaced(k, "run %s attempt %d went to %s, a worker the harness never started", h.Key, a.Attempt, a.Worker)
					continue
				}
				if c.in.Credentials == nil {
					// A run of a harness without worker credentials per
					// pool: nothing to check against.
				} else if sel, ok := c.in.Credentials[a.Credential]; !ok {
					misplaced(k, "run %s attempt %d went to %s under credential %s, which is no worker credential of the run", h.Key, a.Attempt, a.Worker, strconv.Quote(a.Credential))
				} else if !placement.Allows(sel, life.Labels) {
					misplaced(k, "run %s attempt %d went to %s, whose labels %s its credential %s (worker labels %s) does not allow",
						h.Key, a.Attempt, a.Worker, placement.FormatLabels(life.Labels), a.Credential, strconv.Quote(sel))
				}
				sels := c.selectors(h.JobID, from, v.Rev)
				if !slices.ContainsFunc(sels, func(s string) bool { return placement.Allows(s, life.Labels) }) {
					misplaced(k, "run %s attempt %d went to %s, whose labels %s match none of its job's selectors %q (revisions %d to %d)",
						h.Key, a.Attempt, a.Worker, placement.FormatLabels(life.Labels), sels, from, v.Rev)
				}
			}
		}
	}
}

// selectors returns the placement selectors of job id's spec versions
// current at some revision from `from` to `to`: the last one written at
// or before from, and those written after it up to to ("" for a version
// without one). None if the history has no spec of the job then.
func (c *checker) selectors(id string, from, to int64) []string {
	var out []string
	vs := c.in.History.Specs[id]
	for i, v := range vs {
		if v.Rev > to {
			break
		}
		if next := i + 1; v.Rev <= from && next < len(vs) && vs[next].Rev <= from {
			continue // superseded before the run was created
		}
		if !v.Deleted {
			j := v.Job
			out = append(out, j.Selector())
		}
	}
	return out
}
