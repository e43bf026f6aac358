package dispatch_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap/zaptest"

	"github.com/jobfleet/jobfleet/api"
	"github.com/jobfleet/jobfleet/dispatch"
	"github.com/jobfleet/jobfleet/store"
)

// advanceTo moves the controlled clock to at once the scheduler waits.
func (h *harness) advanceTo(at time.Time) {
	h.t.Helper()
	h.parked()
	if d := at.Sub(h.clock.Now()); d > 0 {
		h.clock.Advance(d)
	}
}

// withCalendars makes the harness's next start read the namespace's
// calendars through a CalendarCache, run until the dispatcher stops,
// beside what configure already does.
func (h *harness) withCalendars() *dispatch.CalendarCache {
	h.t.Helper()
	cache, err := dispatch.NewCalendarCache(h.client, h.ns, zaptest.NewLogger(h.t).Named("calendars"))
	if err != nil {
		h.t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = cache.Run(ctx) }()
	h.t.Cleanup(func() { cancel(); <-done })
	prev := h.configure
	h.configure = func(c *dispatch.Config) {
		if prev != nil {
			prev(c)
		}
		c.Calendars = cache
	}
	return cache
}

// job reads job id as the API does.
func (h *harness) job(id string) api.Job {
	h.t.Helper()
	j, err := h.store.Get(context.Background(), id)
	if err != nil {
		h.t.Fatal(err)
	}
	return j
}

