package chaos

import (
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/jobfleet/jobfleet/api"
)

// After are the checker's figures of job-to-job dependencies ("after").
type After struct {
	// UpstreamRuns counts the runs of upstream jobs that ended in a state
	// a downstream job lists, required to fire it (ended well before the
	// end of the run, after the downstream job's creation); Fired counts
	// the downstream runs that named one.
	UpstreamRuns int `json:"upstream_runs"`
	Fired        int `json:"fired"`
	// The must-be-zero counts.
	// Missed: a required upstream run that fired its downstream job no
	// run.
	Missed int `json:"missed"`
	// Duplicated: an upstream run that fired a downstream job more than
	// once.
	Duplicated int `json:"duplicated"`
	// Unexpected: a downstream run whose caused_by names no upstream run
	// that ended so, or a job whose after does not list that job and
	// state.
	Unexpected int `json:"unexpected"`
}

// afterSlack is how long before the end of the run an upstream run must
// have ended for its downstream runs to be required: the hand-over is
// fired by the downstream partition's owner once it reads it.
const afterSlack = 5 * time.Second

// upstreamEnd is how an upstream run ended, as the history saw it first.
type upstreamEnd struct {
	job    string
	status api.RunStatus
	seen   time.Time
}

// checkAfter checks invariant 3 of the workload model: a job with after
// fires exactly once for each run of an upstream job that ends in a
// state its after lists (required of those that ended afterSlack before
// the end, when the downstream job existed and was not deleted), and
// every run naming a cause was caused so.
func (c *checker) checkAfter() {
	g := &c.res.Global.After
	ends := map[string]upstreamEnd{}           // by run ID
	caused := map[string]map[string][]string{} // downstream job -> upstream run ID -> downstream run keys
	for _, key := range slices.Sorted(maps.Keys(c.in.History.Runs)) {
		h := c.in.History.Runs[key]
		for _, v := range h.Versions {
			if v.Run.Status.Final() {
				ends[v.Run.ID] = upstreamEnd{job: h.JobID, status: v.Run.Status, seen: v.Seen}
				break
			}
		}
		if len(h.Versions) == 0 || h.Versions[0].Run.CausedBy == nil {
			continue
		}
		cause := h.Versions[0].Run.CausedBy
		if caused[h.JobID] == nil {
			caused[h.JobID] = map[string][]string{}
		}
		caused[h.JobID][cause.Run] = append(caused[h.JobID][cause.Run], key)
	}
	for _, id := range slices.Sorted(maps.Keys(c.in.History.Specs)) {
		vs := c.in.History.Specs[id]
		if len(vs) == 0 || vs[0].Deleted {
			continue
		}
		after := vs[len(vs)-1].Job.After
		deleted := vs[len(vs)-1].Deleted || c.in.Jobs[id].Uncertain
		if deleted {
			after = vs[0].Job.After
		}
		if len(after) == 0 {
			continue
		}
		created := vs[0].Seen
		for runID, keys := range caused[id] {
			g.Fired += len(keys)
			end, ok := ends[runID]
			if _, listed := api.AfterFires(after, end.job, end.status); !ok || !listed {
				g.Unexpected += len(keys)
				c.violate("after_unexpected", "", fmt.Sprintf("job %q: runs %v name upstream run %s, which did not end in a state its after lists (%+v)", id, keys, runID, end))
			}
			if len(keys) > 1 {
				g.Duplicated += len(keys) - 1
				c.violate("after_duplicated", "", fmt.Sprintf("job %q: upstream run %s fired it %d times: %v", id, runID, len(keys), keys))
			}
		}
		if deleted {
			continue
		}
		for _, runID := range slices.Sorted(maps.Keys(ends)) {
			end := ends[runID]
			if _, listed := api.AfterFires(after, end.job, end.status); !listed || !end.seen.After(created.Add(time.Second)) || !end.seen.Before(c.in.End.Add(-afterSlack)) {
				continue
			}
			g.UpstreamRuns++
			if len(caused[id][runID]) == 0 {
				g.Missed++
				c.violate("after_missed", c.kindOf(end.seen), fmt.Sprintf("job %q: upstream run %s ended %s at %s and fired no run of it", id, runID, end.status, ts(end.seen)))
			}
		}
	}
}
