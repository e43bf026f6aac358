package dispatch

import (
	"cmp"
	"container/heap"
	"maps"
	"math"
	"slices"
	"time"

	"github.com/jobfleet/jobfleet/store"
)

// history accounts for the run documents one partition stores: how many
// and how many bytes, per job and in all, and which are final (the only
// ones that may be deleted), so that its owner can trim them without
// reading etcd. The owner knows the size of every document it writes;
// when it acquires the partition it reads them once (load). Not safe for
// concurrent use: the partition's state lock guards it.
//
// It keeps the jobs that may have runs to trim for their count or age
// (over, aging) current as runs come and go, so that planning a trim
// looks only at those, not at every job; the owner calls touch when a
// job's retention changes.
type history struct {
	runs  int   // stored runs, active and final
	bytes int64 // their documents' bytes
	jobs  map[string]*jobHistory
	rule  func(id string) retention // each job's retention
	// over are the jobs with final runs and more runs than their max_runs.
	over map[string]struct{}
	// aging holds the jobs with final runs and a max age by when their
	// oldest final run passes it.
	aging *timerHeap
	// dead holds the dead runs with a failing-runs index entry (by run
	// ID) by when they died: the entry goes store.FailingWindow later
	// (see failingExpired), or with the run.
	dead *timerHeap
	// deadBytes are the bytes of each entry in dead, counted in its run's
	// size until the entry goes.
	deadBytes map[string]int
}

// jobHistory is one job's part of a history.
type jobHistory struct {
	runs  int
	bytes int64
	final []storedRun // final runs by scheduled time, oldest first
}

// storedRun is a stored final run: its scheduled time in nanoseconds
// since the Unix epoch and its document's size, in 16 bytes (a job keeps
// up to store.MaxHistoryRuns of them resident).
type storedRun struct {
	at   int64
	size int32
}

func newStoredRun(at time.Time, size int) storedRun {
	return storedRun{at: at.UnixNano(), size: int32(min(size, math.MaxInt32))}
}

// time returns the run's scheduled time, in UTC.
func (r storedRun) time() time.Time { return time.Unix(0, r.at).UTC() }

// newHistory returns an empty history whose jobs keep what rule says.
func newHistory(rule func(id string) retention) *history {
	return &history{jobs: map[string]*jobHistory{}, rule: rule, over: map[string]struct{}{}, aging: newTimerHeap(), dead: newTimerHeap(), deadBytes: map[string]int{}}
}

// touch brings over and aging up to date for job id, after its runs or
// its retention changed.
func (h *history) touch(id string) {
	jh := h.jobs[id]
	if jh == nil || len(jh.final) == 0 {
		delete(h.over, id)
		h.aging.remove(id)
		return
	}
	r := h.rule(id)
	if jh.runs > r.maxRuns {
		h.over[id] = struct{}{}
	} else {
		delete(h.over, id)
	}
	if r.maxAge > 0 {
		h.aging.set(id, jh.final[0].time().Add(r.maxAge))
	} else {
		h.aging.remove(id)
	}
}

// touchAll is touch for every job.
func (h *history) touchAll() {
	for id := range h.jobs {
		h.touch(id)
	}
}

func (h *history) job(id string) *jobHistory {
	jh := h.jobs[id]
	if jh == nil {
		jh = &jobHistory{}
		h.jobs[id] = jh
	}
	return jh
}

// created records a new run document of job id for time at, of size
// bytes, final or not.
func (h *history) created(id string, at time.Time, size int, final bool) {
	jh := h.job(id)
	jh.runs++
	jh.bytes += int64(size)
	h.runs++
	h.bytes += int64(size)
	if final {
		jh.insertFinal(newStoredRun(at, size))
	}
	h.touch(id)
}

// rewritten records that the document of job id's active run for time at
// changed from old to size bytes, and whether the run is final now.
func (h *history) rewritten(id string, at time.Time, old, size int, final bool) {
	jh := h.job(id)
	d := int64(size - old)
	jh.bytes += d
	h.bytes += d
	if final {
		jh.insertFinal(newStoredRun(at, size))
	}
	h.touch(id)
}

// removed records the deletion of job id's final run for time at.
func (h *history) removed(id string, at time.Time) {
	jh := h.jobs[id]
	if jh == nil {
		return
	}
	i, found := slices.BinarySearchFunc(jh.final, at.UnixNano(), func(r storedRun, t int64) int { return cmp.Compare(r.at, t) })
	if !found {
		return
	}
	size := jh.final[i].size
	jh.final = slices.Delete(jh.final, i, i+1)
	h.forgetEntry(store.RunID(id, at))
	jh.runs--
	jh.bytes -= int64(size)
	h.runs--
	h.bytes -= int64(size)
	if jh.runs == 0 {
		delete(h.jobs, id)
	}
	h.touch(id)
}

// dropJob forgets job id's runs (the job and its data were deleted).
func (h *history) dropJob(id string) {
	jh := h.jobs[id]
	if jh == nil {
		return
	}
	h.runs -= jh.runs
	h.bytes -= jh.bytes
	for _, r := range jh.final {
		h.forgetEntry(store.RunID(id, r.time()))
	}
	delete(h.jobs, id)
	h.touch(id)
}