// waitJob waits until job id, as the API reads it, satisfies cond.
func (h *harness) waitJob(id string, cond func(api.Job) bool) api.Job {
	h.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		j, err := h.store.Get(context.Background(), id)
		if err == nil && cond(j) {
			return j
		}
		if time.Now().After(deadline) {
			h.t.Fatalf("job %s: condition not met after 10s (last %+v, state %+v, %v)", id, j, j.State, err)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// firesAfterEdit checks a job's fires after an edit stored at revision
// rev: once the owner has read the edit the job has no run (none of the
// times before it fired; why says why none may), and d later its one run
// is the one scheduled at at.
func (h *harness) firesAfterEdit(id string, rev int64, why string, d time.Duration, at time.Time) {
	h.t.Helper()
	h.waitJob(id, func(j api.Job) bool { return j.State != nil && j.State.SpecRevision == rev })
	if runs, _ := h.store.Runs(context.Background(), id, 10); len(runs) != 0 {
		h.t.Fatalf("after the edit: runs %v, want none (%s)", runs, why)
	}
	h.advance(d)
	if runs := h.waitRuns(id, 1); len(runs) != 1 || !runs[0].ScheduledAt.Equal(at) {
		h.t.Fatalf("runs %v, want one, at %v", runs, at)
	}
}

// TestJitterAndMaxFiresSurviveHandoffs: a jittered job with max_fires
// fires each time at its jittered moment, under the scheduled time's run
// ID, on whichever member owns it, the new owner taking the offset and the
// count over from etcd; after max_fires it fires nothing more, completes
// once its runs are final, and is deleted after its delete_after.
func TestJitterAndMaxFiresSurviveHandoffs(t *testing.T) {
	h := newHarness(t)
	h.start("m1")
	j := h.create(api.Job{ID: "team/jittered", Schedule: "@every 1m", Jitter: api.Duration(40 * time.Second), MaxFires: 3, DeleteAfter: "1h"})
	sched, err := j.ParseSchedule()
	if err != nil {
		t.Fatal(err)
	}
	jittered := 0
	for i, member := range []string{"m1", "m2", "m3"} {
		if i > 0 {
			h.stop()
			h.start(member) // the next time is taken over from etcd
		}
		at := t0.Add(time.Duration(i+1) * time.Minute)
		fire := sched.FireTime(at)
		if !fire.Equal(at) {
			jittered++
		}
		if fire.After(at) {
			h.advanceTo(fire.Add(-time.Millisecond))
			h.parked()
			if runs, _ := h.store.Runs(context.Background(), j.ID, 10); len(runs) != i {
				t.Fatalf("%s: %d runs a millisecond before the jittered time %v of %v, want %d", member, len(runs), fire, at, i)
			}
		}
		h.advanceTo(fire)
		runs := h.waitRuns(j.ID, i+1)
		r := runs[0]
		if r.ID != store.RunID(j.ID, at) || !r.ScheduledAt.Equal(at) || !r.FiredAt.Equal(fire) || r.Owner != member {
			t.Fatalf("fire %d: got %s scheduled %v fired %v by %s, want %s fired at %v by %s", i+1, r.ID, r.ScheduledAt, r.FiredAt, r.Owner, store.RunID(j.ID, at), fire, member)
		}
		if st := h.job(j.ID).State; st == nil || st.ScheduledRuns != int64(i+1) {
			t.Fatalf("fire %d: state %+v, want scheduled_runs %d", i+1, st, i+1)
		}
	}
	if jittered == 0 {
		t.Fatal("no fire was jittered: the test tells nothing")
	}
	st := h.job(j.ID).State
	if !st.Next.IsZero() {
		t.Fatalf("after max_fires: next %v, want none", st.Next)
	}
	// Another handoff: nothing more fires.
	h.stop()
	h.start("m4")
	h.advance(10 * time.Minute)
	h.parked()
	if runs, _ := h.store.Runs(context.Background(), j.ID, 10); len(runs) != 3 {
		t.Fatalf("after max_fires and a handoff: %d runs, want 3", len(runs))
	}
	if got := h.job(j.ID).Status; got != api.JobActive {
		t.Fatalf("with runs pending: status %q, want active", got)
	}
	// Its runs end: it completes, and goes after delete_after.
	for range 3 {
		a := h.poll("w1", 1)[0]
		if _, err := h.complete(a, "w1", true, ""); err != nil {
			t.Fatal(err)
		}
	}
	done := h.waitJob(j.ID, func(j api.Job) bool { return j.Status == api.JobCompleted })
	h.advanceTo(done.State.FinishedAt.Add(time.Hour))
	deadline := time.Now().Add(10 * time.Second)
	for {
		if _, err := h.store.Get(context.Background(), j.ID); err != nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("completed job not deleted after its delete_after")
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestNotAfterCompletes: a job past its not_after completes and reports
// it.
func TestNotAfterCompletes(t *testing.T) {
	h := newHarness(t)
	h.start("m1")
	j := h.create(api.Job{ID: "window", Schedule: "@every 1m", NotBefore: ptr(t0.Add(90 * time.Second)), NotAfter: ptr(t0.Add(3 * time.Minute)), DeleteAfter: "never"})
	h.advance(time.Minute)
	h.parked()
	if runs, _ := h.store.Runs(context.Background(), j.ID, 10); len(runs) != 0 {
		t.Fatalf("before not_before: %d runs, want none", len(runs))
	}
	h.advance(time.Minute)
	h.waitRuns(j.ID, 1)
	h.advance(time.Minute)
	runs := h.waitRuns(j.ID, 2)
	if !runs[0].ScheduledAt.Equal(t0.Add(3*time.Minute)) || !runs[1].ScheduledAt.Equal(t0.Add(2*time.Minute)) {
		t.Fatalf("runs %v, %v: want the times of the window", runs[0].ScheduledAt, runs[1].ScheduledAt)
	}
	for range 2 {
		a := h.poll("w1", 1)[0]
		if _, err := h.complete(a, "w1", true, ""); err != nil {
			t.Fatal(err)
		}
	}
	h.waitJob(j.ID, func(j api.Job) bool { return j.Status == api.JobCompleted })
	h.advance(24 * time.Hour)
	h.parked()
	if got := h.job(j.ID); got.Status != api.JobCompleted { // "never": kept
		t.Fatalf("status %q, want completed and kept", got.Status)
	}
}

// TestPauseAfterFailures: runs that end dead in a row pause the job at the
// threshold, durably (a new owner keeps it paused), with the reason on
// the job and a "paused" notification; resuming clears the count and the
// job fires again.
func TestPauseAfterFailures(t *testing.T) {
	h := newHarness(t)
	s := &recordingSender{}
	h.withSender(s)
	h.start("m1")
	j := h.create(api.Job{ID: "fragile", Schedule: "@every 1m", PauseAfterFailures: 2,
		Notify: []api.Notification{{On: []api.RunStatus{api.NotifyPaused}, URL: "https://hooks.example/paused"}}})
	step := func() {
		h.parkedBoth()
		h.clock.Advance(time.Minute)
	}
	step()
	h.failAttempt("w1")
	h.waitJob(j.ID, func(j api.Job) bool { return j.State != nil && j.State.Failures == 1 })
	step()
	a := h.poll("w1", 1)[0]
	if _, err := h.complete(a, "w1", true, ""); err != nil {
		t.Fatal(err)
	}
	h.waitJob(j.ID, func(j api.Job) bool { return j.State != nil && j.State.Failures == 0 })
	step()
	h.failAttempt("w1")
	step()
	last := h.failAttempt("w1")
	paused := h.waitJob(j.ID, func(j api.Job) bool { return j.Paused })
	if paused.Status != api.JobPaused || !strings.Contains(paused.State.PausedReason(paused.Revision), last.RunID) || paused.State.Failures != 2 {
		t.Fatalf("paused job: status %q, state %+v, want paused naming run %s", paused.Status, paused.State, last.RunID)
	}
	tries := waitTries(t, s, 1)
	var r api.Run
	if err := json.Unmarshal(tries[0].Run, &r); err != nil || tries[0].Event != api.NotifyPaused || tries[0].RunID != last.RunID || r.ID != last.RunID {
		t.Fatalf("notification %+v (%v): want paused, with run %s", tries[0], err, last.RunID)
	}
	// Paused through a handoff.
	h.stop()
	h.start("m2")
	h.parkedBoth()
	h.clock.Advance(5 * time.Minute)
	h.parkedBoth()
	runs, _ := h.store.Runs(context.Background(), j.ID, 100)
	if len(runs) != 4 {
		t.Fatalf("paused: %d runs, want 4", len(runs))
	}
	// Resumed: the count is cleared, and it fires again from the resume.
	resumed, err := h.store.SetPaused(context.Background(), j.ID, false)
	if err != nil || resumed.Paused {
		t.Fatalf("resume: %+v, %v", resumed, err)
	}
	h.waitJob(j.ID, func(j api.Job) bool { return j.State != nil && j.State.SpecRevision == resumed.Revision })
	if got := h.job(j.ID); got.Paused || got.State.Failures != 0 || got.State.Pause != nil {
		t.Fatalf("resumed: paused %v, state %+v; want the count and the pause cleared", got.Paused, got.State)
	}
	step()
	h.waitRuns(j.ID, 5)
}

// TestCalendarsExcludeTimes: a time inside a calendar the job excludes is
// recorded skipped, naming the calendar; the owner follows calendars as
// they change; a "skipped" notification tells of it.
func TestCalendarsExcludeTimes(t *testing.T) {
	h := newHarness(t)
	s := &recordingSender{}
	h.withSender(s)
	cache := h.withCalendars()
	ctx := context.Background()
	first, _, err := h.store.PutCalendar(ctx, api.Calendar{Name: "maintenance", Ranges: []api.DateRange{{From: "2026-06-01T00:01", To: "2026-06-01T00:02"}}})
	if err != nil {
		t.Fatal(err)
	}
	if err := cache.WaitRevision(ctx, first.Revision); err != nil {
		t.Fatal(err)
	}
	h.start("m1")
	j := h.create(api.Job{ID: "nightly", Schedule: "@every 1m", Exclude: []string{"maintenance"},
		Notify: []api.Notification{{On: []api.RunStatus{api.RunSkipped}, URL: "https://hooks.example/skipped"}}})
	h.parkedBoth()
	h.clock.Advance(time.Minute)
	runs := h.waitRuns(j.ID, 1)
	if runs[0].Status != api.RunSkipped || runs[0].Reason != `excluded by calendar "maintenance"` {
		t.Fatalf("run at 00:01: %s %q, want skipped by the calendar", runs[0].Status, runs[0].Reason)
	}
	if tries := waitTries(t, s, 1); tries[0].Event != api.RunSkipped || tries[0].RunID != runs[0].ID {
		t.Fatalf("notification %+v, want skipped for %s", tries[0], runs[0].ID)
	}
	h.parkedBoth()
	h.clock.Advance(time.Minute)
	runs = h.waitRuns(j.ID, 2)
	if runs[0].Status != api.RunPending {
		t.Fatalf("run at 00:02: %s, want pending", runs[0].Status)
	}
	// A calendar changed: the owner follows it.
	stored, _, err := h.store.PutCalendar(ctx, api.Calendar{Name: "maintenance", Dates: []string{"2026-06-01"}})
	if err != nil {
		t.Fatal(err)
	}
	if err := cache.WaitRevision(ctx, stored.Revision); err != nil {
		t.Fatal(err)
	}
	h.parkedBoth()
	h.clock.Advance(time.Minute)
	runs = h.waitRuns(j.ID, 3)
	if runs[0].Status != api.RunSkipped {
		t.Fatalf("run at 00:03: %s, want skipped by the changed calendar", runs[0].Status)
	}
	// Deleted: it excludes nothing.
	if err := h.store.DeleteCalendar(ctx, "maintenance"); err != nil {
		t.Fatal(err)
	}
	// Waited for by what the cache holds: etcd's current revision may be
	// a later write of the scheduler's, which the calendars' watch never
	// sees.
	h.waitFor("the cache without the deleted calendar", func() bool {
		cs, ok := cache.Calendars()
		return ok && cs["maintenance"] == nil
	})
	h.parkedBoth()
	h.clock.Advance(time.Minute)
	runs = h.waitRuns(j.ID, 4)
	if runs[0].Status != api.RunPending {
		t.Fatalf("run at 00:04: %s, want pending", runs[0].Status)
	}
}

// TestTriggerWithPayload: a trigger's payload is recorded in its run and
// handed to its attempt instead of the job's.
func TestTriggerWithPayload(t *testing.T) {
	h := newHarness(t)
	h.start("m1")
	h.create(api.Job{ID: "param", Schedule: "@every 1h", Payload: json.RawMessage(`{"day":"today"}`)})
	runID, err := h.store.TriggerWith(context.Background(), "param", json.RawMessage(`{ "day": "2026-05-31" }`))
	if err != nil {
		t.Fatal(err)
	}
	a := h.poll("w1", 1)[0]
	if a.RunID != runID || string(a.Payload) != `{"day":"2026-05-31"}` {
		t.Fatalf("attempt of %s with payload %s, want %s with the trigger's", a.RunID, a.Payload, runID)
	}
	r := h.waitRun(runID, func(api.Run) bool { return true })
	if string(r.Payload) != `{"day":"2026-05-31"}` {
		t.Fatalf("run payload %s, want the trigger's", r.Payload)
	}
	// A trigger without one takes the job's.
	if _, err := h.complete(a, "w1", true, ""); err != nil {
		t.Fatal(err)
	}
	h.clock.Advance(time.Second) // another millisecond for the next trigger's run
	if _, err := h.store.Trigger(context.Background(), "param"); err != nil {
		t.Fatal(err)
	}
	if b := h.poll("w1", 1)[0]; string(b.Payload) != `{"day":"today"}` {
		t.Fatalf("plain trigger's payload %s, want the job's", b.Payload)
	}
	// Bad payloads are refused, naming the field.
	for _, p := range []string{`{"a":`, `{"secret_env":""}`, `"` + strings.Repeat("x", store.MaxTriggerPayloadBytes) + `"`} {
		_, err := h.store.TriggerWith(context.Background(), "param", json.RawMessage(p))
		var fe *api.FieldError
		if !errors.As(err, &fe) || fe.Field != "payload" {
			t.Errorf("payload %.20s: got %v, want an error about payload", p, err)
		}
	}
}

// TestEditPathsNeverFireThePast: over every way a job is changed (a PUT
// replacing it, with or without the revision it read, as jobfleet job
// edit sends it; a batch apply, as jobfleet job apply; a resume), its
// owner fires no time of the new definition from before the change, and
// fires the first one after it.
func TestEditPathsNeverFireThePast(t *testing.T) {
	ctx := context.Background()
	paths := []struct {
		name string
		edit func(h *harness, j api.Job) api.Job // at t0+35m
	}{
		{"put", func(h *harness, j api.Job) api.Job {
			j.Schedule, j.Revision = "*/10 * * * *", 0
			stored, _, err := h.store.Put(ctx, j)
			if err != nil {
				h.t.Fatal(err)
			}
			return stored
		}},
		{"put at the revision read (job edit)", func(h *harness, j api.Job) api.Job {
			j.Schedule = "*/10 * * * *"
			stored, _, err := h.store.Put(ctx, j)
			if err != nil {
				h.t.Fatal(err)
			}
			return stored
		}},
		{"time zone (put)", func(h *harness, j api.Job) api.Job {
			j.Schedule, j.Timezone, j.Revision = "*/10 * * * *", "Asia/Kolkata", 0 // +05:30: the same times
			stored, _, err := h.store.Put(ctx, j)
			if err != nil {
				h.t.Fatal(err)
			}
			return stored
		}},
		{"batch apply (job apply)", func(h *harness, j api.Job) api.Job {
			j.Schedule, j.Revision = "*/10 * * * *", 0
			res, err := h.store.WriteBatch(ctx, []store.BatchItem{{Job: j}}, store.BatchApply)
			if err != nil || res[0].Err != nil {
				h.t.Fatalf("batch: %v %+v", err, res)
			}
			return res[0].Job
		}},
		{"resume", func(h *harness, j api.Job) api.Job {
			stored, err := h.store.SetPaused(ctx, j.ID, false)
			if err != nil {
				h.t.Fatal(err)
			}
			return stored
		}},
		{"resume while the partition has no owner", func(h *harness, j api.Job) api.Job {
			h.stop()
			stored, err := h.store.SetPaused(ctx, j.ID, false)
			if err != nil {
				h.t.Fatal(err)
			}
			h.start("m2")
			return stored
		}},
	}
	for _, p := range paths {
		t.Run(p.name, func(t *testing.T) {
			h := newHarness(t)
			h.start("m1")
			job := api.Job{ID: "edited", Schedule: "@every 1h", MisfirePolicy: api.MisfireRunAll}
			var j api.Job
			if strings.HasPrefix(p.name, "resume") {
				job.Schedule, job.Paused = "*/10 * * * *", true
				job.Executor = api.Executor{Type: "http", URL: "http://127.0.0.1:9/hook"}
				var err error
				if j, err = h.store.Create(ctx, job); err != nil { // paused: its owner records no state
					t.Fatal(err)
				}
			} else {
				j = h.create(job)
			}
			h.advance(35 * time.Minute) // 10, 20 and 30 of the new schedule pass
			h.parked()
			stored := p.edit(h, h.job(j.ID))
			if !stored.UpdatedAt.Equal(t0.Add(35 * time.Minute)) {
				t.Fatalf("updated_at %v, want the time of the change", stored.UpdatedAt)
			}
			h.firesAfterEdit(j.ID, stored.Revision, "times before the change", 5*time.Minute, t0.Add(40*time.Minute))
		})
	}
}

// TestPayloadEditKeepsTheMisfires: an edit that leaves a job's timing as
// it was is no change of its times: the times the fleet missed before it
// are still the misfire policy's (run_all fires them all).
func TestPayloadEditKeepsTheMisfires(t *testing.T) {
	ctx := context.Background()
	h := newHarness(t)
	h.start("m1")
	j := h.create(api.Job{ID: "kept", Schedule: "*/10 * * * *", MisfirePolicy: api.MisfireRunAll})
	h.parked()
	h.stop() // the partition has no owner for 35 minutes
	h.clock.Advance(35 * time.Minute)
	cur := h.job(j.ID)
	cur.Payload, cur.Revision = json.RawMessage(`{"v":2}`), 0
	stored, _, err := h.store.Put(ctx, cur)
	if err != nil {
		t.Fatal(err)
	}
	h.start("m2")
	h.waitJob(j.ID, func(j api.Job) bool { return j.State != nil && j.State.SpecRevision == stored.Revision })
	runs := h.waitRuns(j.ID, 3)
	if len(runs) != 3 || !runs[2].ScheduledAt.Equal(t0.Add(10*time.Minute)) || !runs[0].ScheduledAt.Equal(t0.Add(30*time.Minute)) {
		t.Fatalf("runs %v, want the three times missed before the edit", runs)
	}
	if st := h.job(j.ID).State; st.Missed != 3 {
		t.Fatalf("missed %d, want 3", st.Missed)
	}
}
