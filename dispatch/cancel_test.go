package dispatch_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/jobfleet/jobfleet/api"
	"github.com/jobfleet/jobfleet/dispatch"
	"github.com/jobfleet/jobfleet/store"
)

func TestCancelRunDecides(t *testing.T) {
	now := t0.Add(time.Minute)
	started := t0.Add(30 * time.Second)
	running := api.Run{ID: "j@x", Status: api.RunRunning, Attempts: []api.Attempt{
		{Attempt: 1, Worker: "w1", StartedAt: t0, FinishedAt: t0.Add(time.Second), Error: "boom"},
		{Attempt: 2, Worker: "w2", StartedAt: started},
	}}
	for _, tc := range []struct {
		name         string
		run          api.Run
		by           string
		ok           bool
		reason       string
		attemptError string // of the last attempt, "" if unchanged
	}{
		{"pending", api.Run{Status: api.RunPending, Attempts: []api.Attempt{}}, "ops-1", true, "cancelled by ops-1", ""},
		{"failed awaiting its retry", api.Run{Status: api.RunFailed, Attempts: []api.Attempt{{Attempt: 1, Error: "boom", FinishedAt: t0}}}, "ops-1", true, "cancelled by ops-1", "boom"},
		{"running", running, "", true, "cancelled on request; its running attempt was cancelled", "cancelled: the run was cancelled on request"},
		{"succeeded", api.Run{Status: api.RunSucceeded}, "ops-1", false, "", ""},
		{"dead", api.Run{Status: api.RunDead, Reason: "replaced"}, "ops-1", false, "replaced", ""},
		{"skipped", api.Run{Status: api.RunSkipped}, "ops-1", false, "", ""},
		{"cancelled", api.Run{Status: api.RunCancelled, Reason: "cancelled by a"}, "b", false, "cancelled by a", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := dispatch.CancelRun(tc.run, tc.by, now)
			if ok != tc.ok {
				t.Fatalf("ok = %v, want %v", ok, tc.ok)
			}
			if !ok {
				if got.Status != tc.run.Status || got.Reason != tc.reason {
					t.Fatalf("a final run was changed: %+v", got)
				}
				return
			}
			if got.Status != api.RunCancelled || !got.Status.Final() {
				t.Fatalf("status = %s, want cancelled (final)", got.Status)
			}
			if got.Reason != tc.reason {
				t.Errorf("reason = %q, want %q", got.Reason, tc.reason)
			}
			if n := len(got.Attempts); n > 0 {
				last := got.Attempts[n-1]
				if tc.attemptError != "" && last.Error != tc.attemptError {
					t.Errorf("last attempt's error = %q, want %q", last.Error, tc.attemptError)
				}
				if last.FinishedAt.IsZero() {
					t.Errorf("last attempt not closed: %+v", last)
				}
			}
		})
	}
	// The input is not changed (its attempts are copied).
	if running.Attempts[1].FinishedAt != (time.Time{}) {
		t.Fatal("CancelRun changed its input's attempts")
	}
}

// triggeredRun starts m1 and triggers a run of job c, a one-off job due
// a day after t0; it returns the harness and the run's ID.
func triggeredRun(t *testing.T) (*harness, string) {
	t.Helper()
	h := newHarness(t)
	h.start("m1")
	h.create(api.Job{ID: "c", RunAt: ptr(t0.Add(24 * time.Hour))})
	runID, err := h.store.Trigger(context.Background(), "c")
	if err != nil {
		t.Fatal(err)
	}
	return h, runID
}

