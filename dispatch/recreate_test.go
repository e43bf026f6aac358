package dispatch_test

import (
	"context"
	"testing"
	"time"

	"github.com/jobfleet/jobfleet/api"

	"github.com/jobfleet/jobfleet/store"
)

// TestRecreatedJobStartsAfresh deletes a job and creates it again under the
// same ID while its partition has no owner (found by the chaos suite,
// internal/chaos): the next owner must schedule the new job from its own
// creation, not from the old job's state, and must not keep the old job's
// runs (a queued one would run as the new job's).
func TestRecreatedJobStartsAfresh(t *testing.T) {
	h := newHarness(t)
	h.start("m1")
	h.create(api.Job{ID: "re", Schedule: "@every 1s"})
	h.advance(time.Second)
	old := h.waitRuns("re", 1) // pending: no worker takes it
	h.stop()                   // the partition has no owner

	if err := h.store.Delete(context.Background(), "re"); err != nil {
		t.Fatal(err)
	}
	h.clock.Advance(2500 * time.Millisecond) // no scheduler runs
	created, err := h.store.Create(context.Background(), api.Job{ID: "re", Schedule: "@every 1s", Executor: api.Executor{Type: "http", URL: "http://127.0.0.1:9/hook"}})
	if err != nil {
		t.Fatal(err)
	}
	h.start("m2") // at t0+3.5s, the new job's creation
	h.advance(time.Second)
	h.waitRun(store.RunID("re", t0.Add(4*time.Second)), func(api.Run) bool { return true })
	runs, err := h.store.Runs(context.Background(), "re", 100)
	if err != nil {
		t.Fatal(err)
	}
	if len(runs) != 1 {
		t.Errorf("got %d runs, want only the new job's first (t0+4s)", len(runs))
	}
	for _, r := range runs {
		if !r.ScheduledAt.After(created.CreatedAt) {
			t.Errorf("run %s (status %s) is for %v, not after the new job's creation at %v", r.ID, r.Status, r.ScheduledAt, created.CreatedAt)
		}
		if r.ID == old[0].ID {
			t.Errorf("the deleted job's run %s is still there", r.ID)
		}
	}
}
