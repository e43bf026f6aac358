package dispatch_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jobfleet/jobfleet/api"
	"github.com/jobfleet/jobfleet/dispatch"
)

var hook = api.Executor{Type: "http", URL: "http://127.0.0.1:9/hook"}

// step returns a step of the test's http executor.
func step(id string, when api.StepWhen, needs ...string) api.Step {
	return api.Step{ID: id, Needs: needs, When: when, Executor: hook}
}

// stepGrants polls as worker until it has n attempts (waiting up to 10s
// real time for each batch) and returns them sorted by step, then shard.
func (h *harness) stepGrants(worker string, n int) []api.AttemptGrant {
	h.t.Helper()
	var out []api.AttemptGrant
	for len(out) < n {
		as := h.pollItems(worker, n-len(out), 10*time.Second)
		if len(as) == 0 {
			h.t.Fatalf("polled %s, want %d attempts", steps(out), n)
		}
		out = append(out, as...)
	}
	slices.SortFunc(out, func(a, b api.AttemptGrant) int { return a.Item.Index - b.Item.Index })
	return out
}

// steps names the grants' steps: "a,b/0,b/1".
func steps(as []api.AttemptGrant) string {
	var out []string
	for _, a := range as {
		switch {
		case a.Step == nil:
			out = append(out, "?")
		case a.Step.Shards > 0:
			out = append(out, fmt.Sprintf("%s/%d", a.Step.ID, a.Step.Shard))
		default:
			out = append(out, a.Step.ID)
		}
	}
	return strings.Join(out, ",")
}

// finish reports step attempt a as worker, with result (none if "").
func (h *harness) finish(a api.AttemptGrant, worker string, success bool, result string) api.CompleteResponse {
	h.t.Helper()
	req := api.CompleteRequest{Worker: worker, RunID: a.RunID, Attempt: a.Attempt, Item: &a.Item.Index, Success: success}
	if !success {
		req.Error = "step failed"
	}
	if result != "" {
		req.Result = json.RawMessage(result)
	}
	resp, err := h.disp.Complete(context.Background(), req)
	if err != nil {
		h.t.Fatalf("complete %s: %v", steps([]api.AttemptGrant{a}), err)
	}
	return resp
}

// nothingFor asserts that a poll as worker gets nothing now.
func (h *harness) nothingFor(worker string) {
	h.t.Helper()
	if as := h.pollItems(worker, 10, 0); len(as) != 0 {
		h.t.Fatalf("poll got %s, want nothing yet", steps(as))
	}
}

func stepStatuses(r api.Run) string {
	var out []string
	for _, s := range r.Steps {
		out = append(out, s.ID+"="+string(s.Status))
	}
	return strings.Join(out, " ")
}