// A pending run is cancelled by its owner: final, never handed out.
func TestCancelPendingRunIsNeverHandedOut(t *testing.T) {
	h, runID := triggeredRun(t)
	h.waitRun(runID, func(r api.Run) bool { return r.Status == api.RunPending })
	if _, err := h.store.RequestCancel(context.Background(), runID, "ops-1"); err != nil {
		t.Fatal(err)
	}
	r, consumed, err := h.store.AwaitCancel(context.Background(), runID)
	if err != nil || !consumed {
		t.Fatalf("await cancel: %v, consumed %v", err, consumed)
	}
	if r.Status != api.RunCancelled || r.Reason != "cancelled by ops-1" {
		t.Fatalf("run = %+v, want cancelled by ops-1", r)
	}
	if resp, err := h.disp.Poll(context.Background(), api.PollRequest{Worker: "w1", Executors: []string{"http"}, Max: 10}); err != nil || len(resp.Attempts) != 0 {
		t.Fatalf("poll after the cancel = %+v, %v; want nothing", resp, err)
	}
	queued, err := h.client.Get(context.Background(), h.store.Keys().QueuePrefix(0), clientv3.WithPrefix())
	if err != nil || len(queued.Kvs) != 0 {
		t.Fatalf("queue entries after the cancel: %v, %v; want none", queued, err)
	}
	// Cancelling it again is refused, naming its status.
	var fe *store.FinalError
	if _, err := h.store.RequestCancel(context.Background(), runID, "ops-1"); !errors.As(err, &fe) || fe.Status != api.RunCancelled {
		t.Fatalf("second cancel: %v, want a FinalError naming cancelled", err)
	}
}

// A running attempt is told through its heartbeat reply; its report is
// acknowledged (cancelled) without being recorded; the run is not
// retried, and stays cancelled across a handoff.
func TestCancelRunningRunTellsItsWorker(t *testing.T) {
	h := newHarness(t)
	h.start("m1")
	h.create(api.Job{ID: "c", RunAt: ptr(t0.Add(24 * time.Hour)), Retry: api.RetryPolicy{MaxAttempts: 5}})
	runID, err := h.store.Trigger(context.Background(), "c")
	if err != nil {
		t.Fatal(err)
	}
	a := h.poll("w1", 1)[0]
	if a.RunID != runID {
		t.Fatalf("handed out %s, want %s", a.RunID, runID)
	}
	if _, err := h.store.RequestCancel(context.Background(), runID, "ops-1"); err != nil {
		t.Fatal(err)
	}
	r := h.waitRun(runID, func(r api.Run) bool { return r.Status == api.RunCancelled })
	if at := r.Attempts[0]; at.FinishedAt.IsZero() || !strings.Contains(at.Error, "cancelled by ops-1") {
		t.Fatalf("attempt = %+v, want it closed as cancelled by ops-1", at)
	}
	waitHeartbeatCancel(t, h, a, "w1")
	resp, err := h.complete(a, "w1", true, "")
	if err != nil || resp.Status != api.RunCancelled {
		t.Fatalf("report of the cancelled attempt = %+v, %v; want acknowledged as cancelled", resp, err)
	}
	if after := h.waitRun(runID, func(api.Run) bool { return true }); after.Status != api.RunCancelled || after.Attempts[0].Error != r.Attempts[0].Error {
		t.Fatalf("the report was recorded over the cancellation: %+v", after)
	}
	if _, err := h.disp.Heartbeat(context.Background(), api.HeartbeatRequest{Worker: "w1", RunID: a.RunID, Attempt: a.Attempt}); !errors.Is(err, dispatch.ErrStaleAttempt) {
		t.Fatalf("heartbeat after the report: %v, want ErrStaleAttempt", err)
	}

	// Across a handoff: the new owner does not take the run in, retry it
	// or hand it out.
	h.stop()
	h.start("m2")
	h.advance(time.Minute)
	if resp, err := h.disp.Poll(context.Background(), api.PollRequest{Worker: "w2", Executors: []string{"http"}, Max: 10}); err != nil || len(resp.Attempts) != 0 {
		t.Fatalf("poll on the new owner = %+v, %v; want nothing", resp, err)
	}
	if got := h.waitRun(runID, func(api.Run) bool { return true }); got.Status != api.RunCancelled || len(got.Attempts) != 1 {
		t.Fatalf("after the handoff the run is %+v, want cancelled with its one attempt", got)
	}
}

