package dispatch_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/jobfleet/jobfleet/api"
	"github.com/jobfleet/jobfleet/dispatch"
	"github.com/jobfleet/jobfleet/schedule"
	"github.com/jobfleet/jobfleet/store"
)

// planAll plans j at now as a partition's owner does: PlanFires, CapActive
// (at maxActive), LimitFires.
func planAll(t interface {
	Helper()
	Fatal(...any)
}, j api.Job, st api.JobState, active []string, now time.Time, cals api.Calendars, maxActive int) dispatch.FirePlan {
	t.Helper()
	s, err := j.ParseSchedule()
	if err != nil {
		t.Fatal(err)
	}
	plan, err := dispatch.PlanFires(&j, s, st, active, now, schedule.Policy{Grace: 5 * time.Second}, cals, "m", 1)
	if err != nil {
		t.Fatal(err)
	}
	dispatch.CapActive(&j, &plan, len(active), maxActive)
	dispatch.LimitFires(&j, &plan)
	return plan
}

func runTimes(plan dispatch.FirePlan, status api.RunStatus) string {
	var out []string
	for _, r := range plan.Runs {
		if r.Status == status {
			out = append(out, r.ScheduledAt.UTC().Format("15:04:05"))
		}
	}
	return strings.Join(out, " ")
}

