package dispatch

import (
	"maps"
	"slices"
	"time"
)

// jobIndex is what the partition's loop looks at instead of scanning all
// its jobs at every tick: the jobs by next fire time, the jobs to plan at
// once, the one-off jobs about to finish or to be deleted, and the active
// runs of each job. The partition keeps it current (indexLocked) whenever
// a job's spec, state, or flags change, and whenever an active run comes
// or goes (addActiveLocked, dropActiveLocked): each update costs O(log n)
// in the partition's jobs. The state lock guards it.
type jobIndex struct {
	// fires holds the jobs that fire on their own (not paused, schedule
	// parsed, not stale) by when their next time fires (state.Due: Next,
	// delayed by the job's jitter); jobs without a next time are absent.
	// Its jobs keep their positions in their entries (jobPositions), so
	// pt.jobs changes only through setJobLocked.
	fires *jobHeap
	// unplanned are the jobs that fire on their own and whose state was
	// not planned from their current spec (new, edited, resumed): they are
	// planned at the next tick whatever their next time.
	unplanned map[string]struct{}
	// finishing are one-off jobs whose time has fired and whose finish is
	// not recorded yet: recorded once none of their runs is active.
	finishing map[string]struct{}
	// expiry holds finished one-off jobs by when they are to be deleted.
	expiry *timerHeap
	// active holds the IDs of each job's active runs.
	active map[string]map[string]struct{}
	// completed are the jobs whose completion is recorded.
	completed map[string]struct{}
	// overdue holds the jobs with expect_success_within by when their
	// overdue state changes on its own (overdue.go); overdueNow are the
	// jobs whose state records an overdue episode.
	overdue    *timerHeap
	overdueNow map[string]struct{}
}

// newJobIndex returns an empty index of pt's jobs.
func newJobIndex(pt *partition) *jobIndex {
	return &jobIndex{
		fires:      &jobHeap{pos: jobPositions{pt}},
		unplanned:  map[string]struct{}{},
		finishing:  map[string]struct{}{},
		expiry:     newTimerHeap(),
		active:     map[string]map[string]struct{}{},
		completed:  map[string]struct{}{},
		overdue:    newTimerHeap(),
		overdueNow: map[string]struct{}{},
	}
}

// plannedLocked reports whether job e's state was planned from its
// current spec: its next time is the one the schedule gives.
func plannedLocked(e *jobEntry) bool {
	st := e.state()
	return st.SpecRevision == e.revision() && !st.Last.IsZero() && !e.dirty
}

// indexLocked brings the index up to date with job id as pt.jobs holds
// it (absent: forgotten). Every change of a job entry's spec, state,
// dirty or stale flag is followed by it.
func (pt *partition) indexLocked(id string) {
	x := pt.idx
	e := pt.jobs[id]
	if pt.hist != nil {
		pt.hist.touch(id) // its retention may have changed
	}
	pt.indexOverdueLocked(id, e)
	if e == nil || e.stale {
		// A stale job waits for the watch to bring its change.
		x.fires.remove(id)
		delete(x.unplanned, id)
		delete(x.finishing, id)
		x.expiry.remove(id)
		delete(x.completed, id)
		return
	}
	st := e.state()
	if st.FinishedAt.IsZero() {
		delete(x.completed, id)
	} else {
		x.completed[id] = struct{}{}
	}
	planned := plannedLocked(e)
	switch {
	case e.paused() || e.sched.err != nil:
		x.fires.remove(id)
		delete(x.unplanned, id)
	default:
		if st.Next.IsZero() {
			x.fires.remove(id)
		} else {
			x.fires.set(id, e.due())
		}
		if planned {
			delete(x.unplanned, id)
		} else {
			x.unplanned[id] = struct{}{}
		}
	}
	if !e.spec.Finite() || !planned || !st.Next.IsZero() {
		delete(x.finishing, id)
		x.expiry.remove(id)
		return
	}
	if st.FinishedAt.IsZero() {
		x.finishing[id] = struct{}{}
		x.expiry.remove(id)
		return
	}
	delete(x.finishing, id)
	if due, ok := pt.deletionDueLocked(e); ok {
		x.expiry.set(id, due)
	} else {
		x.expiry.remove(id)
	}
}

