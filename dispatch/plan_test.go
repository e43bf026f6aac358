package dispatch_test

import (
	"slices"
	"testing"
	"time"

	"github.com/jobfleet/jobfleet/api"

	"pgregory.net/rapid"

	"github.com/jobfleet/jobfleet/dispatch"
	"github.com/jobfleet/jobfleet/schedule"
	"github.com/jobfleet/jobfleet/store"
)

func planJob(t *testing.T, j api.Job) (api.Job, schedule.Schedule) {
	t.Helper()
	if j.Executor.Type == "" {
		j.Executor = api.Executor{Type: "http", URL: "http://127.0.0.1:9/"}
	}
	if j.CreatedAt.IsZero() {
		j.CreatedAt = t0
	}
	j.Normalize()
	if err := j.Validate(api.DefaultLimits()); err != nil {
		t.Fatal(err)
	}
	s, err := j.ParseSchedule()
	if err != nil {
		t.Fatal(err)
	}
	return j, s
}

// countPlanned counts plan's pending and skipped runs, failing the test
// for a skipped run without a reason.
func countPlanned(t *testing.T, plan dispatch.FirePlan) (pending, skipped int) {
	t.Helper()
	for _, r := range plan.Runs {
		switch r.Status {
		case api.RunPending:
			pending++
		case api.RunSkipped:
			skipped++
			if r.Reason == "" {
				t.Errorf("skipped run %s has no reason", r.ID)
			}
		}
	}
	return pending, skipped
}

func TestPlanFires(t *testing.T) {
	tests := []struct {
		name        string
		job         api.Job
		active      []string
		now         time.Duration // after t0
		wantPending int
		wantSkipped int
		wantReplace int
	}{
		{"not due yet", api.Job{ID: "a", Schedule: "@every 10s"}, nil, 5 * time.Second, 0, 0, 0},
		{"on time", api.Job{ID: "a", Schedule: "@every 10s"}, nil, 10 * time.Second, 1, 0, 0},
		{"paused", api.Job{ID: "a", Schedule: "@every 10s", Paused: true}, nil, time.Minute, 0, 0, 0},
		{"forbid while active", api.Job{ID: "a", Schedule: "@every 10s", ConcurrencyPolicy: api.ConcurrencyForbid}, []string{"a@x"}, 10 * time.Second, 0, 1, 0},
		{"forbid two due at once", api.Job{ID: "a", Schedule: "@every 1s", ConcurrencyPolicy: api.ConcurrencyForbid, MisfirePolicy: api.MisfireRunAll}, nil, 3 * time.Second, 1, 2, 0},
		{"allow while active", api.Job{ID: "a", Schedule: "@every 10s"}, []string{"a@x"}, 10 * time.Second, 1, 0, 0},
		{"replace ends active", api.Job{ID: "a", Schedule: "@every 10s", ConcurrencyPolicy: api.ConcurrencyReplace}, []string{"a@x", "a@y"}, 10 * time.Second, 1, 0, 2},
		{"one-off", api.Job{ID: "a", RunAt: ptr(t0.Add(time.Minute))}, nil, time.Hour, 1, 0, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			j, s := planJob(t, tt.job)
			plan, err := dispatch.PlanFires(&j, s, api.JobState{}, tt.active, t0.Add(tt.now), schedule.Policy{}, nil, "m1", 7)
			if err != nil {
				t.Fatal(err)
			}
			pending, skipped := countPlanned(t, plan)
			for _, r := range plan.Runs {
				if r.Owner != "m1" || r.Epoch != 7 || r.ID != store.RunID(j.ID, r.ScheduledAt) {
					t.Errorf("run %+v: want owner m1, epoch 7, derived ID", r)
				}
			}
			if pending != tt.wantPending || skipped != tt.wantSkipped || len(plan.Replace) != tt.wantReplace {
				t.Fatalf("got %d pending, %d skipped, %d replaced; want %d, %d, %d", pending, skipped, len(plan.Replace), tt.wantPending, tt.wantSkipped, tt.wantReplace)
			}
		})
	}
}

