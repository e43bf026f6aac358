package schedule

import (
	"encoding/binary"
	"time"

	"github.com/cespare/xxhash/v2"
)

// This file has two refinements of a Schedule: a window of instants
// (Within: a job's not_before and not_after) and a jitter that delays
// each fire by a pseudo-random offset (WithJitter: a job's jitter). Both
// are pure functions of the schedule's definition, so every orchestrator
// computes the same instants and the same fire times.

// Within returns s restricted to its instants in [from, to]: Next, Due
// and the enumerations never yield an instant before from or after to.
// A zero from or to leaves that side unbounded. The jitter of s, if any,
// is kept; instants keep the offsets they have in s.
func (s Schedule) Within(from, to time.Time) Schedule {
	r := s.ext.copy()
	r.lo, r.hi = from.Round(0), to.Round(0)
	s.ext = r.orNil()
	return s
}

// refinement is what Within and WithJitter add to a schedule. It is
// never modified once a Schedule holds it.
type refinement struct {
	lo, hi time.Time     // instants before lo or after hi are not the schedule's; zero: unbounded
	jitter time.Duration // the most a fire is delayed past its instant; 0: none
	seed   uint64        // xxhash of the jitter's key
}

func (r *refinement) copy() *refinement {
	if r == nil {
		return &refinement{}
	}
	c := *r
	return &c
}

// orNil returns r, or nil if it refines nothing.
func (r *refinement) orNil() *refinement {
	if *r == (refinement{}) {
		return nil
	}
	return r
}

func (r *refinement) from() time.Time {
	if r == nil {
		return time.Time{}
	}
	return r.lo
}

func (r *refinement) to() time.Time {
	if r == nil {
		return time.Time{}
	}
	return r.hi
}

// WithJitter returns s whose fires are each delayed by Offset: a
// pseudo-random duration in [0, max) drawn from key (a job's ID) and the
// instant, never as far as the schedule's following instant. The
// instants themselves (and so the run IDs derived from them) do not
// change. max <= 0 means no jitter.
func (s Schedule) WithJitter(max time.Duration, key string) Schedule {
	r := s.ext.copy()
	r.jitter, r.seed = 0, 0
	if max > 0 {
		r.jitter, r.seed = max, xxhash.Sum64String(key)
	}
	s.ext = r.orNil()
	return s
}

// Jitter returns the jitter of s, 0 if none.
func (s Schedule) Jitter() time.Duration {
	if s.ext == nil {
		return 0
	}
	return s.ext.jitter
}

// Offset returns how long after its instant t the schedule fires t: 0
// without jitter; with it, a pseudo-random whole number of milliseconds in
// [0, span), where span is the jitter, or the time from t to the
// schedule's next instant after t if that is shorter (ignoring Within's
// bounds), so that fires stay in the order of their instants and no fire
// is delayed past the instant that follows it. It is a function of the
// jitter's key, the jitter, the schedule and t alone: every orchestrator
// computes the same offset, before and after a handoff.
func (s Schedule) Offset(t time.Time) time.Duration {
	if s.Jitter() <= 0 {
		return 0
	}
	span := s.ext.jitter
	if n := s.rawNext(t); !n.IsZero() {
		span = min(span, n.Sub(t))
	}
	ms := int64(span / time.Millisecond)
	if span%time.Millisecond != 0 {
		ms++ // [0, span) in whole milliseconds: the last one starts before span
	}
	if ms <= 1 {
		return 0
	}
	var b [16]byte
	binary.LittleEndian.PutUint64(b[:8], s.ext.seed)
	binary.LittleEndian.PutUint64(b[8:], uint64(t.UnixNano()))
	return time.Duration(xxhash.Sum64(b[:])%uint64(ms)) * time.Millisecond
}

// FireTime returns when the schedule fires its instant t: t plus
// Offset(t). It is t for a schedule without jitter. For instants a < b of
// the schedule, FireTime(a) < b <= FireTime(b).
func (s Schedule) FireTime(t time.Time) time.Time {
	if s.Jitter() <= 0 || t.IsZero() {
		return t
	}
	return t.Add(s.Offset(t))
}

// bounded returns t, or the zero time if t is after the upper bound of
// Within.
func (s Schedule) bounded(t time.Time) time.Time {
	if hi := s.ext.to(); !hi.IsZero() && t.After(hi) {
		return time.Time{}
	}
	return t
}

// clamp narrows the interval (last, cutoff) of before to Within's
// bounds.
func (s Schedule) clamp(last, cutoff time.Time) (time.Time, time.Time) {
	if lo := s.ext.from(); !lo.IsZero() && last.Before(lo) {
		last = lo.Add(-time.Nanosecond).In(last.Location())
	}
	if hi := s.ext.to(); !hi.IsZero() && cutoff.After(hi) {
		cutoff = hi.Add(time.Nanosecond)
	}
	return last, cutoff
}