// A worker that does not stop within a run lease is treated as lost: its
// late report is refused as stale, and the run stays cancelled.
func TestCancelledAttemptsLateReportIsStale(t *testing.T) {
	h, runID := triggeredRun(t)
	a := h.poll("w1", 1)[0]
	if _, err := h.store.RequestCancel(context.Background(), runID, "ops-1"); err != nil {
		t.Fatal(err)
	}
	h.waitRun(runID, func(r api.Run) bool { return r.Status == api.RunCancelled })
	waitHeartbeatCancel(t, h, a, "w1")
	h.advance(runLease + time.Second)
	deadline := time.Now().Add(10 * time.Second)
	for {
		_, err := h.disp.Heartbeat(context.Background(), api.HeartbeatRequest{Worker: "w1", RunID: a.RunID, Attempt: a.Attempt})
		if errors.Is(err, dispatch.ErrStaleAttempt) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("heartbeat a run lease after the cancel: %v, want ErrStaleAttempt", err)
		}
		time.Sleep(5 * time.Millisecond)
	}
	if _, err := h.complete(a, "w1", true, ""); !errors.Is(err, dispatch.ErrStaleAttempt) {
		t.Fatalf("late report: %v, want ErrStaleAttempt", err)
	}
	if got := h.waitRun(runID, func(api.Run) bool { return true }); got.Status != api.RunCancelled {
		t.Fatalf("run = %+v after the late report, want cancelled", got)
	}
}

// A cancel recorded while the partition has no owner is applied by the
// next owner when it loads the partition.
func TestCancelRequestedBetweenOwnersIsApplied(t *testing.T) {
	h, runID := triggeredRun(t)
	a := h.poll("w1", 1)[0]
	h.stop()
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	if _, err := h.store.RequestCancel(context.Background(), runID, "ops-1"); err != nil {
		t.Fatal(err)
	}
	if _, consumed, err := h.store.AwaitCancel(ctx, runID); err != nil || consumed {
		t.Fatalf("await without an owner: consumed %v, %v; want not consumed", consumed, err)
	}
	h.start("m2")
	r, consumed, err := h.store.AwaitCancel(context.Background(), runID)
	if err != nil || !consumed || r.Status != api.RunCancelled {
		t.Fatalf("after the handoff: %+v, consumed %v, %v; want cancelled", r, consumed, err)
	}
	// The attempt in flight under the previous owner is told to stop by
	// the new one.
	waitHeartbeatCancel(t, h, a, "w1")
}

