package dispatch

import (
	"time"

	"github.com/jobfleet/jobfleet/api"
)

// heldState is a job's api.JobState as its entry holds it (jobEntry.state
// and setState). Most states have only the schedule's cursor, the spec
// revision, the timing key and counters, with times in UTC or the
// process's Local zone and no monotonic reading: those are held in 64
// bytes instead of api.JobState's 184, the times as nanoseconds since
// the Unix epoch with their zone, the counters as uint32 (missed, rarely
// more than a few, as uint16). Any other state (a pause, an overdue
// episode, a finish or success time, failures counted, a counter past
// what it is held in, a time in another zone) is held whole in full. Either way state gives back exactly the api.JobState that was
// set (equal with ==, pointers included), so every decision and every
// write is that of the state as set. Not safe for concurrent use: the
// partition's state lock guards the entry.
type heldState struct {
	// last and next are Last and Next in nanoseconds since the Unix
	// epoch, 0 for the zero time.
	last, next   int64
	specRevision int64
	timing       uint64
	// fired … missed are the counters of the same names.
	fired, skipped, dropped, scheduledRuns, runs uint32
	missed                                       uint16
	// lastZone and nextZone are the zones of Last and Next.
	lastZone, nextZone heldZone
	// full is the state when the fields above cannot hold it exactly;
	// nil otherwise. Never modified once held.
	full *api.JobState
}

// heldZone is the zone a heldState gives back a time in: UTC or Local.
type heldZone uint8

const (
	zoneUTC heldZone = iota
	zoneLocal
)

// zoneOf returns t's zone as a heldZone, and false for another.
func zoneOf(t time.Time) (heldZone, bool) {
	switch t.Location() {
	case time.UTC:
		return zoneUTC, true
	case time.Local:
		return zoneLocal, true
	}
	return 0, false
}

// heldTime returns the time of n nanoseconds since the Unix epoch in
// zone z (the zero time for 0), without a monotonic reading.
func heldTime(n int64, z heldZone) time.Time {
	if n == 0 {
		return time.Time{}
	}
	t := time.Unix(0, n)
	if z == zoneLocal {
		return t.In(time.Local)
	}
	return t.UTC()
}

// holdState returns st as an entry holds it.
func holdState(st api.JobState) heldState {
	h := heldState{
		last: unixNano(st.Last), next: unixNano(st.Next), specRevision: st.SpecRevision, timing: st.Timing,
		fired: uint32(st.Fired), skipped: uint32(st.Skipped), dropped: uint32(st.Dropped), missed: uint16(st.Missed),
		scheduledRuns: uint32(st.ScheduledRuns), runs: uint32(st.Runs),
	}
	var lastOK, nextOK bool
	h.lastZone, lastOK = zoneOf(st.Last)
	h.nextZone, nextOK = zoneOf(st.Next)
	if !lastOK || !nextOK || h.get() != st {
		return heldState{full: &st}
	}
	return h
}

// get returns the state held.
func (h *heldState) get() api.JobState {
	if h.full != nil {
		return *h.full
	}
	return api.JobState{
		Last: heldTime(h.last, h.lastZone), Next: heldTime(h.next, h.nextZone), SpecRevision: h.specRevision, Timing: h.timing,
		Fired: int64(h.fired), Skipped: int64(h.skipped), Dropped: int64(h.dropped), Missed: int64(h.missed),
		ScheduledRuns: int64(h.scheduledRuns), Runs: int(h.runs),
	}
}

// state returns the job's state.
func (e *jobEntry) state() api.JobState { return e.st.get() }

// setState makes st the job's state.
func (e *jobEntry) setState(st api.JobState) { e.st = holdState(st) }
