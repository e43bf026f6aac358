package schedule

import (
	"errors"
	"testing"
	"time"

	"pgregory.net/rapid"
)

func TestDue(t *testing.T) {
	hourly := mustParse(t, "0 * * * *", "")
	perSecond := mustParse(t, "@every 1s", "")
	nyHourly := mustParse(t, "0 * * * *", "America/New_York")
	nyDaily0230 := mustParse(t, "30 2 * * *", "America/New_York")
	runAt := utc("2026-05-01T12:00:00Z")
	once := Once(runAt)
	last := utc("2026-05-01T10:00:00Z")

	tests := []struct {
		name string
		s    Schedule
		last time.Time
		now  time.Time
		p    Policy
		want Decision
	}{
		{
			name: "nothing due",
			s:    hourly, last: last, now: utc("2026-05-01T10:59:59.9Z"),
			want: Decision{Next: utc("2026-05-01T11:00:00Z"), Last: last},
		},
		{
			name: "on time",
			s:    hourly, last: last, now: utc("2026-05-01T11:00:00.05Z"),
			want: Decision{Fires: []time.Time{utc("2026-05-01T11:00:00Z")}, Next: utc("2026-05-01T12:00:00Z"), Last: utc("2026-05-01T11:00:00Z")},
		},
		{
			name: "on time exactly at the scheduled instant",
			s:    hourly, last: last, now: utc("2026-05-01T11:00:00Z"),
			want: Decision{Fires: []time.Time{utc("2026-05-01T11:00:00Z")}, Next: utc("2026-05-01T12:00:00Z"), Last: utc("2026-05-01T11:00:00Z")},
		},
		{
			name: "on time at the grace boundary",
			s:    hourly, last: last, now: utc("2026-05-01T11:00:05Z"), p: Policy{Misfire: Skip},
			want: Decision{Fires: []time.Time{utc("2026-05-01T11:00:00Z")}, Next: utc("2026-05-01T12:00:00Z"), Last: utc("2026-05-01T11:00:00Z")},
		},
		{
			name: "skip just past the grace",
			s:    hourly, last: last, now: utc("2026-05-01T11:00:05.000000001Z"), p: Policy{Misfire: Skip},
			want: Decision{Next: utc("2026-05-01T12:00:00Z"), Last: utc("2026-05-01T11:00:00Z"), Missed: 1, Skipped: 1},
		},
		{
			name: "run once just past the grace",
			s:    hourly, last: last, now: utc("2026-05-01T11:00:05.000000001Z"), p: Policy{Misfire: RunOnce},
			want: Decision{Fires: []time.Time{utc("2026-05-01T11:00:00Z")}, Next: utc("2026-05-01T12:00:00Z"), Last: utc("2026-05-01T11:00:00Z"), Missed: 1},
		},
		{
			name: "custom grace",
			s:    hourly, last: last, now: utc("2026-05-01T11:00:59Z"), p: Policy{Misfire: Skip, Grace: time.Minute},
			want: Decision{Fires: []time.Time{utc("2026-05-01T11:00:00Z")}, Next: utc("2026-05-01T12:00:00Z"), Last: utc("2026-05-01T11:00:00Z")},
		},
		{
			name: "run once after an outage fires the latest",
			s:    hourly, last: last, now: utc("2026-05-01T14:30:00Z"), p: Policy{Misfire: RunOnce},
			want: Decision{Fires: []time.Time{utc("2026-05-01T14:00:00Z")}, Next: utc("2026-05-01T15:00:00Z"), Last: utc("2026-05-01T14:00:00Z"), Missed: 4, Skipped: 3},
		},
		{
			name: "zero policy is run once",
			s:    hourly, last: last, now: utc("2026-05-01T14:30:00Z"),
			want: Decision{Fires: []time.Time{utc("2026-05-01T14:00:00Z")}, Next: utc("2026-05-01T15:00:00Z"), Last: utc("2026-05-01T14:00:00Z"), Missed: 4, Skipped: 3},
		},
		{
			name: "run once with an on-time fire fires only that",
			s:    hourly, last: last, now: utc("2026-05-01T14:00:01Z"), p: Policy{Misfire: RunOnce},
			want: Decision{Fires: []time.Time{utc("2026-05-01T14:00:00Z")}, Next: utc("2026-05-01T15:00:00Z"), Last: utc("2026-05-01T14:00:00Z"), Missed: 3, Skipped: 3},
		},
		{
			name: "skip after an outage",
			s:    hourly, last: last, now: utc("2026-05-01T14:30:00Z"), p: Policy{Misfire: Skip},
			want: Decision{Next: utc("2026-05-01T15:00:00Z"), Last: utc("2026-05-01T14:00:00Z"), Missed: 4, Skipped: 4},
		},
		{
			name: "skip keeps the on-time fire",
			s:    hourly, last: last, now: utc("2026-05-01T14:00:02Z"), p: Policy{Misfire: Skip},
			want: Decision{Fires: []time.Time{utc("2026-05-01T14:00:00Z")}, Next: utc("2026-05-01T15:00:00Z"), Last: utc("2026-05-01T14:00:00Z"), Missed: 3, Skipped: 3},
		},
		{
			name: "run all after an outage",
			s:    hourly, last: last, now: utc("2026-05-01T14:30:00Z"), p: Policy{Misfire: RunAll},
			want: Decision{
				Fires: []time.Time{utc("2026-05-01T11:00:00Z"), utc("2026-05-01T12:00:00Z"), utc("2026-05-01T13:00:00Z"), utc("2026-05-01T14:00:00Z")},
				Next:  utc("2026-05-01T15:00:00Z"), Last: utc("2026-05-01T14:00:00Z"), Missed: 4,
			},
		},
		{
			name: "run all capped keeps the newest",
			s:    hourly, last: last, now: utc("2026-05-01T14:30:00Z"), p: Policy{Misfire: RunAll, MaxFires: 2},
			want: Decision{Fires: []time.Time{utc("2026-05-01T13:00:00Z"), utc("2026-05-01T14:00:00Z")}, Next: utc("2026-05-01T15:00:00Z"), Last: utc("2026-05-01T14:00:00Z"), Missed: 4, Dropped: 2},
		},
		{
			name: "run all capped with an on-time fire",
			s:    hourly, last: last, now: utc("2026-05-01T14:00:01Z"), p: Policy{Misfire: RunAll, MaxFires: 2},
			want: Decision{Fires: []time.Time{utc("2026-05-01T13:00:00Z"), utc("2026-05-01T14:00:00Z")}, Next: utc("2026-05-01T15:00:00Z"), Last: utc("2026-05-01T14:00:00Z"), Missed: 3, Dropped: 2},
		},
		{
			name: "clock behind the previous owner",
			s:    hourly, last: last, now: utc("2026-05-01T09:30:00Z"),
			want: Decision{Next: utc("2026-05-01T11:00:00Z"), Last: last},
		},
		{
			name: "now equal to last",
			s:    hourly, last: last, now: last,
			want: Decision{Next: utc("2026-05-01T11:00:00Z"), Last: last},
		},
		{
			name: "one-off on time",
			s:    once, last: last, now: runAt.Add(time.Second),
			want: Decision{Fires: []time.Time{runAt}, Last: runAt},
		},
		{
			name: "one-off not yet",
			s:    once, last: last, now: runAt.Add(-time.Second),
			want: Decision{Next: runAt, Last: last},
		},
		{
			name: "one-off missed run once",
			s:    once, last: last, now: runAt.Add(time.Hour), p: Policy{Misfire: RunOnce},
			want: Decision{Fires: []time.Time{runAt}, Last: runAt, Missed: 1},
		},
		{
			name: "one-off missed skip",
			s:    once, last: last, now: runAt.Add(time.Hour), p: Policy{Misfire: Skip},
			want: Decision{Last: runAt, Missed: 1, Skipped: 1},
		},
		{
			name: "one-off already accounted for",
			s:    once, last: runAt, now: runAt.Add(time.Hour),
			want: Decision{Last: runAt},
		},
		{
			name: "one-off seeded just before run_at",
			s:    once, last: runAt.Add(-time.Nanosecond), now: runAt,
			want: Decision{Fires: []time.Time{runAt}, Last: runAt},
		},
		{
			name: "every second run once after 30s",
			s:    perSecond, last: last, now: last.Add(30 * time.Second), p: Policy{Misfire: RunOnce},
			want: Decision{
				Fires: secondsFrom(last.Add(25*time.Second), 6),
				Next:  last.Add(31 * time.Second), Last: last.Add(30 * time.Second), Missed: 24, Skipped: 24,
			},
		},
		{
			name: "every second skip after a day",
			s:    perSecond, last: last, now: last.Add(24*time.Hour + 500*time.Millisecond), p: Policy{Misfire: Skip, Grace: time.Second},
			want: Decision{
				Fires: secondsFrom(last.Add(24*time.Hour), 1),
				Next:  last.Add(24*time.Hour + time.Second), Last: last.Add(24 * time.Hour), Missed: 86399, Skipped: 86399,
			},
		},
		{
			name: "every second run all after a day is capped",
			s:    perSecond, last: last, now: last.Add(24 * time.Hour), p: Policy{Misfire: RunAll, MaxFires: 3},
			want: Decision{
				Fires: secondsFrom(last.Add(24*time.Hour-2*time.Second), 3),
				Next:  last.Add(24*time.Hour + time.Second), Last: last.Add(24 * time.Hour), Missed: 86394, Dropped: 86397,
			},
		},
		{
			name: "new york fall back run all fires both 01:00",
			s:    nyHourly, last: utc("2026-11-01T04:00:00Z"), now: utc("2026-11-01T08:00:01Z"), p: Policy{Misfire: RunAll},
			want: Decision{
				Fires: []time.Time{utc("2026-11-01T05:00:00Z"), utc("2026-11-01T06:00:00Z"), utc("2026-11-01T07:00:00Z"), utc("2026-11-01T08:00:00Z")},
				Next:  utc("2026-11-01T09:00:00Z"), Last: utc("2026-11-01T08:00:00Z"), Missed: 3,
			},
		},
		{
			name: "new york spring forward run all runs 02:30 at 03:00",
			s:    nyDaily0230, last: utc("2026-03-07T17:00:00Z"), now: utc("2026-03-09T17:00:00Z"), p: Policy{Misfire: RunAll},
			want: Decision{Fires: []time.Time{utc("2026-03-08T07:00:00Z"), utc("2026-03-09T06:30:00Z")}, Next: utc("2026-03-10T06:30:00Z"), Last: utc("2026-03-09T06:30:00Z"), Missed: 2},
		},
		{
			name: "zero schedule",
			s:    Schedule{}, last: last, now: last.Add(time.Hour),
			want: Decision{Last: last},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Due(tt.s, tt.last, tt.now, tt.p)
			if err != nil {
				t.Fatalf("Due: %v", err)
			}
			checkDecision(t, got, tt.want)
		})
	}
}