func (jh *jobHistory) insertFinal(r storedRun) {
	i, found := slices.BinarySearchFunc(jh.final, r.at, func(s storedRun, t int64) int { return cmp.Compare(s.at, t) })
	if found {
		jh.final[i] = r
		return
	}
	if len(jh.final) == cap(jh.final) {
		// Grow by a quarter, not double: every job keeps its list
		// resident, most near their max_runs for good.
		jh.final = slices.Grow(jh.final, max(2, len(jh.final)/4))
	}
	jh.final = slices.Insert(jh.final, i, r)
}

// retention is what a job keeps of its runs: at most maxRuns (active ones
// included), and final ones at most maxAge after their scheduled time.
type retention struct {
	maxRuns int
	maxAge  time.Duration
}

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
// budget bytes, the oldest final runs across its jobs. Active runs are
// never chosen: they count toward maxRuns and the budget but stay. adding
// counts the runs per job, and addingBytes their bytes, that the write the
// deletions go with creates (counted as stored, never chosen). It changes
// nothing; the caller applies removed for each run it deletes.
//
// Only the jobs in over, in adding, or in aging due at now can have runs
// to trim for their count or age; the budget, when exceeded, looks at
// every job with final runs.
func (h *history) planTrim(now time.Time, budget int64, limit int, adding map[string]int, addingBytes int64) []trim {
	var out []trim
	bytes := h.bytes + addingBytes
	next := map[string]int{} // per job: its final runs planned so far
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
		}
		next[id] = i
	}
	if bytes <= budget || len(out) >= limit {
		return out
	}
	q := &oldestFirst{h: h, next: next}
	for id, jh := range h.jobs {
		if next[id] < len(jh.final) {
			q.ids = append(q.ids, id)
		}
	}
	heap.Init(q)
	for bytes > budget && len(out) < limit && q.Len() > 0 {
		id := q.ids[0]
		jh := h.jobs[id]
		fr := jh.final[next[id]]
		out = append(out, trim{job: id, at: fr.time(), reason: trimBudget})
		bytes -= int64(fr.size)
		next[id]++
		if next[id] < len(jh.final) {
			heap.Fix(q, 0)
		} else {
			heap.Pop(q)
		}
	}
	return out
}

// died records that job id's run for time at, which has a failing-runs
// index entry of size bytes (counted in the run's size), died at when.
func (h *history) died(id string, at, when time.Time, size int) {
	rid := store.RunID(id, at)
	h.dead.set(rid, when)
	h.deadBytes[rid] = size
}

// forgetEntry forgets the failing-runs entry of run runID, gone with its
// run.
func (h *history) forgetEntry(runID string) {
	h.dead.remove(runID)
	delete(h.deadBytes, runID)
}

// failingExpired returns up to limit dead runs, as (job, scheduled time),
// whose failing-runs index entries are older than store.FailingWindow at
// now. It changes nothing; the caller applies entryRemoved for each entry
// it deletes.
func (h *history) failingExpired(now time.Time, limit int) []trim {
	var out []trim
	h.dead.due(now.Add(-store.FailingWindow), func(runID string, _ time.Time) {
		if len(out) >= limit {
			return
		}
		if id, at, err := store.ParseRunID(runID); err == nil {
			out = append(out, trim{job: id, at: at})
		}
	})
	slices.SortFunc(out, func(a, b trim) int { return cmp.Or(cmp.Compare(a.job, b.job), a.at.Compare(b.at)) })
	return out
}

// entryRemoved records that the failing-runs index entry of job id's
// final run for time at was deleted: the run's size no longer counts it.
func (h *history) entryRemoved(id string, at time.Time) {
	rid := store.RunID(id, at)
	size := h.deadBytes[rid]
	h.forgetEntry(rid)
	jh := h.jobs[id]
	if jh == nil || size == 0 {
		return
	}
	i, found := slices.BinarySearchFunc(jh.final, at.UnixNano(), func(r storedRun, t int64) int { return cmp.Compare(r.at, t) })
	if !found {
		return
	}
	size = min(size, int(jh.final[i].size))
	jh.final[i].size -= int32(size)
	jh.bytes -= int64(size)
	h.bytes -= int64(size)
}

// nextExpiry returns when the oldest final run of some job passes its
// maxAge, or the oldest failing-runs index entry of a dead run passes
// store.FailingWindow, zero if none will.
func (h *history) nextExpiry() time.Time {
	t, _ := h.aging.min()
	if d, ok := h.dead.min(); ok {
		if d = d.Add(store.FailingWindow); t.IsZero() || d.Before(t) {
			t = d
		}
	}
	return t
}

// oldestFirst orders jobs by their oldest final run not yet planned for
// deletion (ties by job ID, so plans are deterministic).
type oldestFirst struct {
	h    *history
	next map[string]int
	ids  []string
}

func (q *oldestFirst) at(i int) time.Time {
	id := q.ids[i]
	return q.h.jobs[id].final[q.next[id]].time()
}

func (q *oldestFirst) Len() int { return len(q.ids) }
func (q *oldestFirst) Less(i, j int) bool {
	if c := q.at(i).Compare(q.at(j)); c != 0 {
		return c < 0
	}
	return q.ids[i] < q.ids[j]
}
func (q *oldestFirst) Swap(i, j int) { q.ids[i], q.ids[j] = q.ids[j], q.ids[i] }
func (q *oldestFirst) Push(x any)    { q.ids = append(q.ids, x.(string)) }
func (q *oldestFirst) Pop() any {
	x := q.ids[len(q.ids)-1]
	q.ids = q.ids[:len(q.ids)-1]
	return x
}