// TestEditNeverFiresThePast: whatever changed a job (its schedule, its
// zone, its run_at, a resume, a replacement by PUT, a batch or jobfleet
// job edit, which all store a new revision and updated_at), its owner
// fires no time of the new definition from before the change, whatever
// the misfire policy and however late it plans; the next fire is the
// first time after the change; and times the fleet missed after the
// change are still the misfire policy's.
func TestEditNeverFiresThePast(t *testing.T) {
	day := time.Date(2026, 6, 1, 0, 0, 0, 0, time.UTC)
	at := func(hm string) time.Time {
		d, err := time.ParseDuration(strings.Replace(hm, ":", "h", 1) + "m")
		if err != nil {
			t.Fatal(err)
		}
		return day.Add(d)
	}
	tests := []struct {
		name     string
		before   api.Job // as created at day 00:00, and planned up to last
		last     time.Time
		edit     func(j *api.Job) // the new definition
		editedAt time.Time
		now      time.Time
		want     string // pending runs' times
		wantNext time.Time
		missed   int64 // want state.missed: the fleet's misses, none of them before a timing change
		// autoPaused: the owner had paused the job before the change;
		// resumed: the change is a resume (dispatch.Resumed)
		autoPaused, resumed bool
	}{
		{name: "a schedule change, planned at once", before: api.Job{Schedule: "0 * * * *"}, last: at("10:00"),
			edit: func(j *api.Job) { j.Schedule = "*/15 * * * *" }, editedAt: at("10:30"), now: at("10:30").Add(time.Second),
			want: "", wantNext: at("10:45")},
		{name: "a schedule change, planned within the grace of a time before it", before: api.Job{Schedule: "0 * * * *"}, last: at("10:00"),
			edit: func(j *api.Job) { j.Schedule = "* * * * * *" }, editedAt: at("10:30"), now: at("10:30").Add(3 * time.Second),
			want: "10:30:01 10:30:02 10:30:03", wantNext: at("10:30").Add(4 * time.Second)},
		{name: "a schedule change, planned late (run_all)", before: api.Job{Schedule: "0 * * * *", MisfirePolicy: api.MisfireRunAll}, last: at("10:00"),
			edit: func(j *api.Job) { j.Schedule = "*/15 * * * *" }, editedAt: at("10:31"), now: at("11:20"),
			want: "10:45:00 11:00:00 11:15:00", wantNext: at("11:30"), missed: 3},
		{name: "a time zone change", before: api.Job{Schedule: "0 12 * * *"}, last: day.Add(-12 * time.Hour),
			edit: func(j *api.Job) { j.Timezone = "Asia/Tokyo" }, editedAt: at("05:00"), now: at("05:00").Add(time.Minute),
			want: "", wantNext: day.Add(27 * time.Hour)}, // 12:00 JST is 03:00Z: the next is tomorrow's
		{name: "run_at moved into the past", before: api.Job{RunAt: ptr(at("20:00"))}, last: day.Add(-time.Nanosecond),
			edit: func(j *api.Job) { j.RunAt = ptr(at("09:00")) }, editedAt: at("10:00"), now: at("10:00").Add(time.Second),
			want: ""},
		{name: "run_at moved ahead", before: api.Job{RunAt: ptr(at("20:00"))}, last: day.Add(-time.Nanosecond),
			edit: func(j *api.Job) { j.RunAt = ptr(at("12:00")) }, editedAt: at("10:00"), now: at("12:00"),
			want: "12:00:00"},
		// A resume reaches the owner as a change it sees (Resumed) or as a
		// pause key it loads (the dispatcher folds it into the state the
		// same way): what the pause kept is forgiven.
		{name: "resumed after a pause (run_all)", before: api.Job{Schedule: "*/10 * * * *", MisfirePolicy: api.MisfireRunAll, Paused: true}, last: at("08:00"), resumed: true,
			edit: func(j *api.Job) { j.Paused = false }, editedAt: at("09:05"), now: at("09:05").Add(time.Second),
			want: "", wantNext: at("09:10")},
		{name: "schedule replaced by itself during an outage (run_once): the edit bounds nothing", before: api.Job{Schedule: "*/10 * * * *"}, last: at("08:00"),
			edit: func(j *api.Job) {}, editedAt: at("09:05"), now: at("09:45").Add(time.Second),
			want: "09:40:00", wantNext: at("09:50"), missed: 10},
		{name: "payload edited during an outage (run_all): the misfires still fire", before: api.Job{Schedule: "*/10 * * * *", MisfirePolicy: api.MisfireRunAll}, last: at("08:00"),
			edit: func(j *api.Job) { j.Payload = json.RawMessage(`{"v":2}`) }, editedAt: at("08:35"), now: at("08:45").Add(time.Second),
			want: "08:10:00 08:20:00 08:30:00 08:40:00", wantNext: at("08:50"), missed: 4},
		{name: "the owner's pause lifted by a PUT (run_all)", before: api.Job{Schedule: "*/10 * * * *", MisfirePolicy: api.MisfireRunAll}, last: at("08:00"), autoPaused: true,
			edit: func(j *api.Job) {}, editedAt: at("09:05"), now: at("09:05").Add(time.Second),
			want: "", wantNext: at("09:10")},
		// An owner whose clock ran 3 s ahead of the writer's had fired
		// up to 10:00:08 when the writer stored the change at 10:00:05.5:
		// the new schedule's times after the change are owed, 10:00:07
		// too; 06 and 08 have runs already, which the fire's
		// create-if-absent keeps (their run IDs are the same).
		{name: "timing changed before the owner's last time (its clock ahead, run_all)", before: api.Job{Schedule: "*/2 * * * * *", MisfirePolicy: api.MisfireRunAll}, last: at("10:00").Add(8 * time.Second),
			edit: func(j *api.Job) { j.Schedule = "* * * * * *" }, editedAt: at("10:00").Add(5500 * time.Millisecond), now: at("10:00").Add(9 * time.Second),
			want: "10:00:06 10:00:07 10:00:08 10:00:09", wantNext: at("10:00").Add(10 * time.Second)},
		{name: "edited long before its last time: nothing changes", before: api.Job{Schedule: "*/10 * * * *"}, last: at("09:40"),
			edit: func(j *api.Job) { j.Payload = json.RawMessage(`{"v":2}`) }, editedAt: at("09:05"), now: at("09:50"),
			want: "09:50:00", wantNext: at("10:00")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			j, _ := planJob(t, api.Job{ID: "edited", Schedule: tt.before.Schedule, RunAt: tt.before.RunAt, MisfirePolicy: tt.before.MisfirePolicy,
				Paused: tt.before.Paused, CreatedAt: day})
			j.UpdatedAt, j.Revision = day, 10
			st := api.JobState{}
			if !tt.last.IsZero() {
				st = api.JobState{Last: tt.last, SpecRevision: 10, Timing: j.TimingKey()}
			}
			if tt.autoPaused {
				st.Pause, st.Failures = &api.AutoPause{Reason: "x", Revision: 10}, 3
			}
			tt.edit(&j)
			j.UpdatedAt, j.Revision = tt.editedAt, 11
			if tt.resumed {
				st = dispatch.Resumed(st, tt.editedAt)
			}
			plan := planAll(t, j, st, nil, tt.now, nil, 100)
			if got := runTimes(plan, api.RunPending); got != tt.want {
				t.Errorf("fired %q, want %q", got, tt.want)
			}
			timingChanged := st.Timing != 0 && st.Timing != j.TimingKey() || tt.autoPaused || tt.resumed
			for _, r := range plan.Runs {
				if timingChanged && !r.ScheduledAt.After(tt.editedAt) {
					t.Errorf("run %s is for a time before the edit at %v", r.ID, tt.editedAt)
				}
			}
			if plan.State.Missed != tt.missed {
				t.Errorf("missed: got %d, want %d", plan.State.Missed, tt.missed)
			}
			if tt.autoPaused && (plan.State.Pause != nil || plan.State.Failures != 0) {
				t.Errorf("the owner's pause ended: got %+v and %d failures, want both cleared", plan.State.Pause, plan.State.Failures)
			}
			if !plan.State.Next.Equal(tt.wantNext) {
				t.Errorf("next: got %v, want %v", plan.State.Next, tt.wantNext)
			}
			if plan.State.Missed != 0 && tt.now.Sub(tt.editedAt) < 5*time.Second {
				t.Errorf("missed %d times planned within the grace of the edit: want none", plan.State.Missed)
			}
		})
	}
}