func TestDueErrors(t *testing.T) {
	s := mustParse(t, "@hourly", "")
	now := utc("2026-05-01T10:00:00Z")
	tests := []struct {
		name string
		last time.Time
		p    Policy
		want error
	}{
		{name: "unknown policy", last: now.Add(-time.Hour), p: Policy{Misfire: "run_twice"}, want: ErrUnknownPolicy},
		{name: "wrong case policy", last: now.Add(-time.Hour), p: Policy{Misfire: "RUN_ONCE"}, want: ErrUnknownPolicy},
		{name: "zero last", last: time.Time{}, want: ErrZeroLast},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Due(s, tt.last, now, tt.p)
			if !errors.Is(err, tt.want) {
				t.Errorf("Due: got error %v, want %v", err, tt.want)
			}
		})
	}
}

// secondsFrom returns n consecutive whole seconds starting at start.
func secondsFrom(start time.Time, n int) []time.Time {
	out := make([]time.Time, n)
	for i := range out {
		out[i] = start.Add(time.Duration(i) * time.Second)
	}
	return out
}

func checkDecision(t *testing.T, got, want Decision) {
	t.Helper()
	if !equalTimes(got.Fires, want.Fires) {
		t.Errorf("Fires: got %s, want %s", formatTimes(got.Fires), formatTimes(want.Fires))
	}
	if !got.Next.Equal(want.Next) || got.Next.IsZero() != want.Next.IsZero() {
		t.Errorf("Next: got %v, want %v", got.Next, want.Next)
	}
	if !got.Last.Equal(want.Last) {
		t.Errorf("Last: got %v, want %v", got.Last, want.Last)
	}
	if got.Missed != want.Missed {
		t.Errorf("Missed: got %d, want %d", got.Missed, want.Missed)
	}
	if got.Skipped != want.Skipped {
		t.Errorf("Skipped: got %d, want %d", got.Skipped, want.Skipped)
	}
	if got.Dropped != want.Dropped {
		t.Errorf("Dropped: got %d, want %d", got.Dropped, want.Dropped)
	}
}

