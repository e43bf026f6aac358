package worker_test

import (
	"context"
	"encoding/json"
	"strings"
	"sync"
	"testing"

	"github.com/jobfleet/jobfleet/api"
	"github.com/jobfleet/jobfleet/dispatch/worker"
)

// stepAssignment returns an attempt of step id of run runID, needing
// the results needs (none if "").
func stepAssignment(f *fakeOrch, runID, id string, ex api.Executor, needs string) api.AttemptGrant {
	a := f.assignment(runID, ex, `{"p":1}`)
	a.Item = &api.ItemGrant{Index: 2, Count: 4}
	a.Step = &api.StepGrant{ID: id}
	if needs != "" {
		a.Step.Needs = json.RawMessage(needs)
	}
	return a
}

// TestStepResultsReachDependents: a step's attempt gets the results of
// the steps it needs (an http request's body, a command's needs file, a
// handler's Run.Needs) and reports its own result: a JSON response body,
// the last line of a command's standard output when it is JSON, what a
// handler returns; a body that is not JSON, or a handler's result over
// the cap, gives none or fails.
func TestStepResultsReachDependents(t *testing.T) {
	requireShell(t)
	f := newFakeOrch(t, "a", nil)
	jsonSrv, reqs := newReceiver(t, 200, `{"loaded": 7}`)
	textSrv, _ := newReceiver(t, 200, "plain text")
	var mu sync.Mutex
	var handled []worker.Run
	startWorker(t, worker.Config{Orchestrators: worker.StaticOrchestrators(f.URL()), AllowShell: true}, func(w *worker.Worker) {
		if err := w.HandleStep("load", func(_ context.Context, r worker.Run) (json.RawMessage, error) {
			mu.Lock()
			defer mu.Unlock()
			handled = append(handled, r)
			return json.RawMessage(`{"ok": true}`), nil
		}); err != nil {
			t.Fatal(err)
		}
		if err := w.HandleStep("huge", func(context.Context, worker.Run) (json.RawMessage, error) {
			return json.RawMessage(`"` + strings.Repeat("x", api.MaxStepResultBytes) + `"`), nil
		}); err != nil {
			t.Fatal(err)
		}
	})
	shell := api.Executor{Type: "shell", Command: []string{"sh", "-c", `echo "step $JOBFLEET_STEP" >&2; echo not json; cat "$JOBFLEET_NEEDS_FILE"; echo; echo '{"file": "'"$JOBFLEET_NEEDS_FILE"'"}'`}}
	f.enqueue(
		stepAssignment(f, "http-step", "extract", api.Executor{Type: "http", URL: jsonSrv.URL}, `{"a":1}`),
		stepAssignment(f, "text-step", "t", api.Executor{Type: "http", URL: textSrv.URL}, ""),
		stepAssignment(f, "shell-step", "transform", shell, `{"extract":{"n":2}}`),
		stepAssignment(f, "handler-step", "load", api.Executor{Type: "load"}, `{"transform":[1,null]}`),
		stepAssignment(f, "huge-step", "huge", api.Executor{Type: "huge"}, ""),
	)
	got := recv(t, reqs, "the step's request")
	if got.body != `{"needs":{"a":1},"payload":{"p":1}}` || got.header.Get(worker.HeaderStep) != "extract" {
		t.Errorf("http step: body %q, step header %q; want needs and payload, step extract", got.body, got.header.Get(worker.HeaderStep))
	}
	if c := f.waitComplete(t, "http-step"); !c.Success || string(c.Result) != `{"loaded":7}` {
		t.Errorf("http step's completion %+v, want its JSON body as result", c)
	}
	if c := f.waitComplete(t, "text-step"); !c.Success || c.Result != nil {
		t.Errorf("text step's completion %+v, want success without a result", c)
	}
	c := f.waitComplete(t, "shell-step")
	var res struct{ File string }
	if err := json.Unmarshal(c.Result, &res); err != nil || !c.Success || res.File == "" || !strings.Contains(c.Output, `{"extract":{"n":2}}`) || !strings.Contains(c.Output, "step transform") {
		t.Fatalf("shell step's completion %+v (%v), want the needs file's content in its output and its last line as result", c, err)
	}
	if c := f.waitComplete(t, "handler-step"); !c.Success || string(c.Result) != `{"ok":true}` {
		t.Errorf("handler step's completion %+v, want its result", c)
	}
	if c := f.waitComplete(t, "huge-step"); c.Success || !strings.Contains(c.Error, "at most 65536 bytes") {
		t.Errorf("huge result's completion success=%v error %q, want a failure naming the cap", c.Success, c.Error)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(handled) != 1 || handled[0].Step != "load" || string(handled[0].Needs["transform"]) != "[1,null]" {
		t.Fatalf("handler got %+v, want step load with transform's results", handled)
	}
}
