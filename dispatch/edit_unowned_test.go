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
			h.firesAfterEdit(j.ID, stored.Revision, "times before the change", 4*time.Minute, t0.Add(40*time.Minute))
		})
	}
}

// TestResumeByDocumentWhileUnownedForgivesThePause: a job paused (by its
// document, or by jobfleet job pause) and then resumed by a PUT or a batch
// apply setting "paused": false while its partition has no owner is
// resumed for the next owner as a resume it saw would be: the times the
// pause kept are forgiven, whatever the misfire policy, and it fires at
// its first time after the resume.
func TestResumeByDocumentWhileUnownedForgivesThePause(t *testing.T) {
	ctx := context.Background()
	pauses := []struct {
		name  string
		pause func(h *harness, j api.Job)
	}{
		{"paused by its document", func(h *harness, j api.Job) {
			j.Paused, j.Revision = true, 0
			if _, _, err := h.store.Put(ctx, j); err != nil {
				h.t.Fatal(err)
			}
		}},
		{"paused by its pause key", func(h *harness, j api.Job) {
			if _, err := h.store.SetPaused(ctx, j.ID, true); err != nil {
				h.t.Fatal(err)
			}
		}},
	}
	resumes := []struct {
		name   string
		resume func(h *harness, j api.Job) api.Job
	}{
		{"resumed by a put", func(h *harness, j api.Job) api.Job {
			j.Paused, j.Revision = false, 0
			stored, _, err := h.store.Put(ctx, j)
			if err != nil {
				h.t.Fatal(err)
			}
			return stored
		}},
		{"resumed by a batch apply", func(h *harness, j api.Job) api.Job {
			j.Paused, j.Revision = false, 0
			res, err := h.store.WriteBatch(ctx, []store.BatchItem{{Job: j}}, store.BatchApply)
			if err != nil || res[0].Err != nil {
				h.t.Fatalf("batch: %v %+v", err, res)
			}
			return res[0].Job
		}},
	}
	for _, p := range pauses {
		for _, r := range resumes {
			t.Run(p.name+", "+r.name, func(t *testing.T) {
				h := newHarness(t)
				h.start("m1")
				j := h.create(api.Job{ID: "paused", Schedule: "*/10 * * * *", MisfirePolicy: api.MisfireRunAll})
				h.parked()
				p.pause(h, h.job(j.ID))
				h.waitJob(j.ID, func(j api.Job) bool { return j.Paused })
				h.stop() // the resume comes while no owner sees it
				h.clock.Advance(35 * time.Minute)
				cur := h.job(j.ID)
				stored := r.resume(h, cur)
				if stored.Paused || !stored.UpdatedAt.Equal(t0.Add(35*time.Minute)) {
					t.Fatalf("resumed: paused %v, updated_at %v", stored.Paused, stored.UpdatedAt)
				}
				h.clock.Advance(time.Minute)
				h.start("m2")
				h.firesAfterEdit(j.ID, stored.Revision, "the pause's times are forgiven", 4*time.Minute, t0.Add(40*time.Minute))
			})
		}
	}
}