func TestPlanFiresControls(t *testing.T) {
	holidays, err := (&api.Calendar{Name: "holidays", Dates: []string{"2026-06-02"}, Ranges: []api.DateRange{{From: "2026-06-01T00:00:20", To: "2026-06-01T00:00:40"}}}).Compile()
	if err != nil {
		t.Fatal(err)
	}
	cals := api.Calendars{"holidays": holidays}
	tests := []struct {
		name        string
		job         api.Job
		st          api.JobState
		active      []string
		now         time.Duration // after t0
		maxActive   int
		wantPending string
		wantSkipped string
		wantReplace int
		wantNext    time.Duration // after t0; -1: none
		wantRuns    int64         // state.scheduled_runs
	}{
		{name: "excluded by a calendar", job: api.Job{Schedule: "@every 10s", Exclude: []string{"holidays"}, MisfirePolicy: api.MisfireRunAll},
			now: 50 * time.Second, wantPending: "00:00:10 00:00:40 00:00:50", wantSkipped: "00:00:20 00:00:30", wantNext: time.Minute, wantRuns: 3}, // a range excludes its end
		{name: "excluded: forbid counts only what runs", job: api.Job{Schedule: "@every 10s", Exclude: []string{"holidays"}, MisfirePolicy: api.MisfireRunAll, ConcurrencyPolicy: api.ConcurrencyForbid},
			now: 30 * time.Second, wantPending: "00:00:10", wantSkipped: "00:00:20 00:00:30", wantNext: 40 * time.Second, wantRuns: 1},
		{name: "excluded: replace runs the latest not excluded", job: api.Job{Schedule: "@every 10s", Exclude: []string{"holidays"}, MisfirePolicy: api.MisfireRunAll, ConcurrencyPolicy: api.ConcurrencyReplace},
			active: []string{"x@1"}, now: 30 * time.Second, wantPending: "00:00:10", wantSkipped: "00:00:20 00:00:30", wantReplace: 1, wantNext: 40 * time.Second, wantRuns: 1},
		{name: "excluded all: replace ends nothing", job: api.Job{Schedule: "@every 10s", Exclude: []string{"holidays"}, ConcurrencyPolicy: api.ConcurrencyReplace},
			active: []string{"x@1"}, now: 30 * time.Second, st: api.JobState{Last: t0.Add(20 * time.Second)}, wantSkipped: "00:00:30", wantNext: 40 * time.Second},
		{name: "a calendar no owner holds excludes nothing", job: api.Job{Schedule: "@every 10s", Exclude: []string{"nope"}},
			now: 20 * time.Second, st: api.JobState{Last: t0.Add(10 * time.Second)}, wantPending: "00:00:20", wantNext: 30 * time.Second, wantRuns: 1},
		{name: "max_fires reached within a decision", job: api.Job{Schedule: "@every 10s", MaxFires: 3, MisfirePolicy: api.MisfireRunAll},
			now: 50 * time.Second, wantPending: "00:00:10 00:00:20 00:00:30", wantNext: -1, wantRuns: 3},
		{name: "max_fires counted from the state", job: api.Job{Schedule: "@every 10s", MaxFires: 3},
			st: api.JobState{Last: t0.Add(20 * time.Second), ScheduledRuns: 2}, now: 30 * time.Second, wantPending: "00:00:30", wantNext: -1, wantRuns: 3},
		{name: "max_fires used up: nothing", job: api.Job{Schedule: "@every 10s", MaxFires: 3},
			st: api.JobState{Last: t0.Add(30 * time.Second), ScheduledRuns: 3}, now: 40 * time.Second, wantNext: -1, wantRuns: 3},
		{name: "max_fires: skipped runs do not count", job: api.Job{Schedule: "@every 10s", MaxFires: 2, ConcurrencyPolicy: api.ConcurrencyForbid},
			active: []string{"x@1"}, st: api.JobState{Last: t0.Add(10 * time.Second)}, now: 20 * time.Second, wantSkipped: "00:00:20", wantNext: 30 * time.Second},
		{name: "max_fires: runs the active cap skips do not count", job: api.Job{Schedule: "@every 10s", MaxFires: 2},
			active: []string{"x@1"}, maxActive: 1, st: api.JobState{Last: t0.Add(10 * time.Second)}, now: 20 * time.Second, wantSkipped: "00:00:20", wantNext: 30 * time.Second},
		{name: "not_before", job: api.Job{Schedule: "@every 10s", NotBefore: ptr(t0.Add(35 * time.Second))},
			now: 30 * time.Second, wantNext: 40 * time.Second},
		{name: "not_after: the last time, then none", job: api.Job{Schedule: "@every 10s", NotAfter: ptr(t0.Add(30 * time.Second))},
			st: api.JobState{Last: t0.Add(20 * time.Second)}, now: 30 * time.Second, wantPending: "00:00:30", wantNext: -1, wantRuns: 1},
		{name: "owner's pause holds", job: api.Job{Schedule: "@every 10s", Revision: 5},
			st: api.JobState{Last: t0, Pause: &api.AutoPause{Reason: "x", Revision: 5}}, now: 30 * time.Second, wantNext: 0, wantRuns: 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.job.ID = "c"
			j, _ := planJob(t, tt.job)
			j.Revision = tt.job.Revision
			max := tt.maxActive
			if max == 0 {
				max = 100
			}
			plan := planAll(t, j, tt.st, tt.active, t0.Add(tt.now), cals, max)
			if got := runTimes(plan, api.RunPending); got != tt.wantPending {
				t.Errorf("pending %q, want %q", got, tt.wantPending)
			}
			if got := runTimes(plan, api.RunSkipped); got != tt.wantSkipped {
				t.Errorf("skipped %q, want %q", got, tt.wantSkipped)
			}
			for _, r := range plan.Runs {
				if r.Status == api.RunSkipped && r.ScheduledAt.After(t0.Add(15*time.Second)) && r.ScheduledAt.Before(t0.Add(45*time.Second)) &&
					len(tt.job.Exclude) > 0 && tt.job.Exclude[0] == "holidays" && r.Reason != `excluded by calendar "holidays"` {
					t.Errorf("run %s: reason %q, want the calendar's name", r.ID, r.Reason)
				}
			}
			if len(plan.Replace) != tt.wantReplace {
				t.Errorf("replaced %d, want %d", len(plan.Replace), tt.wantReplace)
			}
			wantNext := time.Time{}
			if tt.wantNext >= 0 {
				wantNext = t0.Add(tt.wantNext)
			}
			if tt.wantNext == 0 {
				wantNext = tt.st.Next
			}
			if !plan.State.Next.Equal(wantNext) {
				t.Errorf("next: got %v, want %v", plan.State.Next, wantNext)
			}
			if plan.State.ScheduledRuns != tt.wantRuns {
				t.Errorf("scheduled_runs: got %d, want %d", plan.State.ScheduledRuns, tt.wantRuns)
			}
		})
	}
}

