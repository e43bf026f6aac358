package api

import (
	"errors"
	"strings"
	"testing"
	"time"
)

func TestValidateControls(t *testing.T) {
	at := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	later := at.Add(time.Hour)
	tests := []struct {
		name      string
		edit      func(j *Job)
		wantField string // "" means valid
		wantMsg   string
	}{
		{name: "jitter", edit: func(j *Job) { j.Jitter = Duration(5 * time.Minute) }},
		{name: "jitter of a day", edit: func(j *Job) { j.Jitter = MaxJitter }},
		{name: "jitter on a one-off", edit: func(j *Job) { j.Schedule, j.RunAt, j.Jitter = "", &at, Duration(time.Minute) }},
		{name: "jitter negative", edit: func(j *Job) { j.Jitter = Duration(-time.Second) }, wantField: "jitter", wantMsg: "negative"},
		{name: "jitter none", edit: func(j *Job) { j.Jitter = NoTimeout }, wantField: "jitter", wantMsg: `"none" is not a jitter`},
		{name: "jitter too long", edit: func(j *Job) { j.Jitter = MaxJitter + 1 }, wantField: "jitter", wantMsg: "longer than the maximum"},
		{name: "window", edit: func(j *Job) { j.NotBefore, j.NotAfter = &at, &later }},
		{name: "window of one instant", edit: func(j *Job) { j.NotBefore, j.NotAfter = &at, &at }},
		{name: "window reversed", edit: func(j *Job) { j.NotBefore, j.NotAfter = &later, &at }, wantField: "not_after", wantMsg: "before not_before"},
		{name: "not_before on a one-off", edit: func(j *Job) { j.Schedule, j.RunAt, j.NotBefore = "", &at, &at }, wantField: "not_before", wantMsg: "only to jobs with a schedule"},
		{name: "not_after zero", edit: func(j *Job) { j.NotAfter = &time.Time{} }, wantField: "not_after", wantMsg: "zero time"},
		{name: "not_after before the epoch", edit: func(j *Job) { j.NotAfter = timePtr(time.Date(1969, 1, 1, 0, 0, 0, 0, time.UTC)) }, wantField: "not_after"},
		{name: "max_fires", edit: func(j *Job) { j.MaxFires = 3 }},
		{name: "max_fires negative", edit: func(j *Job) { j.MaxFires = -1 }, wantField: "max_fires", wantMsg: "out of range"},
		{name: "max_fires too many", edit: func(j *Job) { j.MaxFires = MaxMaxFires + 1 }, wantField: "max_fires"},
		{name: "max_fires on a one-off", edit: func(j *Job) { j.Schedule, j.MaxFires = "", 2 }, wantField: "max_fires", wantMsg: "only to jobs with a schedule"},
		{name: "exclude", edit: func(j *Job) { j.Exclude = []string{"us-holidays", "team a/maintenance"} }},
		{name: "exclude too many", edit: func(j *Job) { j.Exclude = strings.Split("a b c d e f g h i", " ") }, wantField: "exclude", wantMsg: "9 calendars; at most 8"},
		{name: "exclude twice", edit: func(j *Job) { j.Exclude = []string{"a", "a"} }, wantField: "exclude[1]", wantMsg: "listed twice"},
		{name: "exclude empty name", edit: func(j *Job) { j.Exclude = []string{"a", ""} }, wantField: "exclude[1]", wantMsg: "required"},
		{name: "exclude invisible name", edit: func(j *Job) { j.Exclude = []string{"us\u200bholidays"} }, wantField: "exclude[0]", wantMsg: "invisible"},
		{name: "pause_after_failures", edit: func(j *Job) { j.PauseAfterFailures = 3 }},
		{name: "pause_after_failures negative", edit: func(j *Job) { j.PauseAfterFailures = -3 }, wantField: "pause_after_failures"},
		{name: "pause_after_failures too many", edit: func(j *Job) { j.PauseAfterFailures = MaxPauseAfterFailures + 1 }, wantField: "pause_after_failures"},
		{name: "expect_success_within", edit: func(j *Job) { j.ExpectSuccessWithin = Duration(26 * time.Hour) }},
		{name: "expect_success_within at its minimum", edit: func(j *Job) { j.ExpectSuccessWithin = MinExpectSuccessWithin }},
		{name: "expect_success_within too short", edit: func(j *Job) { j.ExpectSuccessWithin = Duration(59 * time.Second) }, wantField: "expect_success_within", wantMsg: "out of range"},
		{name: "expect_success_within negative", edit: func(j *Job) { j.ExpectSuccessWithin = Duration(-time.Hour) }, wantField: "expect_success_within"},
		{name: "expect_success_within too long", edit: func(j *Job) { j.ExpectSuccessWithin = MaxExpectSuccessWithin + 1 }, wantField: "expect_success_within"},
		{name: "expect_success_within none", edit: func(j *Job) { j.ExpectSuccessWithin = NoTimeout }, wantField: "expect_success_within", wantMsg: "leave the field out"},
		{name: "delete_after with max_fires", edit: func(j *Job) { j.MaxFires, j.DeleteAfter = 3, "1h" }},
		{name: "delete_after with not_after", edit: func(j *Job) { j.NotAfter, j.DeleteAfter = &at, "never" }},
		{name: "delete_after on an endless schedule", edit: func(j *Job) { j.DeleteAfter = "1h" }, wantField: "delete_after", wantMsg: "never completed"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			j := validJob()
			tt.edit(&j)
			checkFieldError(t, j.Validate(Limits{}), tt.wantField, tt.wantMsg)
		})
	}
}

