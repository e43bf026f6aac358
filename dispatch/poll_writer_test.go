package dispatch_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/jobfleet/jobfleet/api"
)

// TestPollDoesNotWaitForAnotherTeamsWriter: while a partition's writer is
// busy (a long write of one team's fires or triggers), a poll of a worker
// scoped to another team is answered at once: nothing there is for it,
// which it learns without the writer lock. A poll of the team whose run
// waits there does wait for the writer, and gets the run once it is free.
func TestPollDoesNotWaitForAnotherTeamsWriter(t *testing.T) {
	h := newHarness(t)
	h.start("m1")
	j := h.create(api.Job{ID: "team-a/report", Schedule: "@every 1s"})
	h.advance(time.Second)
	runs := h.waitRuns(j.ID, 1)
	release := h.disp.HoldWriter(t, runs[0].Partition)
	poll := func(prefix string) <-chan api.PollResponse {
		out := make(chan api.PollResponse, 1)
		go func() {
			resp, err := h.disp.Poll(context.Background(), api.PollRequest{Worker: "w-" + prefix, Executors: []string{"http"}, Max: 1, Prefix: prefix})
			if err != nil {
				t.Errorf("poll of %s: %v", prefix, err)
			}
			out <- resp
		}()
		return out
	}
	select {
	case resp := <-poll("team-b/"):
		if len(resp.Attempts) != 0 {
			t.Fatalf("team-b's poll got %v, want nothing", resp.Attempts)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("team-b's poll waited for the writer of a partition holding only team-a's run")
	}
	got := poll("team-a/")
	select {
	case resp := <-got:
		t.Fatalf("team-a's poll answered %v while the writer was held, want it to wait", resp.Attempts)
	case <-time.After(200 * time.Millisecond):
	}
	release()
	if resp := <-got; len(resp.Attempts) != 1 || resp.Attempts[0].RunID != runs[0].ID {
		t.Fatalf("team-a's poll got %v once the writer was free, want run %s", resp.Attempts, runs[0].ID)
	}
}

// TestPollsWaitingForTheWriterShareOneWrite: polls that arrive at a
// partition while its writer is busy (under a herd every poll goes to the
// partition whose runs waited longest) are served together once it is
// free: each gets its own runs, recorded in one fenced transaction (one
// etcd revision), not one write per poll, each behind the one before.
func TestPollsWaitingForTheWriterShareOneWrite(t *testing.T) {
	h := newHarness(t)
	h.start("m1")
	const polls = 3
	h.dueHerd(polls + 1)
	release := h.disp.HoldWriter(t, 0)
	got := make(chan api.PollResponse, polls)
	for i := range polls {
		go func() {
			resp, err := h.disp.Poll(context.Background(), api.PollRequest{Worker: fmt.Sprintf("w%d", i), Executors: []string{"http"}, Max: 1, Wait: api.Duration(10 * time.Second)})
			if err != nil {
				t.Errorf("poll of w%d: %v", i, err)
			}
			got <- resp
		}()
	}
	deadline := time.Now().Add(10 * time.Second)
	for h.disp.VisitsWaiting(0) < polls {
		if time.Now().After(deadline) {
			t.Fatalf("%d polls wait for the partition after 10s, want %d", h.disp.VisitsWaiting(0), polls)
		}
		time.Sleep(time.Millisecond)
	}
	release()
	revs := map[int64]bool{}
	runs := map[string]bool{}
	for range polls {
		resp := <-got
		if len(resp.Attempts) != 1 {
			t.Fatalf("a poll got %d attempts, want 1", len(resp.Attempts))
		}
		a := resp.Attempts[0]
		if runs[a.RunID] {
			t.Fatalf("run %s granted to two polls", a.RunID)
		}
		runs[a.RunID] = true
		kv, err := h.client.Get(context.Background(), h.store.Keys().Run(0, a.JobID, a.ScheduledAt))
		if err != nil || len(kv.Kvs) != 1 {
			t.Fatalf("reading run %s: %v", a.RunID, err)
		}
		revs[kv.Kvs[0].ModRevision] = true
	}
	if len(revs) != 1 {
		t.Fatalf("the %d polls' attempts were recorded in %d writes, want 1", polls, len(revs))
	}
}

// TestPassOverLeavesARivalNoMoreThanItsRoom: a poll of a worker with
// fewer free slots leaves a run to a freer rival waiting at the member,
// but not more runs than the rival may take: served in one write with the
// rival's poll (both waited for the writer), it takes the rest at once,
// instead of passing every run over and looking again once the rival
// has gone.
func TestPassOverLeavesARivalNoMoreThanItsRoom(t *testing.T) {
	h := newHarness(t)
	h.start("m1")
	h.dueHerd(3)
	release := h.disp.HoldWriter(t, 0)
	poll := func(worker string, max, free int) <-chan api.PollResponse {
		out := make(chan api.PollResponse, 1)
		go func() {
			resp, err := h.disp.Poll(context.Background(), api.PollRequest{Worker: worker, Executors: []string{"http"}, Max: max, Free: free, Wait: api.Duration(10 * time.Second)})
			if err != nil {
				t.Errorf("poll of %s: %v", worker, err)
			}
			out <- resp
		}()
		return out
	}
	waitVisits := func(n int) {
		deadline := time.Now().Add(10 * time.Second)
		for h.disp.VisitsWaiting(0) < n {
			if time.Now().After(deadline) {
				t.Fatalf("%d polls wait for the partition after 10s, want %d", h.disp.VisitsWaiting(0), n)
			}
			time.Sleep(time.Millisecond)
		}
	}
	rival := poll("freer", 1, 10)
	waitVisits(1)
	busy := poll("busier", 3, 1)
	waitVisits(2)
	release()
	revs := map[int64]bool{}
	for _, got := range []struct {
		resp api.PollResponse
		want int
	}{{<-rival, 1}, {<-busy, 2}} {
		if len(got.resp.Attempts) != got.want {
			t.Fatalf("a poll got %d attempts, want %d", len(got.resp.Attempts), got.want)
		}
		for _, a := range got.resp.Attempts {
			kv, err := h.client.Get(context.Background(), h.store.Keys().Run(0, a.JobID, a.ScheduledAt))
			if err != nil || len(kv.Kvs) != 1 {
				t.Fatalf("reading run %s: %v", a.RunID, err)
			}
			revs[kv.Kvs[0].ModRevision] = true
		}
	}
	if len(revs) != 1 {
		t.Fatalf("the 3 runs were granted in %d writes, want 1 (the busier poll passed over more than the rival could take)", len(revs))
	}
}

// TestPollAndResultShareOneWrite: a result waiting for the writer lock
// behind a poll's visit is recorded in the write of the poll's attempts,
// not in a write of its own after it: a run of a herd costs its firing,
// one share of a write of attempts and results, and its job's end.
func TestPollAndResultShareOneWrite(t *testing.T) {
	h := newHarness(t)
	h.start("m1")
	h.dueHerd(2)
	first := h.poll("w0", 1)[0]
	release := h.disp.HoldWriter(t, 0)
	wait := func(what string, n func() int) {
		deadline := time.Now().Add(10 * time.Second)
		for n() < 1 {
			if time.Now().After(deadline) {
				t.Fatalf("no %s waits for the partition after 10s", what)
			}
			time.Sleep(time.Millisecond)
		}
		time.Sleep(5 * time.Millisecond) // past the writer lock's hand-off threshold: served in order
	}
	polled := make(chan api.PollResponse, 1)
	go func() {
		resp, err := h.disp.Poll(context.Background(), api.PollRequest{Worker: "w1", Executors: []string{"http"}, Max: 1, Wait: api.Duration(10 * time.Second)})
		if err != nil {
			t.Errorf("poll: %v", err)
		}
		polled <- resp
	}()
	wait("poll", func() int { return h.disp.VisitsWaiting(0) })
	completed := make(chan error, 1)
	go func() {
		_, err := h.complete(first, "w0", true, "")
		completed <- err
	}()
	wait("result", func() int { return h.disp.ReportsWaiting(0) })
	release()
	resp := <-polled
	if err := <-completed; err != nil {
		t.Fatalf("complete: %v", err)
	}
	if len(resp.Attempts) != 1 {
		t.Fatalf("the poll got %d attempts, want 1", len(resp.Attempts))
	}
	rev := func(a api.AttemptGrant) int64 {
		kv, err := h.client.Get(context.Background(), h.store.Keys().Run(0, a.JobID, a.ScheduledAt))
		if err != nil || len(kv.Kvs) != 1 {
			t.Fatalf("reading run %s: %v", a.RunID, err)
		}
		return kv.Kvs[0].ModRevision
	}
	if g, r := rev(resp.Attempts[0]), rev(first); g != r {
		t.Fatalf("the attempt was recorded at revision %d and the result at %d, want one write", g, r)
	}
}

// dueHerd creates jobs herd-0 … herd-(n-1), every second, and lets one
// run of each come due.
func (h *harness) dueHerd(n int) {
	h.t.Helper()
	for i := range n {
		h.create(api.Job{ID: fmt.Sprintf("herd-%d", i), Schedule: "@every 1s"})
	}
	h.advance(time.Second)
	for i := range n {
		h.waitRuns(fmt.Sprintf("herd-%d", i), 1)
	}
}