func TestPlanFiresJitter(t *testing.T) {
	j, s := planJob(t, api.Job{ID: "team/report", Schedule: "@hourly", Jitter: api.Duration(10 * time.Minute), CreatedAt: t0.Add(time.Second)})
	hour := t0.Add(time.Hour)
	fire := s.FireTime(hour)
	if fire.Equal(hour) {
		t.Fatalf("offset 0 for %s: pick another ID so that the test can tell", j.ID)
	}
	st := api.JobState{}
	plan := planAll(t, j, st, nil, fire.Add(-time.Millisecond), nil, 100)
	if len(plan.Runs) != 0 || !plan.State.Next.Equal(hour) {
		t.Fatalf("before the jittered time: got runs %v and next %v, want none and %v", plan.Runs, plan.State.Next, hour)
	}
	plan = planAll(t, j, st, nil, fire, nil, 100)
	if len(plan.Runs) != 1 || plan.Runs[0].ID != store.RunID(j.ID, hour) || !plan.Runs[0].ScheduledAt.Equal(hour) {
		t.Fatalf("at the jittered time %v: got %+v, want the run of %v", fire, plan.Runs, hour)
	}
	// The grace counts from the jittered time: 4 s after it is on time
	// even for a skip policy.
	j.MisfirePolicy = api.MisfireSkip
	plan = planAll(t, j, st, nil, fire.Add(4*time.Second), nil, 100)
	if len(plan.Runs) != 1 || plan.State.Missed != 0 {
		t.Fatalf("4s after the jittered time: got %d runs, %d missed, want 1 and 0", len(plan.Runs), plan.State.Missed)
	}
}