// TestPlanFiresNeverRefires checks over random sequences of evaluation
// instants that a recurring job fires each scheduled time at most once and
// never a time in the future, whatever the gaps between evaluations.
func TestPlanFiresNeverRefires(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		policy := rapid.SampledFrom([]api.MisfirePolicy{api.MisfireRunOnce, api.MisfireSkip, api.MisfireRunAll}).Draw(rt, "misfire")
		j, s := planJob(t, api.Job{ID: "p", Schedule: "*/7 * * * * *", MisfirePolicy: policy})
		var st api.JobState
		now := t0
		seen := map[time.Time]bool{}
		for range rapid.IntRange(1, 30).Draw(rt, "steps") {
			now = now.Add(time.Duration(rapid.Int64Range(0, int64(2*time.Minute)).Draw(rt, "gap")))
			plan, err := dispatch.PlanFires(&j, s, st, nil, now, schedule.Policy{}, nil, "m", 1)
			if err != nil {
				rt.Fatal(err)
			}
			for _, r := range plan.Runs {
				if seen[r.ScheduledAt] {
					rt.Fatalf("%v fired twice", r.ScheduledAt)
				}
				if r.ScheduledAt.After(now) {
					rt.Fatalf("%v fired at %v, before its time", r.ScheduledAt, now)
				}
				seen[r.ScheduledAt] = true
			}
			st = plan.State
		}
	})
}

func TestFinishAttempt(t *testing.T) {
	j, _ := planJob(t, api.Job{ID: "a", Schedule: "@hourly", Retry: api.RetryPolicy{MaxAttempts: 2, InitialBackoff: api.Duration(4 * time.Second)}})
	r := dispatch.NewRun(&j, t0, t0, "m", 1)
	r = dispatch.StartAttempt(r, "w", t0)
	r1, notBefore := dispatch.FinishAttempt(&j, r, dispatch.Outcome{Error: "boom"}, t0.Add(time.Second), 0.5)
	if r1.Status != api.RunFailed || r1.Attempts[0].Error != "boom" || r1.Attempts[0].FinishedAt.IsZero() {
		t.Fatalf("after failure 1: %+v", r1)
	}
	if want := t0.Add(time.Second + 3*time.Second); !notBefore.Equal(want) { // 4s backoff, half fixed + 0.5 of half
		t.Fatalf("retry not before %v, want %v", notBefore, want)
	}
	if len(r.Attempts[0].Error) != 0 {
		t.Fatal("FinishAttempt modified its input run")
	}
	r2 := dispatch.StartAttempt(r1, "w2", notBefore)
	r2, _ = dispatch.FinishAttempt(&j, r2, dispatch.Outcome{Error: "boom again"}, notBefore.Add(time.Second), 0)
	if r2.Status != api.RunDead || len(r2.Attempts) != 2 {
		t.Fatalf("after the last attempt: %+v, want dead with 2 attempts", r2)
	}
	ok, _ := dispatch.FinishAttempt(&j, dispatch.StartAttempt(r1, "w2", notBefore), dispatch.Outcome{Success: true}, notBefore, 0)
	if ok.Status != api.RunSucceeded {
		t.Fatalf("success: %+v", ok)
	}
}

func TestBackoff(t *testing.T) {
	p := api.RetryPolicy{InitialBackoff: api.Duration(time.Second), MaxBackoff: api.Duration(10 * time.Second)}
	rapid.Check(t, func(rt *rapid.T) {
		n := rapid.IntRange(1, 200).Draw(rt, "attempt")
		rnd := rapid.Float64Range(0, 0.999999).Draw(rt, "rnd")
		full := time.Second << min(n-1, 10)
		full = min(full, 10*time.Second)
		got := dispatch.Backoff(p, n, rnd)
		if got < full/2 || got > full {
			rt.Fatalf("Backoff(n=%d, rnd=%v) = %v, want in [%v, %v]", n, rnd, got, full/2, full)
		}
	})
}