func TestDecodeGivenZeroControls(t *testing.T) {
	for _, tc := range []struct{ doc, field string }{
		{`{"id":"a","schedule":"@daily","executor":{"type":"x"},"max_fires":0}`, "max_fires"},
		{`{"id":"a","schedule":"@daily","executor":{"type":"x"},"pause_after_failures":0}`, "pause_after_failures"},
		{`{"id":"a","schedule":"@daily","executor":{"type":"x"},"expect_success_within":"0s"}`, "expect_success_within"},
		{`{"id":"a","schedule":"@daily","executor":{"type":"x"},"expect_success_within":"26"}`, "expect_success_within"},
		{`{"id":"a","schedule":"@daily","executor":{"type":"x"},"not_before":"tomorrow"}`, "not_before"},
		{`{"id":"a","schedule":"@daily","executor":{"type":"x"},"exclude":"us-holidays"}`, "exclude"},
	} {
		_, err := DecodeJob(strings.NewReader(tc.doc), 0)
		var fe *FieldError
		if !errors.As(err, &fe) || fe.Field != tc.field {
			t.Errorf("DecodeJob(%s): got %v, want an error about %s", tc.doc, err, tc.field)
		}
	}
}

// TestPlanFrom: an owner plans from what it accounted for, or from the
// job's last change when that changed its timing or ended its owner's
// pause, for every kind of job.
func TestPlanFrom(t *testing.T) {
	created := time.Date(2026, 5, 1, 10, 0, 0, 0, time.UTC)
	edited := created.Add(90 * time.Minute)
	runAt := created.Add(-time.Hour)
	hourly := Job{Schedule: "@hourly", CreatedAt: created, UpdatedAt: created}
	timing := hourly.TimingKey()
	tests := []struct {
		name string
		job  Job
		st   JobState
		want time.Time
	}{
		{name: "new recurring job: its creation", job: hourly, want: created},
		{name: "planned, not edited: its last time", job: hourly, st: JobState{Last: created.Add(3 * time.Hour), Timing: timing}, want: created.Add(3 * time.Hour)},
		{name: "schedule edited after its last time: the edit", job: Job{Schedule: "*/5 * * * *", CreatedAt: created, UpdatedAt: edited}, st: JobState{Last: created.Add(time.Hour), Timing: timing}, want: edited},
		{name: "zone edited: the edit", job: Job{Schedule: "@hourly", Timezone: "Asia/Kolkata", CreatedAt: created, UpdatedAt: edited}, st: JobState{Last: created.Add(time.Hour), Timing: timing}, want: edited},
		{name: "jitter edited: the edit", job: Job{Schedule: "@hourly", Jitter: Duration(time.Minute), CreatedAt: created, UpdatedAt: edited}, st: JobState{Last: created.Add(time.Hour), Timing: timing}, want: edited},
		{name: "window edited: the edit", job: Job{Schedule: "@hourly", NotAfter: &edited, CreatedAt: created, UpdatedAt: edited}, st: JobState{Last: created.Add(time.Hour), Timing: timing}, want: edited},
		{name: "payload edited: its last time (the misfire policy's)", job: Job{Schedule: "@hourly", Payload: []byte(`{"v":2}`), CreatedAt: created, UpdatedAt: edited}, st: JobState{Last: created.Add(time.Hour), Timing: timing}, want: created.Add(time.Hour)},
		{name: "its owner's pause ended: the change", job: Job{Schedule: "@hourly", CreatedAt: created, UpdatedAt: edited, Revision: 9}, st: JobState{Last: created.Add(time.Hour), Timing: timing, Pause: &AutoPause{Revision: 8}}, want: edited},
		{name: "its owner's pause holds: its last time", job: Job{Schedule: "@hourly", CreatedAt: created, UpdatedAt: edited, Revision: 8}, st: JobState{Last: created.Add(time.Hour), Timing: timing, Pause: &AutoPause{Revision: 8}}, want: created.Add(time.Hour)},
		{name: "timing edited before its last time (the owner's clock ahead): the edit", job: Job{Schedule: "*/5 * * * *", CreatedAt: created, UpdatedAt: edited}, st: JobState{Last: created.Add(2 * time.Hour), Timing: timing}, want: edited},
		{name: "payload edited before its last time: its last time", job: Job{Schedule: "@hourly", Payload: []byte(`{"v":2}`), CreatedAt: created, UpdatedAt: edited}, st: JobState{Last: created.Add(2 * time.Hour), Timing: timing}, want: created.Add(2 * time.Hour)},
		{name: "a state without timing: any edit counts", job: Job{Schedule: "@hourly", CreatedAt: created, UpdatedAt: edited}, st: JobState{Last: created.Add(time.Hour)}, want: edited},
		{name: "edited before it was planned: the edit (no state tells what changed)", job: Job{Schedule: "@hourly", CreatedAt: created, UpdatedAt: edited}, want: edited},
		{name: "one-off edited before it was planned: the edit", job: Job{RunAt: &runAt, CreatedAt: created, UpdatedAt: edited}, want: edited},
		{name: "one-off edited before it was planned, its run_at ahead: the edit", job: Job{RunAt: &edited, CreatedAt: created, UpdatedAt: created.Add(time.Minute)}, want: created.Add(time.Minute)},
		{name: "resumed by a document it did not see: the resume", job: Job{Schedule: "@hourly", CreatedAt: created, UpdatedAt: edited, ResumedAt: &edited}, st: JobState{Last: created.Add(time.Hour), Timing: timing}, want: edited},
		{name: "resumed by a document, then its schedule edited: the edit", job: Job{Schedule: "*/5 * * * *", CreatedAt: created, UpdatedAt: edited.Add(time.Hour), ResumedAt: &edited}, st: JobState{Last: created.Add(time.Hour), Timing: timing}, want: edited.Add(time.Hour)},
		{name: "resumed by a document before its last time: its last time", job: Job{Schedule: "@hourly", CreatedAt: created, UpdatedAt: edited, ResumedAt: &edited}, st: JobState{Last: edited.Add(time.Hour), Timing: timing}, want: edited.Add(time.Hour)},
		{name: "one-off created with a past run_at: just before it", job: Job{RunAt: &runAt, CreatedAt: created, UpdatedAt: created}, want: runAt.Add(-time.Nanosecond)},
		{name: "one-off's run_at edited: the edit", job: Job{RunAt: &runAt, CreatedAt: created, UpdatedAt: edited}, st: JobState{Last: created.Add(-time.Nanosecond), Timing: 7}, want: edited},
		{name: "run once when created, edited: its creation still", job: Job{CreatedAt: created, UpdatedAt: edited}, want: created.Add(-time.Nanosecond)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.job.PlanFrom(tt.st); !got.Equal(tt.want) {
				t.Errorf("PlanFrom: got %v, want %v", got, tt.want)
			}
		})
	}
	if a, b := (&Job{Schedule: "@hourly"}).TimingKey(), (&Job{Schedule: "@hourly", Payload: []byte("1"), Retry: RetryPolicy{MaxAttempts: 3}}).TimingKey(); a != b {
		t.Errorf("TimingKey: a payload and a retry policy change it")
	}
}