// TestJitterFiresOnlyTheSchedulesRunIDs drives PlanFires as a partition's
// owners do, over random evaluation instants, with handoffs (a new owner
// decodes the state as stored and parses the job afresh): jitter never
// gives a run an ID a fire of the schedule could not have given, never
// fires a time before its jittered time, keeps every fire time within
// [t, t+jitter), and fires no time twice.
func TestJitterFiresOnlyTheSchedulesRunIDs(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		spec := rapid.SampledFrom([]string{"@every 7s", "*/2 * * * *", "@hourly", "*/5 * * * * *"}).Draw(rt, "spec")
		jitter := time.Duration(rapid.Int64Range(1, int64(3*time.Hour)).Draw(rt, "jitter"))
		id := fmt.Sprintf("job-%d", rapid.IntRange(0, 1000).Draw(rt, "id"))
		policy := rapid.SampledFrom([]api.MisfirePolicy{api.MisfireRunOnce, api.MisfireSkip, api.MisfireRunAll}).Draw(rt, "misfire")
		j, _ := planJob(t, api.Job{ID: id, Schedule: spec, Jitter: api.Duration(jitter), MisfirePolicy: policy})
		plain, err := schedule.Parse(spec, "UTC")
		if err != nil {
			rt.Fatal(err)
		}
		var st api.JobState
		now := t0
		seen := map[string]bool{}
		for step := range rapid.IntRange(1, 40).Draw(rt, "steps") {
			now = now.Add(time.Duration(rapid.Int64Range(0, int64(20*time.Minute)).Draw(rt, fmt.Sprint("gap", step))))
			plan := planAll(rt, j, st, nil, now, nil, 100)
			s, _ := j.ParseSchedule()
			for _, r := range plan.Runs {
				t := r.ScheduledAt
				if plain.Next(t.Add(-time.Nanosecond)) != t || r.ID != store.RunID(id, t) {
					rt.Fatalf("run %s: %v is not a time of %q", r.ID, t, spec)
				}
				if ft := s.FireTime(t); ft.Before(t) || !ft.Before(t.Add(jitter)) || ft.After(now) {
					rt.Fatalf("run %s fires at %v, evaluated at %v: want within [t, t+%v) and not after now", r.ID, ft, now, jitter)
				}
				if seen[r.ID] {
					rt.Fatalf("run %s fired twice", r.ID)
				}
				seen[r.ID] = true
			}
			b, _ := json.Marshal(plan.State) // the handoff: a new owner reads the state
			st = api.JobState{}
			if err := json.Unmarshal(b, &st); err != nil {
				rt.Fatal(err)
			}
		}
	})
}