func TestLeaseExpired(t *testing.T) {
	j, _ := planJob(t, api.Job{ID: "a", Schedule: "@hourly", Timeout: api.Duration(time.Minute)})
	r := dispatch.StartAttempt(dispatch.NewRun(&j, t0, t0, "m", 1), "w", t0)
	lease := 10 * time.Second
	tests := []struct {
		name       string
		leaseUntil time.Time
		now        time.Time
		want       bool
	}{
		{"heartbeating", t0.Add(30 * time.Second), t0.Add(25 * time.Second), false},
		{"lease ran out", t0.Add(10 * time.Second), t0.Add(11 * time.Second), true},
		{"past timeout despite heartbeats", t0.Add(2 * time.Minute), t0.Add(71 * time.Second), true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, reason := dispatch.LeaseExpired(&j, r, tt.leaseUntil, tt.now, lease)
			if got != tt.want || (got && reason == "") {
				t.Fatalf("LeaseExpired = %v, %q; want %v with a reason", got, reason, tt.want)
			}
		})
	}
	pending := dispatch.NewRun(&j, t0, t0, "m", 1)
	if got, _ := dispatch.LeaseExpired(&j, pending, t0, t0.Add(time.Hour), lease); got {
		t.Fatal("a pending run has no lease to expire")
	}

	// "timeout": "none": a week-long attempt lives as long as it heartbeats.
	none, _ := planJob(t, api.Job{ID: "b", Schedule: "@hourly", Timeout: api.NoTimeout})
	long := dispatch.StartAttempt(dispatch.NewRun(&none, t0, t0, "m", 1), "w", t0)
	week := t0.Add(7 * 24 * time.Hour)
	if got, reason := dispatch.LeaseExpired(&none, long, week.Add(lease), week, lease); got {
		t.Errorf("timeout none, heartbeating after a week: got expired (%s), want alive", reason)
	}
	if got, _ := dispatch.LeaseExpired(&none, long, week, week.Add(time.Second), lease); !got {
		t.Error("timeout none, heartbeats stopped: got alive, want the lease to expire")
	}
}

func TestCapActive(t *testing.T) {
	j, s := planJob(t, api.Job{ID: "a", Schedule: "@every 1s", MisfirePolicy: api.MisfireRunAll})
	active := []string{"a@1", "a@2", "a@3"}
	plan, err := dispatch.PlanFires(&j, s, api.JobState{}, active, t0.Add(4*time.Second), schedule.Policy{}, nil, "m", 1)
	if err != nil {
		t.Fatal(err)
	}
	dispatch.CapActive(&j, &plan, len(active), 5)
	pending, skipped := countPlanned(t, plan)
	if pending != 2 || skipped != 2 || plan.State.Fired != 2 || plan.State.Skipped != 2 {
		t.Fatalf("4 fires with 3 of 5 active: %d pending, %d skipped, state %+v; want 2 and 2", pending, skipped, plan.State)
	}
}

func TestPlanTrigger(t *testing.T) {
	at := t0.Add(90 * time.Second)
	tests := []struct {
		name        string
		job         api.Job
		active      []string
		wantStatus  api.RunStatus
		wantReplace int
	}{
		{"allow, nothing active", api.Job{ID: "a", Schedule: "@every 10s"}, nil, api.RunPending, 0},
		{"allow while active", api.Job{ID: "a", Schedule: "@every 10s"}, []string{"a@x"}, api.RunPending, 0},
		{"forbid, nothing active", api.Job{ID: "a", Schedule: "@every 10s", ConcurrencyPolicy: api.ConcurrencyForbid}, nil, api.RunPending, 0},
		{"forbid while active", api.Job{ID: "a", Schedule: "@every 10s", ConcurrencyPolicy: api.ConcurrencyForbid}, []string{"a@x"}, api.RunSkipped, 0},
		{"replace ends active", api.Job{ID: "a", Schedule: "@every 10s", ConcurrencyPolicy: api.ConcurrencyReplace}, []string{"a@x", "a@y"}, api.RunPending, 2},
		{"paused job runs", api.Job{ID: "a", Schedule: "@every 10s", Paused: true}, nil, api.RunPending, 0},
		{"one-off", api.Job{ID: "a", RunAt: ptr(t0.Add(time.Hour))}, nil, api.RunPending, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			j, _ := planJob(t, tt.job)
			st := api.JobState{Last: t0.Add(time.Minute), Next: t0.Add(70 * time.Second), SpecRevision: 4, Fired: 3, Skipped: 1}
			plan := dispatch.PlanTrigger(&j, st, tt.active, at, at.Add(time.Millisecond), "m1", 7)
			if len(plan.Runs) != 1 {
				t.Fatalf("got %d runs, want 1", len(plan.Runs))
			}
			r := plan.Runs[0]
			if r.Status != tt.wantStatus || r.ID != store.RunID("a", at) || !r.ScheduledAt.Equal(at) || r.Owner != "m1" || r.Epoch != 7 || r.Reason == "" {
				t.Fatalf("run = %+v, want %s run for %v by m1@7 with a reason", r, tt.wantStatus, at)
			}
			if len(plan.Replace) != tt.wantReplace {
				t.Fatalf("replace = %v, want %d", plan.Replace, tt.wantReplace)
			}
			want := st
			if r.Status == api.RunPending {
				want.Fired++
			} else {
				want.Skipped++
			}
			if plan.State != want {
				t.Fatalf("state = %+v, want %+v (schedule untouched, one more counted)", plan.State, want)
			}
		})
	}
}

