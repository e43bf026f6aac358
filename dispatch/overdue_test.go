package dispatch_test

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/jobfleet/jobfleet/api"
	"github.com/jobfleet/jobfleet/dispatch"
	"github.com/jobfleet/jobfleet/internal/testkit/metrictest"
	"github.com/jobfleet/jobfleet/store"
)

// overdueNotice decodes an "overdue" notification's document.
func overdueNotice(t *testing.T, o store.Outbox) api.OverdueNotice {
	t.Helper()
	var n api.OverdueNotice
	if err := json.Unmarshal(o.Run, &n); err != nil {
		t.Fatalf("notification %s: %v: %s", o.Event, err, o.Run)
	}
	if o.Event != api.NotifyOverdue || n.Event != api.NotifyOverdue {
		t.Fatalf("notification %+v (%+v), want an overdue one", o, n)
	}
	return n
}

// TestOverdueNotifiesOncePerEpisode: a job none of whose runs succeeds
// within its expect_success_within is recorded overdue and notified
// once; the owner that takes its partition over does not notify it again;
// a success ends the episode, and the next lapse is a new one, notified
// again. jobfleet_jobs_overdue counts the jobs overdue now,
// jobfleet_jobs_overdue_total the episodes begun.
func TestOverdueNotifiesOncePerEpisode(t *testing.T) {
	h := newHarness(t)
	s1 := &recordingSender{}
	h.withSender(s1)
	reg := prometheus.NewRegistry()
	metrics := dispatch.NewMetrics(reg)
	withNotify := h.configure
	configure := func(c *dispatch.Config) {
		withNotify(c)
		c.Metrics = metrics
	}
	h.configure = configure
	h.start("m1")
	j := h.create(api.Job{ID: "nightly", Schedule: "@every 1h", ExpectSuccessWithin: api.Duration(90 * time.Minute),
		Notify: []api.Notification{{On: []api.RunStatus{api.NotifyOverdue}, URL: "https://hooks.example/overdue"}}})
	deadline := t0.Add(90 * time.Minute) // created at t0, never succeeded
	h.advanceTo(deadline.Add(-time.Second))
	h.waitRuns(j.ID, 1)
	h.parkedBoth()
	if n := len(s1.snapshot()); n != 0 {
		t.Fatalf("%d notifications before the deadline, want none", n)
	}
	if st := h.job(j.ID).State; st.Overdue != nil {
		t.Fatalf("state %+v before the deadline: want not overdue", st)
	}
	h.clock.Advance(time.Second)
	got := waitTries(t, s1, 1)
	if n := overdueNotice(t, got[0]); n.JobID != j.ID || !n.Since.Equal(deadline) || n.ExpectSuccessWithin != j.ExpectSuccessWithin || !n.LastSucceededAt.IsZero() {
		t.Fatalf("notice %+v: want job %s overdue since %v, within 1h30m, no success", n, j.ID, deadline)
	}
	st := h.waitJob(j.ID, func(j api.Job) bool { return j.State != nil && j.State.Overdue != nil }).State
	if !st.Overdue.Since.Equal(deadline) {
		t.Fatalf("overdue %+v, want since %v", st.Overdue, deadline)
	}
	if g, c := metrictest.Value(t, reg, "jobfleet_jobs_overdue"), metrictest.Value(t, reg, "jobfleet_jobs_overdue_total"); g != 1 || c != 1 {
		t.Fatalf("jobfleet_jobs_overdue %v, jobfleet_jobs_overdue_total %v: want 1 and 1", g, c)
	}

	// A handoff: the next owner reads the episode from the state.
	h.waitOutboxEmpty()
	h.stop()
	s2 := &recordingSender{}
	h.withSender(s2)
	withNotify = h.configure
	h.configure = configure
	h.start("m2")
	for range 3 {
		h.parkedBoth()
		h.clock.Advance(10 * time.Minute)
	}
	h.parkedBoth()
	if n := len(s1.snapshot()) + len(s2.snapshot()); n != 1 {
		t.Fatalf("%d overdue notifications after a handoff, want the 1 of the episode", n)
	}
	if g, c := metrictest.Value(t, reg, "jobfleet_jobs_overdue"), metrictest.Value(t, reg, "jobfleet_jobs_overdue_total"); g != 1 || c != 1 {
		t.Fatalf("after the handoff: jobfleet_jobs_overdue %v, jobfleet_jobs_overdue_total %v: want 1 and 1", g, c)
	}

	// A success ends the episode.
	a := h.poll("w1", 1)[0]
	if resp, err := h.complete(a, "w1", true, ""); err != nil || resp.Status != api.RunSucceeded {
		t.Fatalf("complete: %+v %v", resp, err)
	}
	succeeded := h.clock.Now()
	st = h.waitJob(j.ID, func(j api.Job) bool { return j.State != nil && j.State.Overdue == nil }).State
	if !st.LastSucceededAt.Equal(succeeded) {
		t.Fatalf("state %+v: want last_succeeded_at %v", st, succeeded)
	}
	if g := metrictest.Value(t, reg, "jobfleet_jobs_overdue"); g != 0 {
		t.Fatalf("jobfleet_jobs_overdue %v after a success, want 0", g)
	}

	// The next lapse is a new episode.
	next := succeeded.Add(90 * time.Minute)
	h.advanceTo(next.Add(-time.Second))
	h.parkedBoth()
	if n := len(s2.snapshot()); n != 0 {
		t.Fatalf("%d notifications within the bound after the success, want none", n)
	}
	h.clock.Advance(time.Second)
	got = waitTries(t, s2, 1)
	if n := overdueNotice(t, got[0]); !n.Since.Equal(next) || !n.LastSucceededAt.Equal(succeeded) {
		t.Fatalf("notice %+v: want overdue since %v, last success %v", n, next, succeeded)
	}
	h.waitJob(j.ID, func(j api.Job) bool {
		return j.State != nil && j.State.Overdue != nil && j.State.Overdue.Since.Equal(next)
	})
	if c := metrictest.Value(t, reg, "jobfleet_jobs_overdue_total"); c != 2 {
		t.Fatalf("jobfleet_jobs_overdue_total %v, want 2 episodes", c)
	}
}