// TestDueProperties checks Due against a brute-force oracle built only on
// Schedule.Next, and its invariants, over random schedules, zones, gaps
// and policies.
func TestDueProperties(t *testing.T) {
	specs := []string{
		"* * * * *", "*/7 * * * *", "0 * * * *", "30 1 * * *", "30 2 * * *", "0 0 * * MON",
		"*/15 * * * * *", "0 0 13 * FRI", "@hourly", "@daily", "0 0 29 2 *",
	}
	zones := []string{"UTC", "America/New_York", "Europe/Berlin", "Australia/Lord_Howe", "Asia/Kolkata", "Test/Shift"}
	policies := []MisfirePolicy{"", RunOnce, Skip, RunAll}
	base := utc("2030-01-01T00:00:00Z") // Test/Shift changes its offset in 2030 only

	rapid.Check(t, func(rt *rapid.T) {
		var s Schedule
		switch rapid.IntRange(0, 2).Draw(rt, "kind") {
		case 0:
			s = mustParse(rt, rapid.SampledFrom(specs).Draw(rt, "spec"), rapid.SampledFrom(zones).Draw(rt, "zone"))
		case 1:
			d := time.Duration(rapid.Int64Range(1, 7200).Draw(rt, "every")) * time.Second
			var err error
			if s, err = Every(d); err != nil {
				rt.Fatalf("Every(%v): %v", d, err)
			}
		case 2:
			s = Once(base.Add(time.Duration(rapid.Int64Range(0, 400*24*3600*1e9).Draw(rt, "run_at"))))
		}
		last := base.Add(time.Duration(rapid.Int64Range(1, 365*24*3600*1e9).Draw(rt, "last")))
		now := last.Add(time.Duration(rapid.Int64Range(-3600*1e9, 3*24*3600*1e9).Draw(rt, "gap")))
		if rapid.Bool().Draw(rt, "jittered") {
			s = s.WithJitter(time.Duration(rapid.Int64Range(1, 2*3600*1e9).Draw(rt, "jitter")), rapid.StringN(1, 8, -1).Draw(rt, "key"))
		}
		if rapid.Bool().Draw(rt, "windowed") {
			from := last.Add(time.Duration(rapid.Int64Range(-24*3600*1e9, 2*24*3600*1e9).Draw(rt, "not_before")))
			to := from.Add(time.Duration(rapid.Int64Range(0, 2*24*3600*1e9).Draw(rt, "window")))
			s = s.Within(from, to)
		}
		p := Policy{
			Misfire:  rapid.SampledFrom(policies).Draw(rt, "policy"),
			Grace:    time.Duration(rapid.Int64Range(0, 600*1e9).Draw(rt, "grace")),
			MaxFires: rapid.IntRange(0, 20).Draw(rt, "max_fires"),
		}

		got, err := Due(s, last, now, p)
		if err != nil {
			rt.Fatalf("Due: %v", err)
		}

		misfire, grace, maxFires, _ := p.resolve()
		prev := last
		for i, f := range got.Fires {
			if !f.After(prev) {
				rt.Fatalf("Fires[%d] = %v: got not after %v, want strictly increasing and after last", i, f, prev)
			}
			if f.After(now) {
				rt.Fatalf("Fires[%d] = %v: got after now %v, want at or before now", i, f, now)
			}
			prev = f
		}
		if len(got.Fires) > maxFires {
			rt.Fatalf("len(Fires): got %d, want at most %d", len(got.Fires), maxFires)
		}
		if !got.Next.IsZero() && !s.FireTime(got.Next).After(now) {
			rt.Fatalf("Next: got %v firing at %v, want a fire time after now %v", got.Next, s.FireTime(got.Next), now)
		}

		want := oracle(s, last, now, misfire, grace, maxFires)
		if !equalTimes(got.Fires, want.Fires) || !got.Next.Equal(want.Next) || !got.Last.Equal(want.Last) ||
			got.Missed != want.Missed || got.Skipped != want.Skipped || got.Dropped != want.Dropped {
			rt.Fatalf("Due(%v, %v, %v, %+v):\n got Fires=%s Next=%v Last=%v Missed=%d Skipped=%d Dropped=%d\nwant Fires=%s Next=%v Last=%v Missed=%d Skipped=%d Dropped=%d",
				s, last, now, p,
				formatTimes(got.Fires), got.Next, got.Last, got.Missed, got.Skipped, got.Dropped,
				formatTimes(want.Fires), want.Next, want.Last, want.Missed, want.Skipped, want.Dropped)
		}

		// Feeding Last back accounts for nothing twice.
		again, err := Due(s, got.Last, now, p)
		if err != nil {
			rt.Fatalf("Due again: %v", err)
		}
		if len(again.Fires) != 0 || again.Missed != 0 || again.Skipped != 0 || again.Dropped != 0 {
			rt.Fatalf("Due from Decision.Last again: got %d fires, %d missed, %d skipped, %d dropped, want none", len(again.Fires), again.Missed, again.Skipped, again.Dropped)
		}
	})
}

