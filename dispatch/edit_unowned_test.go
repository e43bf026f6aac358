package dispatch_test

import (
	"context"
	"testing"
	"time"

	"github.com/jobfleet/jobfleet/api"
	"github.com/jobfleet/jobfleet/store"
)

// TestEditBeforeAnyOwnerFiresNoPast: a job created and changed while its
// partition has no owner (no state of it was ever written) is planned by
// the owner that comes from the change: no time from before the change
// fires, whatever the path that changed it (a PUT of a new schedule, a
// batch apply, a PUT that resumes a job created paused), and the first
// time after it does.
func TestEditBeforeAnyOwnerFiresNoPast(t *testing.T) {
	ctx := context.Background()
	paths := []struct {
		name    string
		created api.Job
		edit    func(h *harness, j api.Job) api.Job
	}{
		{"put of a new schedule", api.Job{Schedule: "@every 1h"}, func(h *harness, j api.Job) api.Job {
			j.Schedule, j.Revision = "*/10 * * * *", 0
			stored, _, err := h.store.Put(ctx, j)
			if err != nil {
				h.t.Fatal(err)
			}
			return stored
		}},
		{"batch apply of a new schedule", api.Job{Schedule: "@every 1h"}, func(h *harness, j api.Job) api.Job {
			j.Schedule, j.Revision = "*/10 * * * *", 0
			res, err := h.store.WriteBatch(ctx, []store.BatchItem{{Job: j}}, store.BatchApply)
			if err != nil || res[0].Err != nil {
				h.t.Fatalf("batch: %v %+v", err, res)
			}
			return res[0].Job
		}},
		{"put resuming a job created paused", api.Job{Schedule: "*/10 * * * *", Paused: true}, func(h *harness, j api.Job) api.Job {
			j.Paused, j.Revision = false, 0
			stored, _, err := h.store.Put(ctx, j)
			if err != nil {
				h.t.Fatal(err)
			}
			return stored
		}},
	}
	for _, p := range paths {
		t.Run(p.name, func(t *testing.T) {
			h := newHarness(t)
			job := p.created
			job.ID, job.MisfirePolicy = "unowned", api.MisfireRunAll
			job.Executor = api.Executor{Type: "http", URL: "http://127.0.0.1:9/hook"}
			j, err := h.store.Create(ctx, job)
			if err != nil {
				t.Fatal(err)
			}
			h.clock.Advance(35 * time.Minute) // 10, 20 and 30 of the new schedule pass, unowned
			stored := p.edit(h, h.job(j.ID))
			if !stored.UpdatedAt.Equal(t0.Add(35 * time.Minute)) {
				t.Fatalf("updated_at %v, want the time of the change", stored.UpdatedAt)
			}
			h.clock.Advance(time.Minute)
			h.start("m1")
			h.waitJob(j.ID, func(j api.Job) bool { return j.State != nil && j.State.SpecRevision == stored.Revision })
			if runs, _ := h.store.Runs(ctx, j.ID, 10); len(runs) != 0 {
				t.Fatalf("after the change: runs %v, want none (times before the change)", runs)
			}
			h.advance(4 * time.Minute)
			runs := h.waitRuns(j.ID, 1)
			if len(runs) != 1 || !runs[0].ScheduledAt.Equal(t0.Add(40*time.Minute)) {
				t.Fatalf("runs %v, want one, at t0+40m", runs)
			}
		})
	}
}
