package dispatch_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/jobfleet/jobfleet/api"
	"github.com/jobfleet/jobfleet/dispatch"
	"github.com/jobfleet/jobfleet/schedule"
	"github.com/jobfleet/jobfleet/store"
)

func TestPlanBackfill(t *testing.T) {
	times := make([]time.Time, 6)
	for i := range times {
		times[i] = t0.Add(time.Duration(i) * time.Minute)
	}
	stored := func(ids ...int) func(time.Time) (bool, bool) {
		return func(at time.Time) (bool, bool) {
			for _, i := range ids {
				if at.Equal(times[i]) {
					return true, false
				}
			}
			return false, false
		}
	}
	for _, tc := range []struct {
		name     string
		outcome  string
		room     int
		stored   func(time.Time) (bool, bool)
		create   []int
		existing []int
	}{
		{"all pending, room for two", "pppppp", 2, stored(), []int{0, 1}, nil},
		{"existing cost no room", "pppppp", 2, stored(0, 2), []int{1, 3}, []int{0, 2}},
		{"done ones are passed over", "ccepep", 5, stored(), []int{3, 5}, nil},
		{"no room: existing ones up to the first to create", "pppppp", 0, stored(0, 1, 3), nil, []int{0, 1}},
		{"stops before an unsure time", "pppppp", 5, func(at time.Time) (bool, bool) { return false, at.Equal(times[2]) }, []int{0, 1}, nil},
		{"nothing pending", "ccccee", 5, stored(), nil, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st := dispatch.PlanBackfill(store.Backfill{Times: times, Outcome: tc.outcome}, tc.room, tc.stored)
			if !slices.Equal(st.Create, tc.create) || !slices.Equal(st.Existing, tc.existing) {
				t.Fatalf("got create %v existing %v, want create %v existing %v", st.Create, st.Existing, tc.create, tc.existing)
			}
		})
	}
}

// requestBackfill records a backfill of job id over [from, to) as the API
// does, and returns its record.
func (h *harness) requestBackfill(id string, from, to time.Time) store.Backfill {
	h.t.Helper()
	ctx := context.Background()
	j, err := h.store.Get(ctx, id)
	if err != nil {
		h.t.Fatal(err)
	}
	s, err := schedule.Parse(j.Schedule, j.Timezone)
	if err != nil {
		h.t.Fatal(err)
	}
	times, _ := s.Between(from, to, 1000)
	exist, err := h.store.RunTimes(ctx, id, from, to)
	if err != nil {
		h.t.Fatal(err)
	}
	outcome := make([]byte, len(times))
	for i, t := range times {
		outcome[i] = store.BackfillPending
		if exist[t.UnixMilli()] {
			outcome[i] = store.BackfillExisting
		}
	}
	b := store.Backfill{From: from, To: to, Max: 1000, Times: times, Outcome: string(outcome), RequestedAt: h.clock.Now()}
	_, prev, err := h.store.GetBackfill(ctx, id)
	if err != nil && err != store.ErrNotFound {
		h.t.Fatal(err)
	}
	if _, err := h.store.PutBackfill(ctx, id, b, prev); err != nil {
		h.t.Fatal(err)
	}
	return b
}

