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

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/jobfleet/jobfleet/api"
	"github.com/jobfleet/jobfleet/dispatch"
	"github.com/jobfleet/jobfleet/dispatch/workers"
)

// keepRegistered registers workers with reg (serving http, credential
// "") and keeps them registered until stop is called or the test ends
// (keepRegistering).
func keepRegistered(t *testing.T, reg *workers.Registry, ids ...string) (stop func()) {
	t.Helper()
	reqs := make([]api.RegisterRequest, len(ids))
	for i, id := range ids {
		reqs[i] = api.RegisterRequest{Worker: id, Executors: []string{"http"}, Concurrency: 2}
	}
	return keepRegistering(t, reg, reqs...)
}

// keepRegistering makes the registrations reqs with reg now, failing the
// test if one fails, and again every 300ms (etcd's real time: the
// registry's TTL is 2s) until stop is called or the test ends.
func keepRegistering(t *testing.T, reg *workers.Registry, reqs ...api.RegisterRequest) (stop func()) {
	t.Helper()
	for _, req := range reqs {
		if _, err := reg.Register(context.Background(), req); err != nil {
			t.Fatalf("register %s: %v", req.Worker, err)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		tick := time.NewTicker(300 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			for _, req := range reqs {
				_, _ = reg.Register(ctx, req)
			}
		}
	}()
	stop = func() { cancel(); <-done }
	t.Cleanup(stop)
	return stop
}

// pollItems polls as worker, speaking items, for up to max attempts; it
// waits up to wait (real time) for some.
func (h *harness) pollItems(worker string, max int, wait time.Duration) []api.AttemptGrant {
	h.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := h.disp.Poll(ctx, api.PollRequest{Worker: worker, Executors: []string{"http"}, Max: max, Wait: api.Duration(wait), Features: []string{api.FeatureItems}})
	if err != nil {
		h.t.Fatalf("poll as %s: %v", worker, err)
	}
	return resp.Attempts
}

// completeItem reports item attempt a as worker.
func (h *harness) completeItem(a api.AttemptGrant, worker string, success bool) (api.CompleteResponse, error) {
	var msg string
	if !success {
		msg = "item failed"
	}
	return h.disp.Complete(context.Background(), api.CompleteRequest{Worker: worker, RunID: a.RunID, Attempt: a.Attempt, Item: &a.Item.Index, Success: success, Error: msg})
}

func (h *harness) heartbeatItem(a api.AttemptGrant, worker string) (api.HeartbeatResponse, error) {
	return h.disp.Heartbeat(context.Background(), api.HeartbeatRequest{Worker: worker, RunID: a.RunID, Attempt: a.Attempt, Item: &a.Item.Index})
}

func indexes(as []api.AttemptGrant) string {
	var out []string
	for _, a := range as {
		if a.Item == nil {
			out = append(out, "run")
			continue
		}
		out = append(out, fmt.Sprintf("%d/%d", a.Item.Index, a.Item.Count))
	}
	return strings.Join(out, ",")
}

// TestShardedRunOnOneWorker: one fire makes one run of five items, handed
// out two at a time (max_parallel), each with its index, count and
// parameter; a worker that does not speak items gets none; the run
// succeeds when every item has, each recorded once with its worker.
func TestShardedRunOnOneWorker(t *testing.T) {
	h := newHarness(t)
	h.start("m1")
	params := []string{`"a"`, `"b"`, `{"c":3}`, `4`, `null`}
	var raw []json.RawMessage
	for _, p := range params {
		raw = append(raw, json.RawMessage(p))
	}
	h.create(api.Job{ID: "shards", Schedule: "@every 1h", Shards: &api.Shards{Params: raw, MaxParallel: 2}})
	h.advance(time.Hour)
	runID := h.waitRuns("shards", 1)[0].ID

	if as := h.pollAs("old-worker", "", "", 5, 0); len(as) != 0 {
		t.Fatalf("a worker that does not speak items got %s", indexes(as))
	}
	seen := map[int]bool{}
	for len(seen) < len(params) {
		as := h.pollItems("w1", 10, 10*time.Second)
		if len(as) == 0 || len(as) > 2 {
			t.Fatalf("poll got %s; want 1 or 2 items (max_parallel 2)", indexes(as))
		}
		for _, a := range as {
			i := a.Item.Index
			if a.RunID != runID || a.Attempt != 1 || a.Item.Count != 5 || string(a.Item.Param) != params[i] || seen[i] {
				t.Fatalf("grant %+v item %+v; want attempt 1 of a new item of %s with param %s", a, a.Item, runID, params[i])
			}
			seen[i] = true
		}
		for _, a := range as {
			resp, err := h.completeItem(a, "w1", true)
			if err != nil || resp.Status != api.RunSucceeded || resp.Written <= 0 {
				t.Fatalf("complete item %d: %+v, %v; want succeeded, with the bytes its write stored", a.Item.Index, resp, err)
			}
		}
	}
	r := h.waitRun(runID, func(r api.Run) bool { return r.Status.Final() })
	if r.Status != api.RunSucceeded || len(r.Items) != 5 || len(r.Attempts) != 0 {
		t.Fatalf("run %s with %d items, %d attempts; want succeeded, 5 items, none of its own", r.Status, len(r.Items), len(r.Attempts))
	}
	for _, it := range r.Items {
		if it.Status != api.RunSucceeded || len(it.Attempts) != 1 || it.Attempts[0].Worker != "w1" || it.Attempts[0].FinishedAt.IsZero() {
			t.Errorf("item %d = %+v, want succeeded once by w1", it.Index, it)
		}
	}
	raws, err := h.client.Get(context.Background(), h.store.Keys().Run(0, "shards", r.ScheduledAt))
	if err != nil || len(raws.Kvs) != 1 || !strings.Contains(string(raws.Kvs[0].Value), `"item_state"`) {
		t.Fatalf("stored run: %v; want the items' compact form", err)
	}
}

// TestItemRetriesLeasesAndStaleReports: each item is an attempt chain
// of its own: a failed item is retried after its backoff while the
// others run on; an item whose worker stops heartbeating is lost at its
// own lease and retried, the late report of its first attempt refused;
// items' heartbeats name their item.
func TestItemRetriesLeasesAndStaleReports(t *testing.T) {
	h := newHarness(t)
	h.start("m1")
	h.create(api.Job{ID: "chains", Schedule: "@every 1h", Shards: &api.Shards{Count: 3},
		Retry: api.RetryPolicy{MaxAttempts: 2, InitialBackoff: api.Duration(time.Second), MaxBackoff: api.Duration(time.Second)}})
	h.advance(time.Hour)
	as := h.pollItems("w1", 3, 10*time.Second)
	if indexes(as) != "0/3,1/3,2/3" {
		t.Fatalf("first poll got %s, want all three items", indexes(as))
	}
	if resp, err := h.completeItem(as[1], "w1", false); err != nil || resp.Status != api.RunFailed || resp.RunStatus != api.RunRunning {
		t.Fatalf("failing item 1: %+v, %v; want item failed, run running", resp, err)
	}
	// Half a lease later item 0 heartbeats, item 2 does not; item 1's
	// retry is due.
	h.advance(runLease / 2)
	if _, err := h.heartbeatItem(as[0], "w1"); err != nil {
		t.Fatalf("heartbeat of item 0: %v", err)
	}
	retry := h.pollItems("w2", 3, 10*time.Second)
	if indexes(retry) != "1/3" || retry[0].Attempt != 2 {
		t.Fatalf("after the backoff got %s attempt %d, want item 1's attempt 2", indexes(retry), retry[0].Attempt)
	}
	if _, err := h.heartbeatItem(as[1], "w1"); !errors.Is(err, dispatch.ErrStaleAttempt) {
		t.Fatalf("heartbeat of item 1's failed attempt: %v, want stale", err)
	}
	h.advance(runLease/2 + time.Second)
	r := h.waitRun(as[2].RunID, func(r api.Run) bool { return r.Items[2].Status == api.RunFailed })
	if a := r.Items[2].Attempts[0]; !strings.Contains(a.Error, "run lease expired") || r.Items[0].Status != api.RunRunning {
		t.Fatalf("item 2 = %+v, item 0 %s; want item 2 lost at its lease, item 0 still running", r.Items[2], r.Items[0].Status)
	}
	if _, err := h.completeItem(as[2], "w1", true); !errors.Is(err, dispatch.ErrStaleAttempt) {
		t.Fatalf("late report of item 2's lost attempt: %v, want stale", err)
	}
	if _, err := h.disp.Complete(context.Background(), api.CompleteRequest{Worker: "w1", RunID: as[0].RunID, Attempt: 1, Success: true}); !errors.Is(err, dispatch.ErrStaleAttempt) {
		t.Fatalf("report naming no item of a run of items: %v, want stale", err)
	}
	for _, a := range []api.AttemptGrant{as[0], retry[0]} {
		worker := "w1"
		if a.Attempt == 2 {
			worker = "w2"
		}
		if _, err := h.completeItem(a, worker, true); err != nil {
			t.Fatalf("complete item %d: %v", a.Item.Index, err)
		}
	}
	h.advance(time.Second)
	last := h.pollItems("w3", 3, 10*time.Second)
	if indexes(last) != "2/3" || last[0].Attempt != 2 {
		t.Fatalf("got %s, want item 2's attempt 2", indexes(last))
	}
	if resp, err := h.completeItem(last[0], "w3", true); err != nil || resp.RunStatus != api.RunSucceeded {
		t.Fatalf("last item: %+v, %v; want the run succeeded", resp, err)
	}
}

// TestItemsAcrossHandoff: the partition moves while items run; the new
// owner loads the run with its items, takes their heartbeats and
// results, hands out the rest, and the run ends with every item once.
func TestItemsAcrossHandoff(t *testing.T) {
	h := newHarness(t)
	h.start("m1")
	h.create(api.Job{ID: "moves", Schedule: "@every 1h", Shards: &api.Shards{Count: 4, MinSucceeded: 4}})
	h.advance(time.Hour)
	as := h.pollItems("w1", 2, 10*time.Second)
	if _, err := h.completeItem(as[0], "w1", true); err != nil {
		t.Fatal(err)
	}
	h.stop()
	h.start("m2")
	if _, err := h.heartbeatItem(as[1], "w1"); err != nil {
		t.Fatalf("heartbeat to the new owner: %v", err)
	}
	if _, err := h.completeItem(as[0], "w1", true); !errors.Is(err, dispatch.ErrStaleAttempt) {
		t.Fatalf("second report of a succeeded item: %v, want stale", err)
	}
	rest := h.pollItems("w2", 4, 10*time.Second)
	if indexes(rest) != "2/4,3/4" {
		t.Fatalf("new owner handed out %s, want items 2 and 3", indexes(rest))
	}
	for _, a := range append(rest, as[1]) {
		worker := "w2"
		if a.Item.Index == 1 {
			worker = "w1"
		}
		if _, err := h.completeItem(a, worker, true); err != nil {
			t.Fatalf("complete item %d on the new owner: %v", a.Item.Index, err)
		}
	}
	r := h.waitRun(as[0].RunID, func(r api.Run) bool { return r.Status.Final() })
	for _, it := range r.Items {
		if it.Status != api.RunSucceeded || len(it.Attempts) != 1 {
			t.Errorf("item %d = %s with %d attempts, want succeeded once", it.Index, it.Status, len(it.Attempts))
		}
	}
	if r.Status != api.RunSucceeded {
		t.Fatalf("run %s, want succeeded", r.Status)
	}
}

// TestReplaceCancelsEveryItem: under concurrency_policy replace a new
// fire ends the running sharded run: every running item's worker is told
// to cancel at its next heartbeat and its report is acknowledged as dead;
// the pending items are skipped; nothing of it succeeds afterwards.
func TestReplaceCancelsEveryItem(t *testing.T) {
	h := newHarness(t)
	h.start("m1")
	h.create(api.Job{ID: "rep", Schedule: "@every 5s", ConcurrencyPolicy: api.ConcurrencyReplace, Shards: &api.Shards{Count: 3}})
	h.advance(5 * time.Second)
	as := h.pollItems("w1", 2, 10*time.Second)
	h.advance(5 * time.Second) // within the items' run lease
	h.waitRuns("rep", 2)
	old := h.waitRun(as[0].RunID, func(r api.Run) bool { return r.Status.Final() })
	if old.Status != api.RunDead || !strings.Contains(old.Reason, "replaced") {
		t.Fatalf("replaced run %s (%q), want dead, replaced", old.Status, old.Reason)
	}
	for _, it := range old.Items {
		if it.Status != api.RunSkipped {
			t.Errorf("replaced run's item %d %s, want skipped", it.Index, it.Status)
		}
	}
	for _, a := range as {
		if hb, err := h.heartbeatItem(a, "w1"); err != nil || !hb.Cancel {
			t.Fatalf("heartbeat of item %d of the replaced run: %+v, %v; want cancel", a.Item.Index, hb, err)
		}
		if resp, err := h.completeItem(a, "w1", true); err != nil || resp.Status != api.RunDead {
			t.Fatalf("report of item %d of the replaced run: %+v, %v; want acknowledged dead", a.Item.Index, resp, err)
		}
	}
	if r := h.waitRun(as[0].RunID, func(api.Run) bool { return true }); r.Items[0].Status != api.RunSkipped {
		t.Fatalf("replaced item after its success was reported: %s, want skipped still", r.Items[0].Status)
	}
}

// TestItemTakenBack: a poll that ends while its items' attempts are
// being recorded gets nothing; the items go back to pending and the next
// poll gets their first attempts.
func TestItemTakenBack(t *testing.T) {
	h, bridge := undeliveredHarness(t)
	h.create(api.Job{ID: "tb", Schedule: "@every 1m", Shards: &api.Shards{Count: 2}})
	h.advance(time.Minute)
	runID := h.waitRuns("tb", 1)[0].ID
	h.waitFor("the run to be dispatchable", func() bool { return h.disp.Stats().Waiting == 1 })
	bridge.CutReplies()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan api.PollResponse, 1)
	go func() {
		resp, _ := h.disp.Poll(ctx, api.PollRequest{Worker: "gone", Executors: []string{"http"}, Max: 2, Features: []string{api.FeatureItems}})
		done <- resp
	}()
	h.waitRun(runID, func(r api.Run) bool { return r.Count().Running == 2 })
	cancel()
	bridge.Restore()
	if resp := <-done; len(resp.Attempts) != 0 {
		t.Fatalf("abandoned poll returned %s", indexes(resp.Attempts))
	}
	r := h.waitRun(runID, func(r api.Run) bool { return r.Count().Pending == 2 })
	if r.Status != api.RunPending || r.AttemptCount() != 0 {
		t.Fatalf("taken-back run %s with %d attempts, want pending with none", r.Status, r.AttemptCount())
	}
	as := h.pollItems("w2", 2, 10*time.Second)
	if indexes(as) != "0/2,1/2" || as[0].Attempt != 1 || as[1].Attempt != 1 {
		t.Fatalf("after the take-back got %s, want both items' first attempts", indexes(as))
	}
}

