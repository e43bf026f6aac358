package chaos

import (
	"fmt"
	"maps"
	"slices"
	"strconv"

	"github.com/jobfleet/jobfleet/api"

	"github.com/jobfleet/jobfleet/dispatch/placement"
)

// checkPlacement checks that placement holds: every attempt the history
// records, of a run's own chain or of an item's (and so every execution
// the recorder saw, each of which is of a recorded attempt:
// checkExecutions), went to a worker whose labels match its job's
// placement selector, and whose credential allows those labels. The selector is that of a spec version the owner may have
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
		type attemptKey struct{ item, attempt int } // item -1: the run's own chain
		checked := map[attemptKey]string{}          // attempt → its worker, as checked
		for _, v := range h.Versions {
			for n, as := range runChains(v.Run) {
				item := n - 1
				for _, a := range as {
					key := attemptKey{item, a.Attempt}
					if w, ok := checked[key]; ok && w == a.Worker {
						continue
					}
					checked[key] = a.Worker
					g.AttemptsPlaced++
					what := fmt.Sprintf("run %s attempt %d", h.Key, a.Attempt)
					if item >= 0 {
						what = fmt.Sprintf("run %s item %d attempt %d", h.Key, item, a.Attempt)
					}
					life, known := c.in.Workers[a.Worker]
					if !known {
						misplaced(k, "%s went to %s, a worker the harness never started", what, a.Worker)
						continue
					}
					if c.in.Credentials == nil {
						// A run of a harness without worker credentials per
						// pool: nothing to check against.
					} else if sel, ok := c.in.Credentials[a.Credential]; !ok {
						misplaced(k, "%s went to %s under credential %s, which is no worker credential of the run", what, a.Worker, strconv.Quote(a.Credential))
					} else if !placement.Allows(sel, life.Labels) {
						misplaced(k, "%s went to %s, whose labels %s its credential %s (worker labels %s) does not allow",
							what, a.Worker, placement.FormatLabels(life.Labels), a.Credential, strconv.Quote(sel))
					}
					sels := c.selectors(h.JobID, from, v.Rev)
					if !matchesAny(sels, life.Labels) {
						misplaced(k, "%s went to %s, whose labels %s match none of its job's selectors %q (revisions %d to %d)",
							what, a.Worker, placement.FormatLabels(life.Labels), sels, from, v.Rev)
					}
				}
			}
		}
	}
}

// runChains returns the attempts of r's chains: the run's own first,
// then each item's in index order.
func runChains(r api.Run) [][]api.Attempt {
	out := [][]api.Attempt{r.Attempts}
	for _, it := range r.Items {
		out = append(out, it.Attempts)
	}
	return out
}

// matchesAny reports whether labels match one of sels.
func matchesAny(sels []string, labels map[string]string) bool {
	return slices.ContainsFunc(sels, func(s string) bool { return placement.Allows(s, labels) })
}

// matchesAll reports whether labels match every one of sels.
func matchesAll(sels []string, labels map[string]string) bool {
	return !slices.ContainsFunc(sels, func(s string) bool { return !placement.Allows(s, labels) })
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
