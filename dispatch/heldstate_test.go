package dispatch

import (
	"encoding/json"
	"math"
	"testing"
	"time"

	"github.com/jobfleet/jobfleet/api"
)

// A held state gives back exactly the state that was set, held compactly
// or whole, and holds the common ones compactly.
func TestHeldStateGivesBackTheStateSet(t *testing.T) {
	t0 := time.Date(2026, 6, 1, 10, 0, 0, 123, time.UTC)
	decoded := func(s string) time.Time {
		var tm time.Time
		if err := json.Unmarshal([]byte(`"`+s+`"`), &tm); err != nil {
			t.Fatal(err)
		}
		return tm
	}
	// +02:00 decodes as Local where that is Local's offset, else as a
	// fixed zone.
	plus2 := decoded("2026-06-01T12:05:00+02:00")
	_, plus2Held := zoneOf(plus2)
	base := api.JobState{Last: t0, Next: t0.Add(5 * time.Minute), SpecRevision: 42, Timing: math.MaxUint64, Fired: 12, Skipped: 1, Dropped: 2, Missed: 3, ScheduledRuns: 12, Runs: 10}
	with := func(f func(*api.JobState)) api.JobState { st := base; f(&st); return st }
	for _, tt := range []struct {
		name    string
		st      api.JobState
		compact bool
	}{
		{"zero", api.JobState{}, true},
		{"utc", base, true},
		{"local next", with(func(s *api.JobState) { s.Next = s.Next.In(time.Local) }), true},
		{"decoded", with(func(s *api.JobState) { s.Last, s.Next = decoded("2026-06-01T10:00:00Z"), plus2 }), plus2Held},
		{"fixed zone", with(func(s *api.JobState) { s.Next = s.Next.In(time.FixedZone("", 5*3600+1800)) }), false},
		{"monotonic", with(func(s *api.JobState) { s.Last = time.Now() }), false},
		{"epoch", with(func(s *api.JobState) { s.Last = time.Unix(0, 0).UTC() }), false},
		{"big counter", with(func(s *api.JobState) { s.Fired = math.MaxUint32 + 1 }), false},
		{"many missed", with(func(s *api.JobState) { s.Missed = math.MaxUint16 + 1 }), false},
		{"negative counter", with(func(s *api.JobState) { s.Skipped = -1 }), false},
		{"pause", with(func(s *api.JobState) { s.Pause = &api.AutoPause{Reason: "r", At: t0, Revision: 42} }), false},
		{"overdue", with(func(s *api.JobState) { s.Overdue = &api.Overdue{Since: t0} }), false},
		{"failures", with(func(s *api.JobState) { s.Failures = 2 }), false},
		{"finished", with(func(s *api.JobState) { s.FinishedAt = t0 }), false},
		{"succeeded", with(func(s *api.JobState) { s.LastSucceededAt = t0 }), false},
	} {
		h := holdState(tt.st)
		if got := h.get(); got != tt.st {
			t.Errorf("%s: held %+v, got back %+v", tt.name, tt.st, got)
		}
		if compact := h.full == nil; compact != tt.compact {
			t.Errorf("%s: held compactly %v, want %v", tt.name, compact, tt.compact)
		}
	}
	var e jobEntry // revision 0
	if e.setState(with(func(s *api.JobState) { s.Pause = &api.AutoPause{Revision: 0} })); !e.paused() {
		t.Fatal("a job whose state holds its owner's pause at its revision is not paused")
	}
}