// TestBroadcast: a broadcast fire runs on every worker registered at the
// fire, once each, pinned: a worker gets only its own item, a worker that
// registers later gets none, and a worker whose registration ends has its
// item dead with the reason; the run reports which worker failed.
func TestBroadcast(t *testing.T) {
	h := newHarness(t)
	reg := h.withRegistry("m1")
	h.start("m1")
	keepRegistered(t, reg, "w1", "w2")
	stopW3 := keepRegistered(t, reg, "w3")
	waitWorkers(t, reg, "w1", "w2", "w3")
	h.create(api.Job{ID: "bc", Schedule: "@every 1h", Placement: &api.PlacementPolicy{Broadcast: true}, Retry: api.RetryPolicy{MaxAttempts: 2, InitialBackoff: api.Duration(time.Second)}})
	h.advance(time.Hour)
	runID := h.waitRuns("bc", 1)[0].ID
	r := h.waitRun(runID, func(api.Run) bool { return true })
	var pinned []string
	for _, it := range r.Items {
		pinned = append(pinned, it.Worker)
	}
	if !r.Broadcast || strings.Join(pinned, ",") != "w1,w2,w3" {
		t.Fatalf("broadcast run pinned to %v (broadcast %v), want w1,w2,w3", pinned, r.Broadcast)
	}
	keepRegistered(t, reg, "w4")
	waitWorkers(t, reg, "w1", "w2", "w3", "w4")
	if as := h.pollItems("w4", 5, 0); len(as) != 0 {
		t.Fatalf("a worker registered after the fire got %s", indexes(as))
	}
	a1 := h.pollItems("w1", 5, 10*time.Second)
	if indexes(a1) != "0/3" {
		t.Fatalf("w1 got %s, want only its item 0", indexes(a1))
	}
	// w1's item fails and is retried on w1 only.
	if _, err := h.completeItem(a1[0], "w1", false); err != nil {
		t.Fatal(err)
	}
	h.advance(time.Second)
	if as := h.pollItems("w2", 5, 10*time.Second); indexes(as) != "1/3" {
		t.Fatalf("w2 got %s, want only its item 1 (not w1's retry)", indexes(as))
	} else if _, err := h.completeItem(as[0], "w2", true); err != nil {
		t.Fatal(err)
	}
	retry := h.pollItems("w1", 5, 10*time.Second)
	if indexes(retry) != "0/3" || retry[0].Attempt != 2 {
		t.Fatalf("w1 got %s attempt %d, want its item's retry", indexes(retry), retry[0].Attempt)
	}
	if _, err := h.completeItem(retry[0], "w1", true); err != nil {
		t.Fatal(err)
	}
	// w3 never polls and stops registering: its item dies with the reason
	// once its registration expires (etcd's real time), and the run with
	// it.
	stopW3()
	r = h.waitRun(runID, func(r api.Run) bool { return r.Status.Final() })
	if r.Status != api.RunDead || r.Items[2].Status != api.RunDead || !strings.Contains(r.Items[2].Reason, `worker "w3" lost`) || !strings.Contains(r.Reason, `2 (worker "w3")`) {
		t.Fatalf("run %s (%q), item 2 %s (%q); want dead naming w3", r.Status, r.Reason, r.Items[2].Status, r.Items[2].Reason)
	}
	for i, it := range r.Items[:2] {
		if it.Status != api.RunSucceeded || it.Attempts[len(it.Attempts)-1].Worker != pinned[i] || slices.ContainsFunc(it.Attempts, func(a api.Attempt) bool { return a.Worker != pinned[i] }) {
			t.Errorf("item %d = %+v, want succeeded on %s only", i, it, pinned[i])
		}
	}
}