// waitBackfill waits until job id's backfill satisfies cond.
func (h *harness) waitBackfill(id string, cond func(store.Backfill) bool) store.Backfill {
	h.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		b, _, err := h.store.GetBackfill(context.Background(), id)
		if err == nil && cond(b) {
			return b
		}
		if time.Now().After(deadline) {
			h.t.Fatalf("backfill of %s: condition not met after 10s (last %+v, %v)", id, b, err)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func count(outcome string, c byte) int {
	n := 0
	for i := range len(outcome) {
		if outcome[i] == c {
			n++
		}
	}
	return n
}

// A backfill creates a pending run, with the run ID a fire would have
// had, for each time without one, and reports the fired ones existing;
// it survives a handoff, the new owner going on from the record.
func TestBackfillCreatesTheMissingTimesOnce(t *testing.T) {
	h := newHarness(t)
	h.configure = func(c *dispatch.Config) { c.BackfillRate = -1; c.BackfillActive = 100 }
	h.start("m1")
	h.create(api.Job{ID: "b", Schedule: "@every 1m"})
	h.advance(time.Minute) // fires t0+1m
	h.waitRuns("b", 1)
	h.advance(time.Minute) // and t0+2m
	h.waitRuns("b", 2)
	b := h.requestBackfill("b", t0.Add(-3*time.Minute), t0.Add(2*time.Minute))
	if len(b.Times) != 5 || b.Outcome != "ppppe" {
		t.Fatalf("the request: %d times, outcome %q; want t0-3m..t0+1m, the last existing", len(b.Times), b.Outcome)
	}
	done := h.waitBackfill("b", func(b store.Backfill) bool { return !b.Pending() })
	if done.Outcome != "cccce" || done.DoneAt.IsZero() {
		t.Fatalf("done: outcome %q, done at %v; want cccce and a time", done.Outcome, done.DoneAt)
	}
	runs := h.waitRuns("b", 6)
	firedOnce(t, runs)
	backfilled := 0
	for _, r := range runs {
		if r.ID != store.RunID("b", r.ScheduledAt) {
			t.Fatalf("run %s is not the run ID of its time", r.ID)
		}
		if r.Reason == dispatch.ReasonBackfilled {
			backfilled++
			if r.Status != api.RunPending || !r.ScheduledAt.Before(t0.Add(time.Minute)) {
				t.Errorf("backfilled run %+v, want pending, for a time before t0+1m", r)
			}
		}
	}
	if backfilled != 4 || len(runs) != 6 {
		t.Fatalf("%d runs, %d backfilled; want 6 and 4", len(runs), backfilled)
	}
	// Backfilling the same range again creates nothing.
	again := h.requestBackfill("b", t0.Add(-3*time.Minute), t0.Add(2*time.Minute))
	if again.Outcome != "eeeee" {
		t.Fatalf("the second request: outcome %q, want every time existing", again.Outcome)
	}

	// Across a handoff: a backfill recorded while the partition has no
	// owner is run by the next one.
	h.stop()
	h.requestBackfill("b", t0.Add(-10*time.Minute), t0.Add(-3*time.Minute))
	h.start("m2")
	done = h.waitBackfill("b", func(b store.Backfill) bool { return !b.Pending() })
	if done.Outcome != "ccccccc" {
		t.Fatalf("after the handoff: outcome %q, want seven created", done.Outcome)
	}
	firedOnce(t, h.waitRuns("b", 13))
}

// The pacing bounds: the member's rate (bursts of FireBatch), and the
// job's backfilled runs active at once.
func TestBackfillIsPaced(t *testing.T) {
	t.Run("rate", func(t *testing.T) {
		h := newHarness(t)
		h.configure = func(c *dispatch.Config) { c.BackfillRate = 1; c.FireBatch = 3; c.BackfillActive = 100 }
		h.start("m1")
		h.create(api.Job{ID: "r", Schedule: "@every 1m"})
		h.requestBackfill("r", t0.Add(-10*time.Minute), t0)
		for want := 3; want <= 6; want++ {
			h.waitBackfill("r", func(b store.Backfill) bool { return count(b.Outcome, store.BackfillCreated) >= want })
			h.parked() // the loop waits: for the rate, not for work it has
			b := h.waitBackfill("r", func(store.Backfill) bool { return true })
			if got := count(b.Outcome, store.BackfillCreated); got != want {
				t.Fatalf("%v after the request: %d created, want %d (a burst of 3, then 1 a second)", h.clock.Since(t0), got, want)
			}
			h.advance(time.Second)
		}
	})
	t.Run("active", func(t *testing.T) {
		h := newHarness(t)
		h.configure = func(c *dispatch.Config) { c.BackfillRate = -1; c.BackfillActive = 2 }
		h.start("m1")
		h.create(api.Job{ID: "a", Schedule: "@every 1h"})
		h.requestBackfill("a", t0.Add(-5*time.Hour), t0)
		for created := 2; created <= 5; created++ {
			h.waitBackfill("a", func(b store.Backfill) bool { return count(b.Outcome, store.BackfillCreated) >= created })
			h.parked()
			b := h.waitBackfill("a", func(store.Backfill) bool { return true })
			if got := count(b.Outcome, store.BackfillCreated); got != created {
				t.Fatalf("%d created while %d may be active, want %d", got, 2, created)
			}
			if created == 5 {
				break
			}
			// The oldest backfilled run finishes: room for the next.
			a := h.poll("w1", 1)[0]
			if _, err := h.complete(a, "w1", true, ""); err != nil {
				t.Fatal(err)
			}
		}
	})
}