// TestPausedJobIsNotOverdue: a job paused by hand is never overdue,
// however long it waits; pausing an overdue job ends its episode; its
// resume starts the wait afresh, from the resume.
func TestPausedJobIsNotOverdue(t *testing.T) {
	h := newHarness(t)
	s := &recordingSender{}
	h.withSender(s)
	h.start("m1")
	j := h.create(api.Job{ID: "held", Schedule: "@every 1h", ExpectSuccessWithin: api.Duration(90 * time.Minute),
		Notify: []api.Notification{{On: []api.RunStatus{api.NotifyOverdue}, URL: "https://hooks.example/overdue"}}})
	h.advanceTo(t0.Add(90 * time.Minute))
	waitTries(t, s, 1)
	h.waitJob(j.ID, func(j api.Job) bool { return j.State != nil && j.State.Overdue != nil })

	h.parkedBoth()
	h.pause(j.ID)
	h.waitJob(j.ID, func(j api.Job) bool { return j.Paused && j.State != nil && j.State.Overdue == nil })
	for range 4 {
		h.parkedBoth()
		h.clock.Advance(time.Hour)
	}
	h.parkedBoth()
	if n := len(s.snapshot()); n != 1 {
		t.Fatalf("%d notifications while paused, want only the one before", n)
	}

	h.resume(j.ID)
	resumed := h.clock.Now()
	h.waitJob(j.ID, func(j api.Job) bool { return !j.Paused })
	h.advanceTo(resumed.Add(90*time.Minute - time.Second))
	h.parkedBoth()
	if n := len(s.snapshot()); n != 1 {
		t.Fatalf("%d notifications within the bound after the resume, want none new", n)
	}
	h.clock.Advance(time.Second)
	got := waitTries(t, s, 2)
	if n := overdueNotice(t, got[1]); !n.Since.Equal(resumed.Add(90 * time.Minute)) {
		t.Fatalf("notice %+v: want overdue since the resume plus the bound, %v", n, resumed.Add(90*time.Minute))
	}
}