// TestTriggersNeverExceedTheCap plans random sequences of scheduled fires
// and triggers of one job the way the partition scheduler merges them into
// one write (PlanFires, then PlanTrigger per request, each capped, merged)
// and checks: no run ID twice, the job's active runs never above the cap
// (one under replace), every run counted once as fired or skipped, and no
// run both created and replaced.
func TestTriggersNeverExceedTheCap(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		policy := rapid.SampledFrom([]api.ConcurrencyPolicy{api.ConcurrencyAllow, api.ConcurrencyForbid, api.ConcurrencyReplace}).Draw(rt, "policy")
		maxActive := rapid.IntRange(1, 8).Draw(rt, "max_active")
		j, s := planJob(t, api.Job{ID: "p", Schedule: "@every 1s", ConcurrencyPolicy: policy, MisfirePolicy: api.MisfireRunAll})
		var st api.JobState
		var active []string
		now := t0
		seen := map[string]bool{}
		for range rapid.IntRange(1, 20).Draw(rt, "writes") {
			now = now.Add(time.Duration(rapid.IntRange(0, 3000).Draw(rt, "gap_ms")) * time.Millisecond)
			plan, err := dispatch.PlanFires(&j, s, st, active, now, schedule.Policy{}, nil, "m", 1)
			if err != nil {
				rt.Fatal(err)
			}
			dispatch.CapActive(&j, &plan, len(active), maxActive)
			for i := range rapid.IntRange(0, 6).Draw(rt, "triggers") {
				after := dispatch.ActiveAfter(active, plan)
				at := now.Add(time.Duration(i) * time.Millisecond)
				if rapid.Bool().Draw(rt, "collide") {
					at = now.Truncate(time.Second) // the millisecond of a scheduled time
				}
				tp := dispatch.PlanTrigger(&j, plan.State, after, at, now, "m", 1)
				dispatch.CapActive(&j, &tp, len(after), maxActive)
				plan = dispatch.MergePlans(plan, tp)
			}
			for _, r := range plan.Runs {
				if seen[r.ID] {
					// A run ID planned again (a trigger in an earlier
					// write's millisecond) is refused by etcd's
					// create-if-absent; it must not be counted twice
					// within one write, which MergePlans ensures.
					continue
				}
				if slices.Contains(plan.Replace, r.ID) {
					rt.Fatalf("run %s both created and replaced", r.ID)
				}
				if r.Status != api.RunPending && r.Status != api.RunSkipped {
					rt.Fatalf("run %s created %s", r.ID, r.Status)
				}
			}
			ids := map[string]bool{}
			for _, r := range plan.Runs {
				if ids[r.ID] {
					rt.Fatalf("run %s twice in one write", r.ID)
				}
				ids[r.ID] = true
			}
			if got := plan.State.Fired + plan.State.Skipped - st.Fired - st.Skipped - int64(plan.Decision.Skipped); got != int64(len(plan.Runs)) {
				rt.Fatalf("state counts %d new runs, the plan has %d", got, len(plan.Runs))
			}
			active = dispatch.ActiveAfter(active, plan)
			for _, r := range plan.Runs {
				seen[r.ID] = true
			}
			limit := maxActive
			if policy == api.ConcurrencyReplace {
				limit = 1
			}
			if len(active) > limit {
				rt.Fatalf("%d active runs after a write, cap %d (policy %s)", len(active), limit, policy)
			}
			st = plan.State
			// Some active runs finish between writes.
			if n := rapid.IntRange(0, len(active)).Draw(rt, "finished"); n > 0 {
				active = active[n:]
			}
		}
	})
}