func TestApplyState(t *testing.T) {
	done := time.Date(2026, 5, 1, 10, 0, 0, 0, time.UTC)
	tests := []struct {
		name       string
		job        Job
		st         *JobState
		wantStatus JobStatus
		wantPaused bool
	}{
		{name: "not taken in", job: Job{Revision: 4}, wantStatus: JobActive},
		{name: "active", job: Job{Revision: 4}, st: &JobState{}, wantStatus: JobActive},
		{name: "paused by hand", job: Job{Revision: 4, Paused: true}, st: &JobState{}, wantStatus: JobPaused, wantPaused: true},
		{name: "paused by its owner", job: Job{Revision: 4}, st: &JobState{Pause: &AutoPause{Reason: "3 runs in a row ended dead", Revision: 4}}, wantStatus: JobPaused, wantPaused: true},
		{name: "written since its owner paused it", job: Job{Revision: 9}, st: &JobState{Pause: &AutoPause{Reason: "3 runs in a row ended dead", Revision: 4}}, wantStatus: JobActive},
		{name: "completed", job: Job{Revision: 4}, st: &JobState{FinishedAt: done}, wantStatus: JobCompleted},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			j := tt.job
			j.ApplyState(tt.st)
			if j.Status != tt.wantStatus || j.Paused != tt.wantPaused || j.State != tt.st {
				t.Errorf("got status %q paused %v state %v, want %q %v %v", j.Status, j.Paused, j.State, tt.wantStatus, tt.wantPaused, tt.st)
			}
		})
	}
}

