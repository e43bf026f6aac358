package dispatch

import (
	"bytes"
	"container/heap"
	"encoding/json"
	"maps"
	"slices"
	"time"

	"github.com/jobfleet/jobfleet/api"
)

// This file plans the trimming of a partition's history: each job's
// count and age, then the partition's share of the budget, job by job.

// Reasons a run is trimmed, as in jobfleet_runs_trimmed_total{reason}.
const (
	trimMaxRuns = "max_runs"
	trimMaxAge  = "max_age"
	trimBudget  = "budget"
)

// trim is a final run to delete.
type trim struct {
	job    string
	at     time.Time
	reason string
}

// planTrim returns up to limit final runs to delete at now: first each
// job's oldest final runs while the job has more than its maxRuns or they
// are older than its maxAge; then, while the partition's documents exceed
// budget bytes, final runs of the job that stores the most beyond its
// floor, its oldest first. A job's floor (its newest floor final runs and
// its newest dead run) is never chosen for the budget, nor is an active
// run: they count toward maxRuns and the budget but stay. So the budget
// trims within the job that exceeds its share first, and takes a job's
// runs only down to what the jobs storing more keep beyond their floors:
// a job's history is not the price of a neighbour's large outputs.
// adding counts the runs per job, and addingBytes their bytes, that the
// write the deletions go with creates (counted as stored, never chosen).
// It changes nothing; the caller applies removed for each run it deletes.
//
// Only the jobs in over, in adding, or in aging due at now can have runs
// to trim for their count or age; the budget, when exceeded, looks at
// every job with final runs.
func (h *history) planTrim(now time.Time, budget int64, limit int, adding map[string]int, addingBytes map[string]int64) []trim {
	var out []trim
	bytes := h.bytes
	for _, b := range addingBytes {
		bytes += b
	}
	next := map[string]int{}      // per job: its final runs planned so far
	trimmed := map[string]int64{} // per job: their bytes
	candidates := map[string]struct{}{}
	for id := range h.over {
		candidates[id] = struct{}{}
	}
	for id := range adding {
		if h.jobs[id] != nil {
			candidates[id] = struct{}{}
		}
	}
	h.aging.due(now, func(id string, _ time.Time) { candidates[id] = struct{}{} })
	for _, id := range slices.Sorted(maps.Keys(candidates)) {
		jh, r := h.jobs[id], h.rule(id)
		runs, i := jh.runs+adding[id], 0
		for ; i < len(jh.final) && len(out) < limit; i++ {
			fr := jh.final[i]
			var reason string
			switch {
			case runs > r.maxRuns:
				reason = trimMaxRuns
			case r.maxAge > 0 && now.Sub(fr.time()) > r.maxAge:
				reason = trimMaxAge
			}
			if reason == "" {
				break
			}
			out = append(out, trim{job: id, at: fr.time(), reason: reason})
			runs--
			bytes -= int64(fr.size)
			trimmed[id] += int64(fr.size)
		}
		next[id] = i
	}
	if bytes <= budget || len(out) >= limit {
		return out
	}
	q := &largestFirst{}
	for id, jh := range h.jobs {
		from, dead := jh.floorOf(h.rule(id).floor)
		c := &budgetCandidate{id: id, jh: jh, i: next[id], end: from, skip: dead}
		c.settle()
		if c.i >= c.end {
			continue
		}
		floorBytes := int64(0)
		for _, fr := range jh.final[max(from, next[id]):] {
			floorBytes += int64(fr.size)
		}
		if dead >= next[id] {
			floorBytes += int64(jh.final[dead].size)
		}
		c.above = jh.bytes + addingBytes[id] - trimmed[id] - floorBytes
		q.items = append(q.items, c)
	}
	heap.Init(q)
	for bytes > budget && len(out) < limit && q.Len() > 0 {
		c := q.items[0]
		fr := c.jh.final[c.i]
		out = append(out, trim{job: c.id, at: fr.time(), reason: trimBudget})
		bytes -= int64(fr.size)
		c.above -= int64(fr.size)
		c.i++
		c.settle()
		if c.i < c.end {
			heap.Fix(q, 0)
		} else {
			heap.Pop(q)
		}
	}
	return out
}

// budgetCandidate is a job whose final runs the budget may trim:
// jh.final[i:end] without the one at skip.
type budgetCandidate struct {
	id     string
	jh     *jobHistory
	i, end int
	skip   int   // index of the job's newest dead run, kept; -1 if none to skip
	above  int64 // bytes the job stores beyond its floor
}

// settle moves i past the run to skip.
func (c *budgetCandidate) settle() {
	if c.i == c.skip {
		c.i++
	}
}

// largestFirst orders budget candidates by the bytes they store beyond
// their floor, largest first (ties by job ID, so plans are
// deterministic).
type largestFirst struct{ items []*budgetCandidate }

func (q *largestFirst) Len() int { return len(q.items) }
func (q *largestFirst) Less(i, j int) bool {
	if a, b := q.items[i].above, q.items[j].above; a != b {
		return a > b
	}
	return q.items[i].id < q.items[j].id
}
func (q *largestFirst) Swap(i, j int) { q.items[i], q.items[j] = q.items[j], q.items[i] }
func (q *largestFirst) Push(x any)    { q.items = append(q.items, x.(*budgetCandidate)) }
func (q *largestFirst) Pop() any {
	x := q.items[len(q.items)-1]
	q.items = q.items[:len(q.items)-1]
	return x
}

// runIsDead reports whether the run document doc says the run is dead.
// It reads the document's top-level fields only up to "status" (the
// sixth), not the attempts after it: a partition's load tells its dead
// runs without decoding every final run.
func runIsDead(doc []byte) bool {
	dec := json.NewDecoder(bytes.NewReader(doc))
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return false
	}
	for dec.More() {
		k, err := dec.Token()
		if err != nil {
			return false
		}
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return false
		}
		if k == "status" {
			var st api.RunStatus
			return json.Unmarshal(v, &st) == nil && st == api.RunDead
		}
	}
	return false
}