// TestItemResultsRecordedTogether: results of one run's items that wait
// while a write of the partition is in flight are recorded together, in
// one write of the run, each answered with its item's status, the run's
// succeeding with the last.
func TestItemResultsRecordedTogether(t *testing.T) {
	h, bridge := undeliveredHarness(t)
	h.create(api.Job{ID: "burst", Schedule: "@every 1m", Shards: &api.Shards{Count: 12}})
	h.advance(time.Minute)
	as := h.pollItems("w1", 12, 10*time.Second)
	if len(as) != 12 {
		t.Fatalf("took %d items, want 12", len(as))
	}
	key := h.store.Keys().Run(0, "burst", t0.Add(time.Minute))
	cur, err := h.client.Get(context.Background(), key)
	if err != nil {
		t.Fatal(err)
	}
	wctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	writes := h.client.Watch(wctx, key, clientv3.WithRev(cur.Header.Revision+1))

	// The first result's write waits for etcd's answer; the others queue.
	bridge.CutReplies()
	type answer struct {
		resp api.CompleteResponse
		err  error
	}
	answers := make(chan answer, len(as))
	go func() { r, err := h.completeItem(as[0], "w1", true); answers <- answer{r, err} }()
	h.waitFor("the first result's write", func() bool { return h.disp.WriterBusy(0) })
	for _, a := range as[1:] {
		go func() { r, err := h.completeItem(a, "w1", true); answers <- answer{r, err} }()
	}
	h.waitFor("the other results to queue", func() bool { return h.disp.ReportsWaiting(0) == len(as)-1 })
	bridge.Restore()
	final := 0
	for range as {
		a := <-answers
		if a.err != nil || a.resp.Status != api.RunSucceeded {
			t.Fatalf("a result answered %+v, %v; want its item succeeded", a.resp, a.err)
		}
		if a.resp.RunStatus == api.RunSucceeded {
			final++
		}
	}
	r := h.waitRun(as[0].RunID, func(r api.Run) bool { return r.Status.Final() })
	if r.Status != api.RunSucceeded || r.Count().Succeeded != 12 || final == 0 {
		t.Fatalf("run %s with %d items succeeded, %d answers saw it succeed", r.Status, r.Count().Succeeded, final)
	}
	last, err := h.client.Get(context.Background(), key)
	if err != nil || len(last.Kvs) != 1 {
		t.Fatalf("reading the run: %v", err)
	}
	n := 0
	for seen := int64(0); seen < last.Kvs[0].ModRevision; {
		select {
		case wr := <-writes:
			for _, ev := range wr.Events {
				n++
				seen = ev.Kv.ModRevision
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("the run's writes up to revision %d not seen within 10s", last.Kvs[0].ModRevision)
		}
	}
	if n >= len(as) {
		t.Fatalf("%d writes of the run for %d results, want them recorded together", n, len(as))
	}
	t.Logf("%d results recorded in %d writes", len(as), n)
}
