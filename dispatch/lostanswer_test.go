package dispatch_test

import (
	"context"
	"testing"
	"time"

	"github.com/jobfleet/jobfleet/api"

	"github.com/jobfleet/jobfleet/dispatch"
	"github.com/jobfleet/jobfleet/internal/netfault"
	"github.com/jobfleet/jobfleet/schedule"
	"github.com/jobfleet/jobfleet/store"
)

// Writes whose answer is lost: the owner's connection to etcd stalls while
// a write is in flight, the write times out for the owner, and applies in
// etcd once the connection flows again. Found by the chaos suite
// (internal/chaos) on a lossy link: the owner's next write of the run did
// not apply (the run was not as it remembered it), and it dropped the run
// from memory, leaving it pending, or running an attempt no worker had,
// for as long as it owned the partition.

// lostAnswerHarness starts m1 with its dispatcher's etcd connection
// behind a bridge and a short request timeout.
func lostAnswerHarness(t *testing.T) (*harness, *netfault.Bridge) {
	return bridgedHarness(t, func(c *dispatch.Config) { c.RequestTimeout = 300 * time.Millisecond })
}

// holdOneWrite holds etcd's answers, runs act (which makes the owner
// write), waits until that write has timed out for the owner, and lets the
// held answers through.
func holdOneWrite(t *testing.T, h *harness, bridge *netfault.Bridge, act func()) {
	t.Helper()
	bridge.CutReplies()
	act()
	h.waitFor("the owner's write to time out", func() bool { return h.disp.Health() != nil })
	bridge.Restore()
}

// waitFirstAttempt moves the clock on until the owner hands an attempt
// out, and checks that it is attempt 1 of runID.
func waitFirstAttempt(t *testing.T, h *harness, runID string) {
	t.Helper()
	var got []api.AttemptGrant
	h.waitFor("the run to be handed out", func() bool {
		h.clock.Advance(100 * time.Millisecond)
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		resp, err := h.disp.Poll(ctx, api.PollRequest{Worker: "w1", Executors: []string{"http"}, Max: 1, Wait: api.Duration(50 * time.Millisecond)})
		got = resp.Attempts
		return err == nil && len(got) > 0
	})
	if got[0].RunID != runID || got[0].Attempt != 1 {
		t.Fatalf("got attempt %d of %s, want attempt 1 of %s", got[0].Attempt, got[0].RunID, runID)
	}
}

func TestFireWhoseAnswerWasLostIsDispatched(t *testing.T) {
	h, bridge := lostAnswerHarness(t)
	h.create(api.Job{ID: "a", Schedule: "@every 1m"})
	runID := store.RunID("a", t0.Add(time.Minute))
	holdOneWrite(t, h, bridge, func() { h.clock.Advance(time.Minute) })
	h.waitRun(runID, func(r api.Run) bool { return r.Status == api.RunPending })
	// The owner fires again (once its retry is due), finds the run there,
	// and must hand it out.
	waitFirstAttempt(t, h, runID)
}

// TestFireWhoseAnswerWasLostPastTheGraceIsDispatched: the owner's
// retry of a fire whose answer was lost comes after the misfire grace, so
// it no longer plans that time (the job skips missed times), yet the lost
// write applied and the run is in etcd, pending. The owner must read it
// back rather than leave it pending for as long as it owns the partition.
// Found by the chaos suite: a clock offset and an etcd leader cut delayed
// a member's retry past the grace, and two runs stayed pending to the end.
func TestFireWhoseAnswerWasLostPastTheGraceIsDispatched(t *testing.T) {
	h, bridge := lostAnswerHarness(t)
	h.create(api.Job{ID: "a", Schedule: "@every 1m", MisfirePolicy: api.MisfireSkip})
	runID := store.RunID("a", t0.Add(time.Minute))
	holdOneWrite(t, h, bridge, func() { h.clock.Advance(time.Minute) })
	h.waitRun(runID, func(r api.Run) bool { return r.Status == api.RunPending })
	h.clock.Advance(schedule.DefaultGrace + 10*time.Second) // the retry plans past the grace
	waitFirstAttempt(t, h, runID)
}

func TestAttemptWhoseAnswerWasLostIsTakenBack(t *testing.T) {
	h, bridge := lostAnswerHarness(t)
	h.create(api.Job{ID: "a", Schedule: "@every 1m"})
	h.clock.Advance(time.Minute)
	runID := h.waitRuns("a", 1)[0].ID
	h.waitFor("the run to be dispatchable", func() bool { return h.disp.Stats().Waiting == 1 })
	holdOneWrite(t, h, bridge, func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		resp, err := h.disp.Poll(ctx, api.PollRequest{Worker: "w1", Executors: []string{"http"}, Max: 1})
		if err != nil || len(resp.Attempts) != 0 {
			t.Fatalf("poll while the write is held: %+v, %v; want no attempt", resp, err)
		}
	})
	// The held write applied: attempt 1 ran for w1, which never got it.
	// The owner reads the run again and takes the attempt back: the run
	// must be handed out again as its first attempt, not left to expire.
	h.waitFor("the attempt to be taken back", func() bool {
		h.clock.Advance(200 * time.Millisecond) // to the loop's retry after a failed write
		r, err := h.store.GetRun(context.Background(), runID)
		return err == nil && r.Status == api.RunPending && len(r.Attempts) == 0
	})
	h.pollAttempt1("w2", runID)
}
