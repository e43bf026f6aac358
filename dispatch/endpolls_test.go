package dispatch_test

import (
	"context"
	"testing"
	"time"

	"github.com/jobfleet/jobfleet/api"
)

// TestEndPollsAnswersTheWorkersPolls: a stopping worker ends its polls
// (api.EndPollsRequest). Its waiting poll answers at once, and so does a
// poll of it that arrives afterwards, with nothing although a run waits
// (the fake clock stands still: only the end can answer them); another
// credential cannot end them; once the worker registers anew (a
// restart), its polls take runs again.
func TestEndPollsAnswersTheWorkersPolls(t *testing.T) {
	h := newHarness(t)
	reg := h.withRegistry("m1")
	h.start("m1")
	register(t, reg, "w-stop", "cred-a")
	waitWorkers(t, reg, "w-stop")
	h.create(api.Job{ID: "a", Schedule: "@every 1h"})
	h.advance(time.Hour)
	h.waitFor("the run to be dispatchable", func() bool { return h.disp.Stats().Waiting == 1 })

	// A poll for another executor type waits, the run notwithstanding.
	type result struct {
		resp api.PollResponse
		err  error
	}
	done := make(chan result, 1)
	go func() {
		resp, err := h.disp.Poll(context.Background(), api.PollRequest{Worker: "w-stop", Credential: "cred-a", Executors: []string{"shell"}, Max: 1, Wait: api.Duration(api.MaxPollWait)})
		done <- result{resp, err}
	}()
	h.waitFor("the poll to wait", func() bool { return h.disp.PollsInProgress() == 1 })

	if err := h.disp.EndPolls(context.Background(), api.EndPollsRequest{Worker: "w-stop", Credential: "cred-b"}); err == nil {
		t.Fatal("another credential ended w-stop's polls")
	}
	select {
	case res := <-done:
		t.Fatalf("the poll answered %+v, %v after another credential's end request", res.resp, res.err)
	default:
	}
	if err := h.disp.EndPolls(context.Background(), api.EndPollsRequest{Worker: "w-stop", Credential: "cred-a"}); err != nil {
		t.Fatalf("EndPolls: %v", err)
	}
	select {
	case res := <-done:
		if res.err != nil || len(res.resp.Attempts) != 0 {
			t.Fatalf("ended poll = %+v, %v; want no attempt", res.resp, res.err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the waiting poll did not answer within 10s of its end")
	}

	// A poll sent before the end but arriving after it takes nothing.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := h.disp.Poll(ctx, api.PollRequest{Worker: "w-stop", Credential: "cred-a", Executors: []string{"http"}, Max: 1, Wait: api.Duration(api.MaxPollWait)})
	if err != nil || len(resp.Attempts) != 0 || ctx.Err() != nil {
		t.Fatalf("poll after the end = %+v, %v (context: %v); want no attempt at once", resp, err, ctx.Err())
	}
	if n := h.disp.Stats().Waiting; n != 1 {
		t.Fatalf("%d runs waiting after the ended polls, want 1", n)
	}

	// Restarted: a new registration, and polls take runs again.
	if err := reg.Deregister(context.Background(), api.DeregisterRequest{Worker: "w-stop", Credential: "cred-a"}); err != nil {
		t.Fatal(err)
	}
	register(t, reg, "w-stop", "cred-a")
	deadline := time.Now().Add(10 * time.Second)
	for {
		resp, err := h.disp.Poll(context.Background(), api.PollRequest{Worker: "w-stop", Credential: "cred-a", Executors: []string{"http"}, Max: 1})
		if err != nil {
			t.Fatal(err)
		}
		if len(resp.Attempts) == 1 {
			if resp.Attempts[0].JobID != "a" {
				t.Fatalf("took %+v, want a run of job a", resp.Attempts[0])
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the worker, registered anew, takes nothing after 10s")
		}
		time.Sleep(5 * time.Millisecond)
	}
}
