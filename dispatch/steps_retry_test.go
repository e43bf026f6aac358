package dispatch_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/jobfleet/jobfleet/api"
	"github.com/jobfleet/jobfleet/store"
)

// TestRetryFromStep: a dead run of steps is started again from the step
// that died: that step and the steps after it run again, in round 1 of
// the same run, with the results of the steps before it; the earlier
// steps are not run again. Retrying a run that has not ended, or from a
// step it does not have, is refused and changes nothing.
func TestRetryFromStep(t *testing.T) {
	h := newHarness(t)
	h.start("m1")
	h.create(api.Job{ID: "etl", Schedule: "@every 1h", Steps: []api.Step{
		step("extract", ""), step("load", "", "extract"), step("notify", "", "load"),
	}})
	h.advance(time.Hour)
	runID := h.waitRuns("etl", 1)[0].ID
	ctx := context.Background()
	if _, err := h.store.RequestRetry(ctx, runID, "load", "cred"); !errors.Is(err, store.ErrNotRetryable) || !strings.Contains(err.Error(), "wait for it to end") {
		t.Fatalf("retry of a pending run: %v, want refused as not ended", err)
	}
	h.finish(h.stepGrants("w1", 1)[0], "w1", true, `{"file":"x.csv"}`)
	h.finish(h.stepGrants("w1", 1)[0], "w1", false, "")
	r := h.waitRun(runID, func(r api.Run) bool { return r.Status.Final() })
	if r.Status != api.RunDead || stepStatuses(r) != "extract=succeeded load=dead notify=skipped" {
		t.Fatalf("round 0 ended %s, %s; want dead at load", r.Status, stepStatuses(r))
	}
	if _, err := h.store.RequestRetry(ctx, runID, "nope", "cred"); !errors.Is(err, store.ErrNotRetryable) || !strings.Contains(err.Error(), `no step "nope"`) {
		t.Fatalf("retry from an unknown step: %v, want refused naming it", err)
	}
	if _, err := h.store.RequestRetry(ctx, runID, "load", "cred"); err != nil {
		t.Fatal(err)
	}
	r = h.waitRun(runID, func(r api.Run) bool { return r.Round == 1 })
	if r.Status.Final() || len(r.Rounds) != 1 || r.Rounds[0].Status != api.RunDead || r.Rounds[0].From != "load" || r.Rounds[0].By != "cred" {
		t.Fatalf("after the retry: %s, rounds %+v; want it active again, round 0 recorded dead, from load, by cred", r.Status, r.Rounds)
	}
	as := h.stepGrants("w1", 1)
	if steps(as) != "load" || as[0].Round != 1 || as[0].Attempt != 1 || string(as[0].Step.Needs) != `{"extract":{"file":"x.csv"}}` {
		t.Fatalf("round 1 grants %s round %d attempt %d needs %s; want load again, attempt 1 of round 1, with extract's result", steps(as), as[0].Round, as[0].Attempt, as[0].Step.Needs)
	}
	h.finish(as[0], "w1", true, "")
	as = h.stepGrants("w1", 1)
	if steps(as) != "notify" {
		t.Fatalf("then %s, want notify", steps(as))
	}
	h.finish(as[0], "w1", true, "")
	r = h.waitRun(runID, func(r api.Run) bool { return r.Status.Final() })
	if r.Status != api.RunSucceeded || len(r.Items[0].Attempts) != 1 {
		t.Fatalf("round 1 ended %s with extract run %d times; want succeeded, extract once", r.Status, len(r.Items[0].Attempts))
	}
	if _, err := h.store.RequestRetry(ctx, runID, "load", "cred"); !errors.Is(err, store.ErrNotRetryable) {
		t.Fatalf("retry of a succeeded run: %v, want refused", err)
	}
}