// TestStepsInOrderWithResults: each step starts only once the steps it
// needs have succeeded, receives their results (a sharded step's as an
// array), retries on its own; a dead step skips the steps that need it
// on success, runs those that need it on failure or always, and the run
// is dead.
func TestStepsInOrderWithResults(t *testing.T) {
	h := newHarness(t)
	h.start("m1")
	load := step("load", "", "transform")
	load.Retry = api.RetryPolicy{MaxAttempts: 2, InitialBackoff: api.Duration(time.Second)}
	transform := step("transform", "", "extract")
	transform.Shards = &api.Shards{Count: 2}
	h.create(api.Job{ID: "etl", Schedule: "@every 1h", Steps: []api.Step{
		step("extract", ""), transform, load,
		step("report", "", "load"),
		step("cleanup", api.StepAlways, "load"),
		step("alert", api.StepOnFailure, "load"),
	}})
	h.advance(time.Hour)
	runID := h.waitRuns("etl", 1)[0].ID

	as := h.stepGrants("w1", 1)
	if steps(as) != "extract" || as[0].Step.Needs != nil {
		t.Fatalf("first grants %s (needs %s), want extract alone, needing nothing", steps(as), as[0].Step.Needs)
	}
	h.nothingFor("w1")
	h.finish(as[0], "w1", true, `{"rows": 3}`)

	as = h.stepGrants("w1", 2)
	if steps(as) != "transform/0,transform/1" || string(as[0].Step.Needs) != `{"extract":{"rows":3}}` {
		t.Fatalf("grants %s needs %s, want both shards of transform with extract's result", steps(as), as[0].Step.Needs)
	}
	h.finish(as[1], "w1", true, `"us"`)
	h.nothingFor("w1") // load waits for the whole of transform
	h.finish(as[0], "w1", true, `"eu"`)

	as = h.stepGrants("w1", 1)
	if steps(as) != "load" || string(as[0].Step.Needs) != `{"transform":["eu","us"]}` || as[0].Attempt != 1 {
		t.Fatalf("grants %s needs %s, want load's attempt 1 with transform's results by shard", steps(as), as[0].Step.Needs)
	}
	if resp := h.finish(as[0], "w1", false, ""); resp.Status != api.RunFailed {
		t.Fatalf("load's first failure: %s, want failed (a retry follows)", resp.Status)
	}
	h.nothingFor("w1") // the retry's backoff; nothing else may start
	h.advance(2 * time.Second)
	as = h.stepGrants("w1", 1)
	if steps(as) != "load" || as[0].Attempt != 2 {
		t.Fatalf("grants %s attempt %d, want load's retry", steps(as), as[0].Attempt)
	}
	h.finish(as[0], "w1", false, "")

	as = h.stepGrants("w1", 2)
	if steps(as) != "cleanup,alert" {
		t.Fatalf("after load died: %s, want cleanup (always) and alert (failure)", steps(as))
	}
	h.finish(as[0], "w1", true, "")
	h.finish(as[1], "w1", true, "")
	r := h.waitRun(runID, func(r api.Run) bool { return r.Status.Final() })
	want := "extract=succeeded transform=succeeded load=dead report=skipped cleanup=succeeded alert=succeeded"
	if r.Status != api.RunDead || stepStatuses(r) != want {
		t.Fatalf("run %s, steps %s; want dead, %s", r.Status, stepStatuses(r), want)
	}
	if rep := r.Steps[3]; !strings.Contains(rep.Reason, `"load" dead`) {
		t.Errorf("report skipped with reason %q, want it to name load", rep.Reason)
	}
	for _, it := range r.Items {
		wantAttempts := 1
		switch it.Step {
		case "load":
			wantAttempts = 2
		case "report":
			wantAttempts = 0
		}
		if len(it.Attempts) != wantAttempts {
			t.Errorf("item %d (%s) made %d attempts, want %d", it.Index, it.Step, len(it.Attempts), wantAttempts)
		}
	}
	if string(r.Items[0].Result) != `{"rows":3}` {
		t.Errorf("extract's recorded result %s, want it compacted", r.Items[0].Result)
	}
}

// TestStepFailureOnlyOnFailure: a "failure" step is skipped when the
// steps it needs succeeded, and runs when one was skipped because a step
// before it died; the "success" steps after a dead one are skipped.
func TestStepFailureOnlyOnFailure(t *testing.T) {
	h := newHarness(t)
	h.start("m1")
	h.create(api.Job{ID: "flow", Schedule: "@every 1h", Steps: []api.Step{
		step("a", ""),
		step("on-a-failed", api.StepOnFailure, "a"),
		step("b", "", "a"),
		step("c", "", "b"),
		step("on-c-failed", api.StepOnFailure, "c"),
		step("after-handler", "", "on-a-failed"),
	}})
	h.advance(time.Hour)
	runID := h.waitRuns("flow", 1)[0].ID
	h.finish(h.stepGrants("w1", 1)[0], "w1", true, "")
	as := h.stepGrants("w1", 1)
	if steps(as) != "b" {
		t.Fatalf("after a succeeded: %s, want b alone (on-a-failed skipped)", steps(as))
	}
	h.finish(as[0], "w1", false, "")
	as = h.stepGrants("w1", 1)
	if steps(as) != "on-c-failed" {
		t.Fatalf("after b died: %s, want on-c-failed (c skipped for b's failure)", steps(as))
	}
	h.finish(as[0], "w1", true, "")
	r := h.waitRun(runID, func(r api.Run) bool { return r.Status.Final() })
	want := "a=succeeded on-a-failed=skipped b=dead c=skipped on-c-failed=succeeded after-handler=skipped"
	if r.Status != api.RunDead || stepStatuses(r) != want {
		t.Fatalf("run %s, steps %s; want dead, %s", r.Status, stepStatuses(r), want)
	}
}

