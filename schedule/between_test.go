package schedule_test

import (
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/jobfleet/jobfleet/schedule"
)

func TestBetween(t *testing.T) {
	at := func(s string) time.Time {
		v, err := time.Parse(time.RFC3339, s)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	hourly, _ := schedule.Parse("0 * * * *", "UTC")
	ny, _ := schedule.Parse("30 2 * * *", "America/New_York")
	for _, tc := range []struct {
		name     string
		s        schedule.Schedule
		from, to string
		max      int
		want     []string
		more     string
	}{
		{"from inclusive, to exclusive", hourly, "2026-06-01T10:00:00Z", "2026-06-01T13:00:00Z", 10,
			[]string{"2026-06-01T10:00:00Z", "2026-06-01T11:00:00Z", "2026-06-01T12:00:00Z"}, ""},
		{"cut at max", hourly, "2026-06-01T10:30:00Z", "2026-06-01T20:00:00Z", 2,
			[]string{"2026-06-01T11:00:00Z", "2026-06-01T12:00:00Z"}, "2026-06-01T13:00:00Z"},
		{"max exactly the range", hourly, "2026-06-01T10:00:00Z", "2026-06-01T12:00:00Z", 2,
			[]string{"2026-06-01T10:00:00Z", "2026-06-01T11:00:00Z"}, ""},
		{"empty range", hourly, "2026-06-01T10:10:00Z", "2026-06-01T10:50:00Z", 10, nil, ""},
		// A fixed-time job runs right after the jump over its time, as Due fires it.
		{"spring forward", ny, "2026-03-07T00:00:00Z", "2026-03-10T00:00:00Z", 10,
			[]string{"2026-03-07T07:30:00Z", "2026-03-08T07:00:00Z", "2026-03-09T06:30:00Z"}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, more := tc.s.Between(at(tc.from), at(tc.to), tc.max)
			if len(got) != len(tc.want) {
				t.Fatalf("got %v, want %v", got, tc.want)
			}
			for i := range got {
				if !got[i].Equal(at(tc.want[i])) {
					t.Fatalf("got %v, want %v", got, tc.want)
				}
			}
			if (tc.more == "") != more.IsZero() || (tc.more != "" && !more.Equal(at(tc.more))) {
				t.Fatalf("more = %v, want %q", more, tc.more)
			}
		})
	}
}

// Every time Between gives is one Due fires: a backfill never makes a
// run ID a fire could not have made.
func TestBetweenGivesOnlyTimesDueFires(t *testing.T) {
	specs := []string{"*/7 * * * *", "30 2 * * *", "0 9-17 * * mon-fri", "@hourly", "@every 90s", "15 */3 * * *", "0 0 29 2 *"}
	zones := []string{"UTC", "America/New_York", "Europe/Berlin", "Australia/Lord_Howe", "Asia/Kolkata"}
	base := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	rapid.Check(t, func(t *rapid.T) {
		s, err := schedule.Parse(rapid.SampledFrom(specs).Draw(t, "spec"), rapid.SampledFrom(zones).Draw(t, "zone"))
		if err != nil {
			t.Fatal(err)
		}
		from := base.Add(time.Duration(rapid.Int64Range(0, 365*24*3600).Draw(t, "from")) * time.Second)
		to := from.Add(time.Duration(rapid.Int64Range(0, 10*24*3600).Draw(t, "span")) * time.Second)
		max := rapid.IntRange(1, 200).Draw(t, "max")
		got, more := s.Between(from, to, max)
		// Due, as an owner that last fired just before from evaluates at
		// to (every time on time), fires exactly these first.
		d, err := schedule.Due(s, from.Add(-time.Nanosecond), to.Add(-time.Nanosecond), schedule.Policy{Misfire: schedule.RunAll, Grace: 400 * 24 * time.Hour, MaxFires: 1 << 20})
		if err != nil {
			t.Fatal(err)
		}
		want := d.Fires
		if len(want) > max {
			if !more.Equal(want[max]) {
				t.Fatalf("more = %v, want %v", more, want[max])
			}
			want = want[:max]
		} else if !more.IsZero() {
			t.Fatalf("more = %v with %d times in range, max %d", more, len(want), max)
		}
		if len(got) != len(want) {
			t.Fatalf("Between gave %d times, Due fires %d: %v vs %v", len(got), len(want), got, want)
		}
		for i := range got {
			if !got[i].Equal(want[i]) {
				t.Fatalf("time %d: Between %v, Due %v", i, got[i], want[i])
			}
		}
	})
}
