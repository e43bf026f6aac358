package dispatch_test

import (
	"context"
	"testing"
	"time"

	"github.com/jobfleet/jobfleet/api"

	"github.com/jobfleet/jobfleet/dispatch"
	"github.com/jobfleet/jobfleet/internal/netfault"
	"github.com/jobfleet/jobfleet/internal/testkit/etcdtest"
)

// A worker that goes away while its poll records an attempt: the write is
// in etcd, its answer not yet back, when the poll's context ends. Found by
// the chaos suite (a worker killed mid-poll): the write ran under the
// poll's context, was cut there, and the owner never learnt that it had
// applied; the run stayed running in etcd for an attempt no worker had
// (and, with the default single attempt, would end dead).

// undeliveredHarness starts m1 with its dispatcher's etcd connection
// behind a bridge; requests time out after the default RequestTimeout,
// far longer than the tests hold etcd's answers.
func undeliveredHarness(t *testing.T) (*harness, *netfault.Bridge) {
	return bridgedHarness(t, nil)
}

// bridgedHarness starts m1, its dispatcher configured by configure (if
// not nil), with its dispatcher's etcd connection behind a bridge.
func bridgedHarness(t *testing.T, configure func(*dispatch.Config)) (*harness, *netfault.Bridge) {
	h := newHarness(t)
	bridge := etcdtest.NewBridge(t, etcd.ClientAddr())
	h.dispClient = etcdtest.NewClient(t, bridge.Endpoints())
	h.configure = configure
	h.start("m1")
	return h, bridge
}

// abandonPoll polls as worker while etcd's answers are held, waits until
// the attempt is recorded in etcd, ends the poll's context, then lets the
// answers through; the poll must return no attempt.
func abandonPoll(t *testing.T, h *harness, bridge *netfault.Bridge, runID, worker string) {
	t.Helper()
	bridge.CutReplies()
	ctx, cancel := context.WithCancel(context.Background())
	type result struct {
		resp api.PollResponse
		err  error
	}
	done := make(chan result, 1)
	go func() {
		resp, err := h.disp.Poll(ctx, api.PollRequest{Worker: worker, Executors: []string{"http"}, Max: 1})
		done <- result{resp, err}
	}()
	h.waitRun(runID, func(r api.Run) bool { return r.Status == api.RunRunning && len(r.Attempts) == 1 })
	cancel()
	bridge.Restore()
	var res result
	select {
	case res = <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("abandoned poll did not return within 10s")
	}
	if res.err != nil || len(res.resp.Attempts) != 0 {
		t.Fatalf("abandoned poll = %+v, %v; want no attempt", res.resp, res.err)
	}

}

// firstRun creates job a, @every 1m (one attempt a run), fires its first
// run and waits until the owner holds it, dispatchable; it returns the
// run's ID.
func (h *harness) firstRun() string {
	h.t.Helper()
	h.create(api.Job{ID: "a", Schedule: "@every 1m"})
	h.advance(time.Minute)
	runID := h.waitRuns("a", 1)[0].ID
	h.waitFor("the run to be dispatchable", func() bool { return h.disp.Stats().Waiting == 1 })
	return runID
}

// pollAttempt1 polls as worker for one attempt and fails the test unless
// it is attempt 1 of runID.
func (h *harness) pollAttempt1(worker, runID string) api.AttemptGrant {
	h.t.Helper()
	a := h.poll(worker, 1)[0]
	if a.RunID != runID || a.Attempt != 1 {
		h.t.Fatalf("got attempt %d of %s, want attempt 1 of %s", a.Attempt, a.RunID, runID)
	}
	return a
}

// checkTakeBackLeavesGrant starts m1 with job a's first run
// dispatchable, has queue queue a take-back of w1's attempt 1 of it, and
// checks that the take-back leaves the attempt 1 w1's next poll is
// granted: the loop settles its take-backs before it fires, so once a job
// b's run is fired a take-back of the attempt would have been written;
// the run must still be running it, and w1 must complete it.
func checkTakeBackLeavesGrant(t *testing.T, queue func(h *harness, runID string)) {
	t.Helper()
	h := newHarness(t)
	h.start("m1")
	runID := h.firstRun()
	queue(h, runID)

	a := h.pollAttempt1("w1", runID) // wakes the loop, which settles take-backs
	at := h.clock.Now().Add(time.Second)
	h.create(api.Job{ID: "b", RunAt: &at})
	h.advance(2 * time.Second)
	h.waitRuns("b", 1)
	if r, err := h.store.GetRun(context.Background(), runID); err != nil || r.Status != api.RunRunning || len(r.Attempts) != 1 || r.Attempts[0].Worker != "w1" {
		h.t.Fatalf("run after the owner's loop = %s with %+v, %v; want running w1's attempt 1", r.Status, r.Attempts, err)
	}
	if resp, err := h.complete(a, "w1", true, ""); err != nil || resp.Status != api.RunSucceeded {
		h.t.Fatalf("complete of the delivered attempt = %+v, %v; want succeeded", resp, err)
	}
}