// TestStepsHandoffMidRun: the partition's owner changes between two
// steps: the new owner hands out the next step only, the finished one is
// not run again, and the run ends with every step once.
func TestStepsHandoffMidRun(t *testing.T) {
	h := newHarness(t)
	h.start("m1")
	h.create(api.Job{ID: "two", Schedule: "@every 1h", Steps: []api.Step{step("first", ""), step("second", "", "first")}})
	h.advance(time.Hour)
	runID := h.waitRuns("two", 1)[0].ID
	h.finish(h.stepGrants("w1", 1)[0], "w1", true, `[1,2]`)
	h.stop()
	h.start("m2")
	as := h.stepGrants("w1", 1)
	if steps(as) != "second" || string(as[0].Step.Needs) != `{"first":[1,2]}` || as[0].Owner != "m2" {
		t.Fatalf("after the handoff: %s from %s needs %s; want second from m2 with first's result", steps(as), as[0].Owner, as[0].Step.Needs)
	}
	h.nothingFor("w1")
	h.finish(as[0], "w1", true, "")
	r := h.waitRun(runID, func(r api.Run) bool { return r.Status.Final() })
	if r.Status != api.RunSucceeded || len(r.Items[0].Attempts) != 1 || len(r.Items[1].Attempts) != 1 {
		t.Fatalf("run %s, steps %s; want succeeded with one attempt of each step", r.Status, stepStatuses(r))
	}
}

// TestStepResultLimits: a result over the step cap is refused by the
// protocol (400: changes nothing); results that would take the run's
// past its cap fail the attempt, saying so.
func TestStepResultLimits(t *testing.T) {
	h := newHarness(t)
	h.start("m1")
	var ss []api.Step
	for i := range 5 {
		ss = append(ss, step(fmt.Sprintf("s%d", i), ""))
	}
	h.create(api.Job{ID: "big", Schedule: "@every 1h", Steps: ss})
	h.advance(time.Hour)
	runID := h.waitRuns("big", 1)[0].ID
	as := h.stepGrants("w1", 5)
	full := `"` + strings.Repeat("x", api.MaxStepResultBytes-2) + `"`
	over := `"` + strings.Repeat("x", api.MaxStepResultBytes-1) + `"`
	_, err := h.disp.Complete(context.Background(), api.CompleteRequest{Worker: "w1", RunID: runID, Attempt: 1, Item: &as[0].Item.Index, Success: true, Result: json.RawMessage(over)})
	if !errors.Is(err, dispatch.ErrBadRequest) {
		t.Fatalf("a result of %d bytes: %v, want ErrBadRequest", len(over), err)
	}
	for i := range 4 {
		if resp := h.finish(as[i], "w1", true, full); resp.Status != api.RunSucceeded {
			t.Fatalf("result %d of 64 KiB: %s, want succeeded (4 fit the run's 256 KiB)", i, resp.Status)
		}
	}
	if resp := h.finish(as[4], "w1", true, full); resp.Status != api.RunDead {
		t.Fatalf("fifth result of 64 KiB: %s, want dead (over the run's results cap)", resp.Status)
	}
	r := h.waitRun(runID, func(r api.Run) bool { return r.Status.Final() })
	if a := r.Items[4].Attempts[0]; !strings.Contains(a.Error, "more than the 262144 a run keeps") {
		t.Fatalf("fifth attempt's error %q, want it to name the run's cap", a.Error)
	}
	if r.ResultsBytes() != 4*len(full) {
		t.Fatalf("run keeps %d bytes of results, want %d", r.ResultsBytes(), 4*len(full))
	}
}