// waitHeartbeatCancel waits until attempt a's heartbeat by worker is
// answered with Cancel (the owner applies its write to memory just after
// etcd has it).
func waitHeartbeatCancel(t *testing.T, h *harness, a api.AttemptGrant, worker string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		hb, err := h.disp.Heartbeat(context.Background(), api.HeartbeatRequest{Worker: worker, RunID: a.RunID, Attempt: a.Attempt})
		if err == nil && hb.Cancel {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("heartbeat of the cancelled attempt = %+v, %v; want Cancel", hb, err)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// CancelRun of a run of items cancels it whole: the items not ended
// skipped with the reason, the running ones' attempts closed as
// cancelled, those ended left as they were; Settle then leaves the run
// cancelled, whatever its items say.
func TestCancelRunOfItems(t *testing.T) {
	now := t0.Add(time.Minute)
	r := api.Run{ID: "s@x", Status: api.RunRunning, Items: dispatch.NewItems(4), MinSucceeded: 1}
	r.Items[0].Status, r.Items[0].Attempts = api.RunSucceeded, []api.Attempt{{Attempt: 1, Worker: "w1", StartedAt: t0, FinishedAt: t0.Add(time.Second)}}
	r.Items[1].Status, r.Items[1].Attempts = api.RunRunning, []api.Attempt{{Attempt: 1, Worker: "w1", StartedAt: t0}}
	r.Items[2].Status, r.Items[2].Attempts = api.RunFailed, []api.Attempt{{Attempt: 1, Worker: "w2", StartedAt: t0, FinishedAt: t0.Add(time.Second), Error: "boom"}}
	got, ok := dispatch.CancelRun(r, "ops-1", now)
	if !ok || got.Status != api.RunCancelled {
		t.Fatalf("CancelRun = %s, %v; want cancelled", got.Status, ok)
	}
	if got.Reason != "cancelled by ops-1; its 1 running items were cancelled" {
		t.Errorf("reason = %q", got.Reason)
	}
	want := []api.RunStatus{api.RunSucceeded, api.RunSkipped, api.RunSkipped, api.RunSkipped}
	for i, it := range got.Items {
		if it.Status != want[i] {
			t.Errorf("item %d %s, want %s", i, it.Status, want[i])
		}
		if i > 0 && it.Reason != "the run was cancelled by ops-1" {
			t.Errorf("item %d reason %q", i, it.Reason)
		}
	}
	if a := got.Items[1].Attempts[0]; a.FinishedAt.IsZero() || a.Error != "cancelled: the run was cancelled by ops-1" {
		t.Errorf("the running item's attempt = %+v, want closed as cancelled", a)
	}
	if got.Items[2].Attempts[0].Error != "boom" || r.Items[1].Attempts[0].FinishedAt != (time.Time{}) {
		t.Error("an ended attempt, or the input, was changed")
	}
	// min_succeeded 1 is met by item 0: Settle would call the run
	// succeeded, but a cancel decided it.
	if settled, ended := dispatch.Settle(got, now); settled.Status != api.RunCancelled || len(ended) != 0 {
		t.Fatalf("Settle of the cancelled run = %s, %v; want cancelled, nothing ended", settled.Status, ended)
	}
}

// Cancelling a running sharded run tells every running item's worker
// through its heartbeat, acknowledges their reports as cancelled without
// recording them, skips the items not ended, and leaves the run
// cancelled.
func TestCancelShardedRunStopsEveryItem(t *testing.T) {
	h := newHarness(t)
	h.start("m1")
	h.create(api.Job{ID: "sh", RunAt: ptr(t0.Add(24 * time.Hour)), Shards: &api.Shards{Count: 4}})
	runID, err := h.store.Trigger(context.Background(), "sh")
	if err != nil {
		t.Fatal(err)
	}
	as := h.pollItems("w1", 2, 10*time.Second)
	if len(as) != 2 || as[0].RunID != runID {
		t.Fatalf("poll got %s of %v; want two items of %s", indexes(as), as, runID)
	}
	if _, err := h.store.RequestCancel(context.Background(), runID, "ops-1"); err != nil {
		t.Fatal(err)
	}
	r := h.waitRun(runID, func(r api.Run) bool { return r.Status == api.RunCancelled })
	if !strings.Contains(r.Reason, "cancelled by ops-1; its 2 running items were cancelled") {
		t.Errorf("reason = %q", r.Reason)
	}
	for _, it := range r.Items {
		if it.Status != api.RunSkipped || it.Reason != "the run was cancelled by ops-1" {
			t.Errorf("item %d %s (%q), want skipped by the cancel", it.Index, it.Status, it.Reason)
		}
	}
	for _, a := range as {
		deadline := time.Now().Add(10 * time.Second)
		for {
			hb, err := h.heartbeatItem(a, "w1")
			if err == nil && hb.Cancel {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("heartbeat of item %d: %+v, %v; want Cancel", a.Item.Index, hb, err)
			}
			time.Sleep(5 * time.Millisecond)
		}
		resp, err := h.completeItem(a, "w1", true)
		if err != nil || resp.Status != api.RunCancelled || resp.RunStatus != api.RunCancelled {
			t.Fatalf("report of item %d: %+v, %v; want acknowledged cancelled", a.Item.Index, resp, err)
		}
	}
	after := h.waitRun(runID, func(api.Run) bool { return true })
	if after.Status != api.RunCancelled || after.Count().Succeeded != 0 {
		t.Fatalf("the reports were recorded over the cancellation: %s, %+v", after.Status, after.Count())
	}
	if as := h.pollItems("w2", 4, 0); len(as) != 0 {
		t.Fatalf("poll after the cancel got %s; want nothing", indexes(as))
	}
}
