package store_test

import (
	"context"
	"testing"
	"time"

	"github.com/jobfleet/jobfleet/api"
	"github.com/jobfleet/jobfleet/internal/testkit/etcdtest"
	"github.com/jobfleet/jobfleet/store"
)

// TestResumedAt: resumed_at is the server's: a write that resumes a
// paused job (paused by its document or by its pause key; a PUT or a
// batch) sets it, later writes keep it, and one a client sends is
// ignored.
func TestResumedAt(t *testing.T) {
	client := etcdtest.New(t).Client(t)
	ctx := context.Background()
	now := time.Date(2026, 6, 1, 0, 0, 0, 0, time.UTC)
	s := store.NewEtcd(client, etcdtest.Namespace(t), 4, api.DefaultLimits(), func() time.Time { now = now.Add(time.Second); return now })
	forged := time.Date(2020, 1, 1, 0, 0, 0, 0, time.UTC)
	job := api.Job{ID: "j", Schedule: "@hourly", Executor: api.Executor{Type: "http", URL: "http://127.0.0.1:9/"}, ResumedAt: &forged}
	put := func(j api.Job) api.Job {
		t.Helper()
		j.Revision = 0
		stored, _, err := s.Put(ctx, j)
		if err != nil {
			t.Fatal(err)
		}
		return stored
	}
	read := func() api.Job {
		t.Helper()
		j, err := s.Get(ctx, "j")
		if err != nil {
			t.Fatal(err)
		}
		return j
	}
	if j := put(job); j.ResumedAt != nil || read().ResumedAt != nil {
		t.Fatalf("created with a client's resumed_at: %v, read %v; want none", j.ResumedAt, read().ResumedAt)
	}
	if j := put(job); j.ResumedAt != nil {
		t.Fatalf("replaced, not paused: resumed_at %v, want none", j.ResumedAt)
	}
	job.Paused = true
	put(job)
	job.Paused = false
	first := put(job)
	if first.ResumedAt == nil || !first.ResumedAt.Equal(first.UpdatedAt) || !read().ResumedAt.Equal(*first.ResumedAt) {
		t.Fatalf("resumed by a PUT: resumed_at %v (updated_at %v), read %v; want the time of the write", first.ResumedAt, first.UpdatedAt, read().ResumedAt)
	}
	job.Payload = []byte(`{"v":2}`)
	if j := put(job); j.ResumedAt == nil || !j.ResumedAt.Equal(*first.ResumedAt) {
		t.Fatalf("a later edit: resumed_at %v, want %v kept", j.ResumedAt, first.ResumedAt)
	}
	if _, err := s.SetPaused(ctx, "j", true); err != nil {
		t.Fatal(err)
	}
	res, err := s.WriteBatch(ctx, []store.BatchItem{{Job: job}}, store.BatchApply)
	if err != nil || res[0].Err != nil {
		t.Fatalf("batch: %v %+v", err, res)
	}
	if got := read(); got.Paused || got.ResumedAt == nil || !got.ResumedAt.After(*first.ResumedAt) || !got.ResumedAt.Equal(got.UpdatedAt) {
		t.Fatalf("resumed by a batch over a pause key: paused %v, resumed_at %v (updated_at %v), want the batch's time", got.Paused, got.ResumedAt, got.UpdatedAt)
	}
}
