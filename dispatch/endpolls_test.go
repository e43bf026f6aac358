package dispatch_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/jobfleet/jobfleet/api"
)

// TestEndPollsAnswersTheWorkersPolls: a stopping worker ends its polls
// (api.EndPollsRequest). Its waiting poll answers at once, and so does a
// poll of it that arrives afterwards, with nothing although runs wait
// (the fake clock stands still: only the end can answer them); another
// credential cannot end them. Once the worker registers anew (a
// restart), its polls take runs again; restarted with its registration
// alive (its deregistration failed), once the hold has passed.
func TestEndPollsAnswersTheWorkersPolls(t *testing.T) {
	h := newHarness(t)
	reg := h.withRegistry("m1")
	h.start("m1")
	register(t, reg, "w-stop", "cred-a")
	waitWorkers(t, reg, "w-stop")
	h.create(api.Job{ID: "a", Schedule: "@every 1h"})
	h.create(api.Job{ID: "b", Schedule: "@every 1h"})
	h.advance(time.Hour)
	h.waitFor("the runs to be dispatchable", func() bool { return h.disp.Stats().Waiting == 2 })

	// A poll for another executor type waits, the runs notwithstanding.
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
	end := func() {
		t.Helper()
		if err := h.disp.EndPolls(context.Background(), api.EndPollsRequest{Worker: "w-stop", Credential: "cred-a"}); err != nil {
			t.Fatalf("EndPolls: %v", err)
		}
	}
	end()
	select {
	case res := <-done:
		if res.err != nil || len(res.resp.Attempts) != 0 {
			t.Fatalf("ended poll = %+v, %v; want no attempt", res.resp, res.err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the waiting poll did not answer within 10s of its end")
	}

	// A poll sent before the end but arriving after it takes nothing.
	held := func(when string) {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		resp, err := h.disp.Poll(ctx, api.PollRequest{Worker: "w-stop", Credential: "cred-a", Executors: []string{"http"}, Max: 1, Wait: api.Duration(api.MaxPollWait)})
		if err != nil || len(resp.Attempts) != 0 || ctx.Err() != nil {
			t.Fatalf("poll %s = %+v, %v (context: %v); want no attempt at once", when, resp, err, ctx.Err())
		}
	}
	held("after the end")
	takes := func(when string) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for {
			resp, err := h.disp.Poll(context.Background(), api.PollRequest{Worker: "w-stop", Credential: "cred-a", Executors: []string{"http"}, Max: 1})
			if err != nil {
				t.Fatal(err)
			}
			if len(resp.Attempts) == 1 {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("the worker, %s, takes nothing after 10s", when)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}

	// Restarted: a new registration, and polls take runs again.
	if err := reg.Deregister(context.Background(), api.DeregisterRequest{Worker: "w-stop", Credential: "cred-a"}); err != nil {
		t.Fatal(err)
	}
	register(t, reg, "w-stop", "cred-a")
	takes("registered anew")

	// Restarted at once with its registration alive: the same
	// registration, held until the hold has passed.
	end()
	register(t, reg, "w-stop", "cred-a")
	held("of the worker restarted with its registration alive")
	h.clock.Advance(api.EndPollsHold)
	takes("past the hold")
}

// TestEndPollsHoldsOnlyRegisteredWorkers: an end request for an ID this
// member shows no registration of ends the polls in progress but leaves
// no mark (a credential cannot fill the member's memory with the marks of
// made-up IDs); nor does one saying the worker keeps polling (it only
// took this member off its list), whose later polls take runs at once.
func TestEndPollsHoldsOnlyRegisteredWorkers(t *testing.T) {
	h := newHarness(t)
	reg := h.withRegistry("m1")
	h.start("m1")
	for i := range 100 {
		if err := h.disp.EndPolls(context.Background(), api.EndPollsRequest{Worker: fmt.Sprintf("made-up-%d", i), Credential: "cred-x"}); err != nil {
			t.Fatal(err)
		}
	}
	if n := h.disp.EndedMarks(); n != 0 {
		t.Fatalf("%d marks after end requests for unregistered IDs, want 0", n)
	}

	register(t, reg, "w-on", "cred-a")
	waitWorkers(t, reg, "w-on")
	h.create(api.Job{ID: "a", Schedule: "@every 1h"})
	h.advance(time.Hour)
	h.waitFor("the run to be dispatchable", func() bool { return h.disp.Stats().Waiting == 1 })
	done := make(chan error, 1)
	go func() {
		resp, err := h.disp.Poll(context.Background(), api.PollRequest{Worker: "w-on", Credential: "cred-a", Executors: []string{"shell"}, Max: 1, Wait: api.Duration(api.MaxPollWait)})
		if err == nil && len(resp.Attempts) != 0 {
			err = fmt.Errorf("%d attempts, want none", len(resp.Attempts))
		}
		done <- err
	}()
	h.waitFor("the poll to wait", func() bool { return h.disp.PollsInProgress() == 1 })
	if err := h.disp.EndPolls(context.Background(), api.EndPollsRequest{Worker: "w-on", Credential: "cred-a", KeepPolling: true}); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("the ended poll: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the waiting poll did not answer within 10s of its end")
	}
	if n := h.disp.EndedMarks(); n != 0 {
		t.Fatalf("%d marks after an end that keeps polling, want 0", n)
	}
	if a := h.takeAs("w-on", "cred-a"); a.JobID != "a" {
		t.Fatalf("took %+v after an end that keeps polling, want the run of a", a)
	}
}
