package dispatch

import (
	"cmp"
	"math"
	"slices"
	"time"

	"github.com/jobfleet/jobfleet/api"

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
	// ID) by when they died: the entry goes api.FailingWindow later
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
	// lastDead is the scheduled time (Unix nanoseconds) of the newest
	// final run in final that is dead, 0 if none: part of the job's floor.
	lastDead int64
}

// storedRun is a stored final run: its scheduled time in nanoseconds
// since the Unix epoch, its document's size and whether it is dead, in
// 16 bytes (a job keeps up to api.MaxHistoryRuns of them resident).
type storedRun struct {
	at   int64
	size int32
	dead bool
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

// reopened records that job id's final run for time at is active again
// (started again from a step): it leaves the final runs, which trimming
// may delete, its bytes still counted.
func (h *history) reopened(id string, at time.Time) {
	jh := h.jobs[id]
	if jh == nil {
		return
	}
	i, found := slices.BinarySearchFunc(jh.final, at.UnixNano(), func(r storedRun, t int64) int { return cmp.Compare(r.at, t) })
	if found {
		jh.final = slices.Delete(jh.final, i, i+1)
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
	if jh.lastDead == at.UnixNano() {
		jh.lastDead = 0
		for j := len(jh.final) - 1; j >= 0; j-- {
			if jh.final[j].dead {
				jh.lastDead = jh.final[j].at
				break
			}
		}
	}
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
	i, found := jh.find(r.at)
	if found {
		r.dead = r.dead || jh.final[i].dead
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

// find returns the index in final of the run at (Unix nanoseconds), or
// where it would be.
func (jh *jobHistory) find(at int64) (int, bool) {
	return slices.BinarySearchFunc(jh.final, at, func(s storedRun, t int64) int { return cmp.Compare(s.at, t) })
}

// markDead records that job id's final run for time at is dead.
func (h *history) markDead(id string, at time.Time) {
	jh := h.jobs[id]
	if jh == nil {
		return
	}
	if i, found := jh.find(at.UnixNano()); found {
		jh.final[i].dead = true
		jh.lastDead = max(jh.lastDead, jh.final[i].at)
	}
}

// floorOf returns the index in jh.final from which its runs are its
// floor (its newest floor final runs), and the index of its newest dead
// run if that run is older (else -1): the runs the budget never trims.
func (jh *jobHistory) floorOf(floor int) (from, dead int) {
	from, dead = max(len(jh.final)-floor, 0), -1
	if jh.lastDead != 0 {
		if i, found := jh.find(jh.lastDead); found && i < from {
			dead = i
		}
	}
	return from, dead
}

// retention is what a job keeps of its runs: at most maxRuns (active ones
// included), and final ones at most maxAge after their scheduled time;
// floor of its newest final runs (with its newest dead run) are never
// trimmed for the budget, whatever the other jobs of the partition store.
type retention struct {
	maxRuns int
	maxAge  time.Duration
	floor   int
}

// died records that job id's final run for time at, which has a
// failing-runs index entry of size bytes (counted in the run's size),
// died at when.
func (h *history) died(id string, at, when time.Time, size int) {
	h.markDead(id, at)
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
// whose failing-runs index entries are older than api.FailingWindow at
// now. It changes nothing; the caller applies entryRemoved for each entry
// it deletes.
func (h *history) failingExpired(now time.Time, limit int) []trim {
	var out []trim
	h.dead.due(now.Add(-api.FailingWindow), func(runID string, _ time.Time) {
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
// api.FailingWindow, zero if none will.
func (h *history) nextExpiry() time.Time {
	t, _ := h.aging.min()
	if d, ok := h.dead.min(); ok {
		if d = d.Add(api.FailingWindow); t.IsZero() || d.Before(t) {
			t = d
		}
	}
	return t
}