// oracle computes the expected Decision by enumerating every scheduled
// time in (last, now] with Next and applying the documented rules.
func oracle(s Schedule, last, now time.Time, misfire MisfirePolicy, grace time.Duration, maxFires int) Decision {
	d := Decision{Last: last}
	if !now.After(last) {
		d.Next = s.Next(last)
		return d
	}
	var missed, onTime []time.Time
	var waiting time.Time
	for t := s.Next(last); !t.IsZero() && !t.After(now); t = s.Next(t) {
		if s.FireTime(t).After(now) {
			waiting = t
			break
		}
		if now.Sub(s.FireTime(t)) <= grace {
			onTime = append(onTime, t)
		} else {
			missed = append(missed, t)
		}
		d.Last = t
	}
	d.Missed = len(missed)
	var fires []time.Time
	switch misfire {
	case RunOnce:
		if len(onTime) == 0 && len(missed) > 0 {
			fires = missed[len(missed)-1:]
		}
		fires = append(fires, onTime...)
		d.Skipped = len(missed) + len(onTime) - len(fires)
	case Skip:
		fires = onTime
		d.Skipped = len(missed)
	case RunAll:
		fires = append(append(fires, missed...), onTime...)
	}
	if len(fires) > maxFires {
		d.Dropped = len(fires) - maxFires
		fires = fires[len(fires)-maxFires:]
	}
	if len(fires) > 0 {
		d.Fires = fires
	}
	d.Next = s.Next(now)
	if !waiting.IsZero() {
		d.Next = waiting
	}
	return d
}