func TestAttemptOfAPollEndedMidWriteIsTakenBack(t *testing.T) {
	h, bridge := undeliveredHarness(t)
	runID := h.firstRun()
	abandonPoll(t, h, bridge, runID, "gone")

	// The owner knows the attempt applied and takes it back: the run is
	// pending again without it.
	r := h.waitRun(runID, func(r api.Run) bool { return r.Status == api.RunPending })
	if len(r.Attempts) != 0 {
		t.Fatalf("taken-back run still has attempts: %+v", r.Attempts)
	}
	// The next worker gets the run's first attempt and completes it.
	a := h.pollAttempt1("w2", runID)
	if resp, err := h.complete(a, "w2", true, ""); err != nil || resp.Status != api.RunSucceeded {
		t.Fatalf("complete = %+v, %v; want succeeded", resp, err)
	}
	r = h.waitRun(runID, func(r api.Run) bool { return r.Status.Final() })
	if r.Status != api.RunSucceeded || len(r.Attempts) != 1 || r.Attempts[0].Worker != "w2" {
		t.Fatalf("run = %s with attempts %+v; want succeeded by w2's attempt 1", r.Status, r.Attempts)
	}
}

// TestAttemptWriteOfUnknownOutcomeIsTakenBack: the attempt's write times
// out for the owner (etcd's answer is held) but applies in etcd. The poll
// returns nothing, so no worker has the attempt: the owner reads the run
// again once etcd answers, finds the attempt and takes it back, retrying
// the read while etcd does not answer.
func TestAttemptWriteOfUnknownOutcomeIsTakenBack(t *testing.T) {
	h, bridge := lostAnswerHarness(t)
	runID := h.firstRun()
	bridge.CutReplies()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := h.disp.Poll(ctx, api.PollRequest{Worker: "w1", Executors: []string{"http"}, Max: 1})
	if err != nil || len(resp.Attempts) != 0 {
		t.Fatalf("poll while etcd's answers are held = %+v, %v; want no attempt", resp, err)
	}
	h.waitRun(runID, func(r api.Run) bool { return r.Status == api.RunRunning && len(r.Attempts) == 1 })
	// The owner's first read of the run times out too.
	h.waitFor("the owner to try reading the run", func() bool { return h.disp.Health() != nil })
	bridge.Restore()
	h.waitFor("the attempt to be taken back", func() bool {
		h.advance(200 * time.Millisecond) // to the loop's retry after a failed write
		r, err := h.store.GetRun(context.Background(), runID)
		return err == nil && r.Status == api.RunPending && len(r.Attempts) == 0
	})
	h.pollAttempt1("w2", runID)
}

// TestAttemptWriteThatDidNotApplyLeavesItsNextGrant: an attempt's write
// timed out for the owner and never applied in etcd (lost with its
// connection), so the owner has an unsure take-back queued; before the
// owner settles it, the same worker polls again and gets the run's
// attempt 1, delivered this time. The take-back must not then take that
// attempt back: the run would go back to pending and its attempt 1 would
// be handed out, and run, a second time. Found by the chaos suite (a
// network partition healing while a worker's polls were in flight).
func TestAttemptWriteThatDidNotApplyLeavesItsNextGrant(t *testing.T) {
	checkTakeBackLeavesGrant(t, func(h *harness, runID string) {
		// What the lost write left: etcd has the run pending, the owner an
		// unsure take-back of w1's attempt 1.
		h.disp.QueueUnsureTakeBack(0, runID, "w1", 1)
	})
}

// TestTakeBackQueuedBeforeAGrantLeavesIt: a take-back of w1's attempt 1
// is queued and not yet written (its write failed with an unknown
// outcome that applied: the run is pending again in etcd and in
// memory), and the same worker polls and gets the run's attempt 1,
// delivered this time. When the loop comes to the take-back it must find
// it moot: the attempt it names was replaced by a grant of the same
// number to the same worker. Found by the chaos suite (a sharded run's
// item, its take-back's write timed out while a member's clock was
// skewed): the item's attempt 1 ran twice.
func TestTakeBackQueuedBeforeAGrantLeavesIt(t *testing.T) {
	checkTakeBackLeavesGrant(t, func(h *harness, runID string) {
		h.disp.QueueStaleTakeBack(0, runID, "w1", 1)
	})
}