func TestUpcoming(t *testing.T) {
	now := time.Date(2026, 12, 23, 12, 0, 0, 0, time.UTC)
	past := now.Add(-30 * 24 * time.Hour)
	notAfter := time.Date(2026, 12, 26, 0, 0, 0, 0, time.UTC)
	holidays, err := (&Calendar{Name: "holidays", Timezone: "UTC", Dates: []string{"2026-12-25"}}).Compile()
	if err != nil {
		t.Fatal(err)
	}
	cals := Calendars{"holidays": holidays}
	for _, tc := range []struct {
		name string
		job  Job
		n    int
		want string // scheduled times
	}{
		{"calendar skipped", Job{Schedule: "@daily", CreatedAt: past, Exclude: []string{"holidays"}}, 3, "2026-12-24T00:00:00Z 2026-12-26T00:00:00Z 2026-12-27T00:00:00Z"},
		{"unknown calendar excludes nothing", Job{Schedule: "@daily", CreatedAt: past, Exclude: []string{"nope"}}, 2, "2026-12-24T00:00:00Z 2026-12-25T00:00:00Z"},
		{"until not_after", Job{Schedule: "@daily", CreatedAt: past, NotAfter: &notAfter}, 10, "2026-12-24T00:00:00Z 2026-12-25T00:00:00Z 2026-12-26T00:00:00Z"},
		{"max_fires left", Job{Schedule: "@daily", CreatedAt: past, MaxFires: 5, State: &JobState{ScheduledRuns: 3, Last: now}}, 10, "2026-12-24T00:00:00Z 2026-12-25T00:00:00Z"},
		{"max_fires used up", Job{Schedule: "@daily", CreatedAt: past, MaxFires: 5, State: &JobState{ScheduledRuns: 5, Last: now}}, 10, ""},
		{"after the owner's last time", Job{Schedule: "@hourly", CreatedAt: past, State: &JobState{Last: now.Add(3 * time.Hour)}}, 1, "2026-12-23T16:00:00Z"},
		{"one-off edited to a past run_at: none", Job{RunAt: &past, CreatedAt: past.Add(-time.Hour), UpdatedAt: now, State: &JobState{Last: past.Add(-time.Hour), Timing: 1}}, 5, ""},
		{"one-off on a holiday: none", Job{RunAt: timePtr(time.Date(2026, 12, 25, 9, 0, 0, 0, time.UTC)), CreatedAt: past, Exclude: []string{"holidays"}}, 5, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.job.ID = "j"
			if tc.job.UpdatedAt.IsZero() {
				tc.job.UpdatedAt = tc.job.CreatedAt
			}
			tc.job.Normalize()
			got, err := tc.job.Upcoming(now, tc.n, cals)
			if err != nil {
				t.Fatal(err)
			}
			var s []string
			for _, u := range got {
				if !u.FireAt.Equal(u.At) {
					t.Errorf("FireAt %v of %v without jitter", u.FireAt, u.At)
				}
				s = append(s, u.At.UTC().Format(time.RFC3339))
			}
			if strings.Join(s, " ") != tc.want {
				t.Errorf("got %q, want %q", strings.Join(s, " "), tc.want)
			}
		})
	}
	t.Run("jittered", func(t *testing.T) {
		j := Job{ID: "team/report", Schedule: "@hourly", CreatedAt: past, UpdatedAt: past, Jitter: Duration(10 * time.Minute)}
		sched, err := j.ParseSchedule()
		if err != nil {
			t.Fatal(err)
		}
		// An instant just before now whose fire time is after now is
		// still to come.
		hour := now.Truncate(time.Hour)
		at := hour.Add(sched.Offset(hour) - time.Millisecond)
		got, err := j.Upcoming(at, 3, nil)
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != 3 || !got[0].At.Equal(hour) {
			t.Fatalf("Upcoming at %v: got %v, want %v first", at, got, hour)
		}
		for i, u := range got {
			if d := u.FireAt.Sub(u.At); d < 0 || d >= 10*time.Minute || !u.FireAt.Equal(sched.FireTime(u.At)) {
				t.Errorf("fire %d: at %v fires %v, want FireTime within the jitter", i, u.At, u.FireAt)
			}
		}
	})
}
