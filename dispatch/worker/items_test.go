package worker_test

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/jobfleet/jobfleet/api"
	"github.com/jobfleet/jobfleet/dispatch/worker"
)

// itemAssignment returns attempt 2 of item index of count of run runID,
// with param (none if "").
func itemAssignment(f *fakeOrch, runID string, ex api.Executor, payload string, index, count int, param string) api.AttemptGrant {
	a := f.assignment(runID, ex, payload)
	a.Attempt = 2
	a.Item = &api.ItemGrant{Index: index, Count: count}
	if param != "" {
		a.Item.Param = json.RawMessage(param)
	}
	return a
}

// TestItemAttemptsGetTheirItem: a worker says it takes items; an item's
// attempt reaches each executor with its index, count and parameter (an
// http request's headers and body, a command's variables, a handler's
// Run), secret references in the parameter resolved; its heartbeats and
// its completion name the item.
func TestItemAttemptsGetTheirItem(t *testing.T) {
	requireShell(t)
	t.Setenv("ITEM_SECRET", "s3cret")
	f := newFakeOrch(t, "a", nil)
	recvSrv, reqs := newReceiver(t, 200, "ok")
	var mu sync.Mutex
	var handled []worker.Run
	startWorker(t, worker.Config{Orchestrators: worker.StaticOrchestrators(f.URL()), AllowShell: true, SecretEnv: []string{"ITEM_SECRET"}}, func(w *worker.Worker) {
		mustHandle(t, w, "reindex", func(_ context.Context, r worker.Run) error {
			mu.Lock()
			defer mu.Unlock()
			handled = append(handled, r)
			return nil
		})
	})
	f.enqueue(
		itemAssignment(f, "http-item", api.Executor{Type: "http", URL: recvSrv.URL + "/hook"}, "", 3, 16, `{"region":"eu","token":{"secret_env":"ITEM_SECRET"}}`),
		itemAssignment(f, "http-count", api.Executor{Type: "http", URL: recvSrv.URL + "/hook"}, `{"p":1}`, 0, 2, ""),
		itemAssignment(f, "shell-item", api.Executor{Type: "shell", Command: []string{"sh", "-c", `printf '%s|%s|%s|' "$JOBFLEET_SHARD_INDEX" "$JOBFLEET_SHARD_COUNT" "$JOBFLEET_SHARD_PARAM"; cat`}}, `{"stdin":true}`, 7, 9, `"ap"`),
		itemAssignment(f, "handler-item", api.Executor{Type: "reindex"}, `{"all":1}`, 1, 3, `[1,2]`),
	)
	bodies := map[string]received{}
	for range 2 {
		got := recv(t, reqs, "an item's request")
		bodies[got.header.Get(worker.HeaderRunID)] = got
	}
	if got := bodies["http-item"]; got.body != `{"region":"eu","token":"s3cret"}` || got.header.Get(worker.HeaderShardIndex) != "3" || got.header.Get(worker.HeaderShardCount) != "16" || got.header.Get(worker.HeaderAttempt) != "2" {
		t.Errorf("http item with a parameter: body %q, headers %v; want the resolved parameter as body, index 3 of 16", got.body, got.header)
	}
	if got := bodies["http-count"]; got.body != `{"p":1}` || got.header.Get(worker.HeaderShardIndex) != "0" || got.header.Get(worker.HeaderShardCount) != "2" {
		t.Errorf("http item without a parameter: body %q, headers %v; want the payload, index 0 of 2", got.body, got.header)
	}
	if c := f.waitComplete(t, "shell-item"); c.Output != `7|9|"ap"|{"stdin":true}` || c.Item == nil || *c.Item != 7 {
		t.Errorf("shell item: output %q, item %v; want index, count, parameter and the payload on stdin, reported as item 7", c.Output, c.Item)
	}
	for _, id := range []string{"http-item", "http-count", "handler-item"} {
		c := f.waitComplete(t, id)
		if c.Item == nil || !c.Success {
			t.Errorf("completion of %s = %+v, want a success naming its item", id, c)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if len(handled) != 1 || handled[0].ShardIndex != 1 || handled[0].ShardCount != 3 || string(handled[0].ShardParam) != "[1,2]" || string(handled[0].Payload) != `{"all":1}` {
		t.Fatalf("handler got %+v, want item 1 of 3 with its parameter and the payload", handled)
	}
	polls, _, _, _ := f.snapshot()
	if len(polls) == 0 || !slices.Contains(polls[0].Features, api.FeatureItems) {
		t.Fatalf("polls %+v, want them to declare %q", polls, api.FeatureItems)
	}
}

// TestRunOfOneItemHasNoShardFields: an attempt of a run without items
// gets no shard header, variable or field, and its reports name no item.
func TestRunOfOneItemHasNoShardFields(t *testing.T) {
	requireShell(t)
	f := newFakeOrch(t, "a", nil)
	recvSrv, reqs := newReceiver(t, 200, "ok")
	startWorker(t, worker.Config{Orchestrators: worker.StaticOrchestrators(f.URL()), AllowShell: true}, nil)
	f.enqueue(f.assignment("plain", api.Executor{Type: "http", URL: recvSrv.URL}, ""),
		f.assignment("plain-shell", api.Executor{Type: "shell", Command: []string{"sh", "-c", `env | grep JOBFLEET_SHARD || true`}}, ""))
	got := recv(t, reqs, "the request")
	if got.header.Get(worker.HeaderShardIndex) != "" || got.header.Get(worker.HeaderShardCount) != "" {
		t.Errorf("plain run's headers %v carry shard headers", got.header)
	}
	for _, id := range []string{"plain", "plain-shell"} {
		if c := f.waitComplete(t, id); c.Item != nil || strings.Contains(c.Output, "JOBFLEET_SHARD") {
			t.Errorf("%s completion %+v, want no item and no shard variable", id, c)
		}
	}
}
