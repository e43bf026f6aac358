package dispatch_test

import (
	"context"
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
	release, ok := h.disp.HoldWriter(runs[0].Partition)
	if !ok {
		t.Fatal("the job's partition is not loaded here")
	}
	defer func() {
		if release != nil {
			release()
		}
	}()
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
	release = nil
	if resp := <-got; len(resp.Attempts) != 1 || resp.Attempts[0].RunID != runs[0].ID {
		t.Fatalf("team-a's poll got %v once the writer was free, want run %s", resp.Attempts, runs[0].ID)
	}
}