func TestCountOutcome(t *testing.T) {
	now := t0.Add(time.Hour)
	dead := api.Run{ID: "j@1", Status: api.RunDead, Attempts: []api.Attempt{{Attempt: 1, Error: "exit status 3"}}}
	lost := api.Run{ID: "j@2", Status: api.RunDead}
	ok := api.Run{ID: "j@3", Status: api.RunSucceeded}
	skipped := api.Run{ID: "j@4", Status: api.RunSkipped}
	tests := []struct {
		name      string
		job       api.Job
		st        api.JobState
		run       api.Run
		wantFails int
		wantPause bool
	}{
		{name: "not configured: no count", job: api.Job{}, st: api.JobState{Failures: 0}, run: dead},
		{name: "one dead", job: api.Job{PauseAfterFailures: 3}, run: dead, wantFails: 1},
		{name: "the third dead pauses", job: api.Job{PauseAfterFailures: 3, Revision: 7}, st: api.JobState{Failures: 2}, run: dead, wantFails: 3, wantPause: true},
		{name: "a lost last attempt counts", job: api.Job{PauseAfterFailures: 1, Revision: 7}, run: lost, wantFails: 1, wantPause: true},
		{name: "a success resets", job: api.Job{PauseAfterFailures: 3}, st: api.JobState{Failures: 2}, run: ok},
		{name: "a skipped run changes nothing", job: api.Job{PauseAfterFailures: 3}, st: api.JobState{Failures: 2}, run: skipped, wantFails: 2},
		{name: "paused already: counted, not paused again", job: api.Job{PauseAfterFailures: 1, Revision: 7}, st: api.JobState{Failures: 1, Pause: &api.AutoPause{Revision: 7}}, run: dead, wantFails: 2},
		{name: "paused by hand: not paused again", job: api.Job{PauseAfterFailures: 1, Paused: true}, run: dead, wantFails: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, pause := dispatch.CountOutcome(&tt.job, tt.st, tt.run, now)
			if got.Failures != tt.wantFails || pause != tt.wantPause {
				t.Fatalf("got failures %d pause %v, want %d %v", got.Failures, pause, tt.wantFails, tt.wantPause)
			}
			if pause && !got.AutoPaused(tt.job.Revision) {
				t.Fatalf("pause %v but AutoPaused %v", pause, got.AutoPaused(tt.job.Revision))
			}
			if pause && (!strings.Contains(got.Pause.Reason, tt.run.ID) || !got.Pause.At.Equal(now)) {
				t.Errorf("pause %+v: want the run's ID in the reason and the time", got.Pause)
			}
		})
	}
	t.Run("a resume ends the pause and the count", func(t *testing.T) {
		j, _ := planJob(t, api.Job{ID: "j", Schedule: "@every 10s", PauseAfterFailures: 1})
		j.Revision = 8 // written after the pause
		st := api.JobState{Last: t0, Failures: 4, Pause: &api.AutoPause{Reason: "x", Revision: 7}}
		plan := planAll(t, j, st, nil, t0.Add(10*time.Second), nil, 100)
		if plan.State.Pause != nil || plan.State.Failures != 0 || len(plan.Runs) != 1 {
			t.Fatalf("got pause %v, failures %d, %d runs; want none, 0, 1", plan.State.Pause, plan.State.Failures, len(plan.Runs))
		}
	})
}