// TestOverdueAt: the rule of when a job is overdue.
func TestOverdueAt(t *testing.T) {
	within := api.Duration(time.Hour)
	created, edited, succeeded, resumed := t0, t0.Add(time.Minute), t0.Add(2*time.Minute), t0.Add(3*time.Minute)
	tests := []struct {
		name    string
		job     api.Job
		state   api.JobState
		resumed time.Time
		want    time.Time
	}{
		{"no bound", api.Job{CreatedAt: created}, api.JobState{}, time.Time{}, time.Time{}},
		{"never succeeded: from its creation", api.Job{ExpectSuccessWithin: within, CreatedAt: created, UpdatedAt: created}, api.JobState{}, time.Time{}, created.Add(time.Hour)},
		{"never succeeded: from its last write", api.Job{ExpectSuccessWithin: within, CreatedAt: created, UpdatedAt: edited}, api.JobState{}, time.Time{}, edited.Add(time.Hour)},
		{"from its last success, not a later write", api.Job{ExpectSuccessWithin: within, CreatedAt: created, UpdatedAt: resumed}, api.JobState{LastSucceededAt: succeeded}, time.Time{}, succeeded.Add(time.Hour)},
		{"from a later resume", api.Job{ExpectSuccessWithin: within, CreatedAt: created, UpdatedAt: created}, api.JobState{LastSucceededAt: succeeded}, resumed, resumed.Add(time.Hour)},
		{"paused by hand: never", api.Job{ExpectSuccessWithin: within, Paused: true, CreatedAt: created}, api.JobState{}, time.Time{}, time.Time{}},
		{"paused by its owner: still", api.Job{ExpectSuccessWithin: within, CreatedAt: created, UpdatedAt: created, Revision: 7}, api.JobState{Pause: &api.AutoPause{Revision: 7}}, time.Time{}, created.Add(time.Hour)},
		{"completed: never", api.Job{ExpectSuccessWithin: within, CreatedAt: created}, api.JobState{FinishedAt: succeeded}, time.Time{}, time.Time{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := dispatch.OverdueAt(&tt.job, tt.state, tt.resumed); !got.Equal(tt.want) {
				t.Errorf("OverdueAt = %v, want %v", got, tt.want)
			}
		})
	}
}

// TestNextOverdue: an episode begins once, at its deadline, holds while
// it covers the deadline, and ends when the deadline moves past it.
func TestNextOverdue(t *testing.T) {
	at := t0.Add(time.Hour)
	held := &api.Overdue{Since: at, NotifiedAt: at}
	tests := []struct {
		name      string
		st        api.JobState
		at, now   time.Time
		want      *api.Overdue
		wantBegun bool
	}{
		{"never overdue", api.JobState{}, time.Time{}, at, nil, false},
		{"before the deadline", api.JobState{}, at, at.Add(-time.Millisecond), nil, false},
		{"at the deadline: begins", api.JobState{}, at, at, &api.Overdue{Since: at, NotifiedAt: at}, true},
		{"recorded: holds", api.JobState{Overdue: held}, at, at.Add(time.Hour), held, false},
		{"bound shrunk: holds", api.JobState{Overdue: held}, at.Add(-time.Minute), at.Add(time.Hour), held, false},
		{"deadline moved, not reached: ends", api.JobState{Overdue: held}, at.Add(2 * time.Hour), at.Add(time.Hour), nil, false},
		{"deadline moved and reached: a new one", api.JobState{Overdue: held}, at.Add(time.Hour), at.Add(time.Hour), &api.Overdue{Since: at.Add(time.Hour), NotifiedAt: at.Add(time.Hour)}, true},
		{"paused: ends", api.JobState{Overdue: held}, time.Time{}, at.Add(time.Hour), nil, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, begun := dispatch.NextOverdue(tt.st, tt.at, tt.now)
			if begun != tt.wantBegun || (got == nil) != (tt.want == nil) || got != nil && *got != *tt.want {
				t.Errorf("NextOverdue = %+v, %v; want %+v, %v", got, begun, tt.want, tt.wantBegun)
			}
		})
	}
}
