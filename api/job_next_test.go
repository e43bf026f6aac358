package api_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/jobfleet/jobfleet/api"
	"github.com/jobfleet/jobfleet/schedule"
)

func utc(s string) time.Time {
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		panic(err)
	}
	return t
}

func formatAll(ts []time.Time) string {
	var out []string
	for _, t := range ts {
		out = append(out, t.UTC().Format(time.RFC3339Nano))
	}
	return strings.Join(out, " ")
}

func TestNextFires(t *testing.T) {
	now := utc("2026-03-07T12:00:00Z")
	runAt := utc("2026-03-10T08:30:00.250Z")
	past := utc("2026-03-01T00:00:00Z")
	for _, tc := range []struct {
		name string
		job  api.Job
		n    int
		want string
	}{
		{"cron in UTC", api.Job{Schedule: "0 2 * * *", CreatedAt: past}, 3,
			"2026-03-08T02:00:00Z 2026-03-09T02:00:00Z 2026-03-10T02:00:00Z"},
		// Spring forward in New York on 2026-03-08: 02:30 does not exist
		// that day and fires at the jump, 03:00 EDT (07:00Z).
		{"spring forward", api.Job{Schedule: "30 2 * * *", Timezone: "America/New_York", CreatedAt: past}, 3,
			"2026-03-08T07:00:00Z 2026-03-09T06:30:00Z 2026-03-10T06:30:00Z"},
		{"every", api.Job{Schedule: "@every 90m", CreatedAt: past}, 2, "2026-03-07T13:30:00Z 2026-03-07T15:00:00Z"},
		{"after the owner's last time", api.Job{Schedule: "@hourly", CreatedAt: past, State: &api.JobState{Last: utc("2026-03-07T14:00:00Z")}}, 1,
			"2026-03-07T15:00:00Z"},
		{"created later than now", api.Job{Schedule: "@hourly", CreatedAt: utc("2026-03-07T12:30:00Z")}, 1, "2026-03-07T13:00:00Z"},
		{"paused: as if resumed", api.Job{Schedule: "@daily", Paused: true, CreatedAt: past}, 1, "2026-03-08T00:00:00Z"},
		{"one-off ahead", api.Job{RunAt: &runAt, CreatedAt: past}, 5, "2026-03-10T08:30:00.25Z"},
		{"one-off past, not fired yet", api.Job{RunAt: &past, CreatedAt: now}, 5, "2026-03-01T00:00:00Z"},
		{"one-off fired", api.Job{RunAt: &runAt, CreatedAt: past, State: &api.JobState{Last: runAt}}, 5, ""},
		{"one-off finished", api.Job{RunAt: &runAt, CreatedAt: past, State: &api.JobState{FinishedAt: now}}, 5, ""},
		{"run once when created", api.Job{CreatedAt: now}, 5, "2026-03-07T12:00:00Z"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.job.ID = "j"
			tc.job.Normalize()
			got, err := tc.job.NextFires(now, tc.n)
			if err != nil {
				t.Fatal(err)
			}
			if formatAll(got) != tc.want {
				t.Errorf("got %q, want %q", formatAll(got), tc.want)
			}
		})
	}
	if _, err := (&api.Job{Schedule: "@daily"}).NextFires(now, 101); !errors.Is(err, api.ErrInvalidJob) {
		t.Errorf("count 101: got %v, want ErrInvalidJob", err)
	}
}

// TestNextFiresAsTheSchedulerFires: stepping a clock through the fires
// NextFires lists, schedule.Due (what a partition's owner calls) fires
// exactly each listed time when it comes, and nothing between, across
// daylight-saving changes.
func TestNextFiresAsTheSchedulerFires(t *testing.T) {
	created := utc("2026-03-01T00:00:00Z")
	for _, tc := range []struct{ spec, zone string }{
		{"30 1 * * *", "America/New_York"},
		{"30 2 * * *", "America/New_York"},
		{"*/20 1-3 * * *", "Europe/Berlin"},
		{"0 0 * * 0", "Australia/Lord_Howe"},
		{"@hourly", "America/Santiago"},
		{"@every 7h", "UTC"},
		{"15 10 29 2 *", "UTC"},
	} {
		t.Run(tc.spec+" "+tc.zone, func(t *testing.T) {
			j := api.Job{ID: "j", Schedule: tc.spec, Timezone: tc.zone, CreatedAt: created}
			fires, err := j.NextFires(created, 100)
			if err != nil {
				t.Fatal(err)
			}
			if len(fires) == 0 {
				t.Fatal("no fires")
			}
			sched, err := j.ParseSchedule()
			if err != nil {
				t.Fatal(err)
			}
			last := j.InitialLast()
			for i, want := range fires {
				// Just before the fire nothing is due; at it, exactly it.
				if d, _ := schedule.Due(sched, last, want.Add(-time.Millisecond), schedule.Policy{}); len(d.Fires) != 0 {
					t.Fatalf("fire %d: Due fires %v before %v", i, d.Fires, want)
				}
				d, err := schedule.Due(sched, last, want, schedule.Policy{})
				if err != nil {
					t.Fatal(err)
				}
				if len(d.Fires) != 1 || !d.Fires[0].Equal(want) {
					t.Fatalf("fire %d: Due at %v fires %v, NextFires said %v", i, want, d.Fires, want)
				}
				last = d.Last
			}
		})
	}
}

func TestPreviewFires(t *testing.T) {
	now := utc("2026-10-31T12:00:00Z")
	got, err := api.PreviewFires("30 1 * * *", "America/New_York", nil, now, 2)
	if err != nil {
		t.Fatal(err)
	}
	// Fall back on 2026-11-01: 01:30 happens twice and fires once, at
	// the first (EDT, 05:30Z).
	if want := "2026-11-01T05:30:00Z 2026-11-02T06:30:00Z"; formatAll(got) != want {
		t.Errorf("got %q, want %q", formatAll(got), want)
	}
	at := utc("2026-12-01T00:00:00Z")
	for _, tc := range []struct {
		spec, zone string
		runAt      *time.Time
		n          int
		field      string
	}{
		{"61 * * * *", "", nil, 5, "schedule"},
		{"@daily", "Mars/Olympus", nil, 5, "timezone"},
		{"@daily", "", &at, 5, "run_at"},
		{"", "", nil, 5, "schedule"},
		{"@daily", "", nil, 0, "count"},
		{"@daily", "", nil, 101, "count"},
	} {
		_, err := api.PreviewFires(tc.spec, tc.zone, tc.runAt, now, tc.n)
		var fe *api.FieldError
		if !errors.As(err, &fe) || fe.Field != tc.field {
			t.Errorf("PreviewFires(%q, %q, %v, %d): got %v, want an error about %s", tc.spec, tc.zone, tc.runAt, tc.n, err, tc.field)
		}
	}
}