// setJobLocked makes e job id's entry in pt.jobs (nil: forgets the job)
// and brings the index up to date. The index of fire times finds a job's
// position in its entry: a new entry takes over the one of the entry it
// replaces, and a job forgotten leaves it first.
func (pt *partition) setJobLocked(id string, e *jobEntry) {
	old := pt.jobs[id]
	switch {
	case e == nil:
		pt.idx.fires.remove(id)
		delete(pt.jobs, id)
	case old != nil && old != e:
		e.firePos, old.firePos = old.firePos, 0
		pt.jobs[id] = e
	default:
		pt.jobs[id] = e
	}
	pt.indexLocked(id)
}

// reindexLocked rebuilds the index from pt.jobs and pt.active, and the
// history's, after a load.
func (pt *partition) reindexLocked() {
	pt.hist.rule = pt.retentionLocked
	pt.hist.touchAll()
	pt.idx = newJobIndex(pt)
	for _, e := range pt.jobs {
		e.firePos = 0 // in no index yet
	}
	for id := range pt.jobs {
		pt.indexLocked(id)
	}
	for rid, ar := range pt.active {
		pt.indexActiveLocked(ar.run.JobID, rid)
	}
}

// addActiveLocked records ar as an active run.
func (pt *partition) addActiveLocked(ar *activeRun) {
	pt.active[ar.run.ID] = ar
	pt.indexActiveLocked(ar.run.JobID, ar.run.ID)
}

func (pt *partition) indexActiveLocked(job, rid string) {
	runs := pt.idx.active[job]
	if runs == nil {
		runs = map[string]struct{}{}
		pt.idx.active[job] = runs
	}
	runs[rid] = struct{}{}
}

// dropActiveLocked forgets active run rid, if known.
func (pt *partition) dropActiveLocked(rid string) {
	ar := pt.active[rid]
	if ar == nil {
		return
	}
	delete(pt.active, rid)
	job := ar.run.JobID
	if runs := pt.idx.active[job]; runs != nil {
		delete(runs, rid)
		if len(runs) == 0 {
			delete(pt.idx.active, job)
		}
	}
}

// activeOfLocked returns the IDs of job id's active runs, sorted.
func (pt *partition) activeOfLocked(id string) []string {
	runs := pt.idx.active[id]
	if len(runs) == 0 {
		return nil
	}
	return slices.Sorted(maps.Keys(runs))
}

// dueJobsLocked returns the IDs of the jobs the tick at now plans,
// sorted: those not planned from their current spec, those whose next
// time has come, and those with trigger requests (jobs) — stale ones
// excepted, as they wait for the watch.
func (pt *partition) dueJobsLocked(now time.Time, triggered map[string][]triggerReq) []string {
	due := make(map[string]struct{}, len(pt.idx.unplanned)+len(triggered))
	for id := range pt.idx.unplanned {
		due[id] = struct{}{}
	}
	pt.idx.fires.due(now, func(id string, _ time.Time) { due[id] = struct{}{} })
	for id := range triggered {
		if e := pt.jobs[id]; e != nil && !e.stale {
			due[id] = struct{}{}
		}
	}
	return slices.Sorted(maps.Keys(due))
}

// cleanupCandidatesLocked returns the IDs of the one-off jobs whose finish
// is to be recorded, or whose deletion is due at now, sorted.
func (pt *partition) cleanupCandidatesLocked(now time.Time) []string {
	ids := slices.Collect(maps.Keys(pt.idx.finishing))
	pt.idx.expiry.due(now, func(id string, _ time.Time) { ids = append(ids, id) })
	slices.Sort(ids)
	return ids
}
