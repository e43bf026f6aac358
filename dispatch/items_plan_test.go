package dispatch_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/jobfleet/jobfleet/api"
	"github.com/jobfleet/jobfleet/dispatch"
)

// itemsJob is a sharded job of n items for the pure functions.
func itemsJob(n, maxAttempts, maxParallel, minSucceeded int) api.Job {
	j := api.Job{ID: "sharded", Executor: api.Executor{Type: "http", URL: "http://127.0.0.1:9/"},
		Shards: &api.Shards{Count: n, MaxParallel: maxParallel, MinSucceeded: minSucceeded}}
	j.Normalize()
	j.Retry.MaxAttempts = maxAttempts
	return j
}

// TestItemsProperties drives a run of items through random hand-outs,
// results, lost attempts, pinned workers' ends and take-backs, and
// checks after every step what the product promises of it: an item
// succeeds at most once and only on a success reported for it; no more
// items run than max_parallel; the run is final exactly when its items
// decide it, then with every item ended, and succeeded exactly when
// enough items did; an undecided run keeps every item that has not ended
// pending, failed or running (none is lost); and the stored form gives
// back the same run.
func TestItemsProperties(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		n := rapid.IntRange(1, 12).Draw(rt, "items")
		maxAttempts := rapid.IntRange(1, 4).Draw(rt, "max_attempts")
		maxParallel := rapid.IntRange(0, n).Draw(rt, "max_parallel")
		minSucceeded := rapid.IntRange(0, n).Draw(rt, "min_succeeded")
		j := itemsJob(n, maxAttempts, maxParallel, minSucceeded)
		now := time.Date(2026, 6, 1, 0, 0, 0, 123456789, time.UTC)
		r := dispatch.NewRun(&j, now, now, "m1", 7)
		notBefore := make([]time.Time, n)
		successes := make([]int, n) // successes reported and accepted, by item
		for step := range rapid.IntRange(1, 60).Draw(rt, "steps") {
			now = now.Add(time.Duration(rapid.IntRange(0, 3000).Draw(rt, "gap_ms")) * time.Millisecond)
			running := runningItems(r)
			switch op := rapid.IntRange(0, 4).Draw(rt, "op"); {
			case op == 0 || len(running) == 0:
				limit := rapid.IntRange(1, n).Draw(rt, "take")
				idx := dispatch.DispatchableItems(r, notBefore, now, nil, limit)
				if len(idx) > limit {
					rt.Fatalf("step %d: %d items dispatchable with a limit of %d", step, len(idx), limit)
				}
				r = dispatch.StartItems(r, idx, fmt.Sprintf("w%d", step%3), "cred", now)
			case op == 1 || op == 2:
				i := rapid.SampledFrom(running).Draw(rt, "finish")
				ok := op == 1 && rapid.Bool().Draw(rt, "success")
				var nb time.Time
				r, nb, _ = dispatch.FinishItem(&j, r, i, dispatch.Outcome{Success: ok, Error: errorOf(ok)}, now, 0.5)
				notBefore[i] = nb
				if ok {
					successes[i]++
				}
			case op == 3:
				i := rapid.SampledFrom(running).Draw(rt, "lose")
				lost, why := dispatch.ItemLeaseExpired(&j, r, i, now.Add(-time.Second), now, time.Minute)
				if !lost {
					rt.Fatalf("step %d: a running item whose lease passed is not lost (%s)", step, why)
				}
				var nb time.Time
				r, nb, _ = dispatch.FinishItem(&j, r, i, dispatch.Outcome{Error: why}, now, 0.5)
				notBefore[i] = nb
			default:
				i := rapid.IntRange(0, n-1).Draw(rt, "kill")
				if !r.Items[i].Status.Final() && !r.Status.Final() {
					r, _ = dispatch.KillItem(r, i, "worker gone", now)
				}
			}
			checkItems(rt, step, r, successes)
			r = roundTrip(rt, r)
			if r.Status.Final() {
				return
			}
		}
	})
}

func errorOf(ok bool) string {
	if ok {
		return ""
	}
	return "failed"
}

func runningItems(r api.Run) []int {
	if r.Status.Final() {
		return nil
	}
	var out []int
	for i, it := range r.Items {
		if it.Status == api.RunRunning {
			out = append(out, i)
		}
	}
	return out
}

// checkItems checks the laws of a run of items; successes counts the
// successes reported for each item.
func checkItems(rt *rapid.T, step int, r api.Run, successes []int) {
	c := r.Count()
	need := r.Required()
	for i, it := range r.Items {
		if it.Index != i {
			rt.Fatalf("step %d: item %d has index %d", step, i, it.Index)
		}
		won := 0
		for k, a := range it.Attempts {
			if a.Attempt != k+1 {
				rt.Fatalf("step %d: item %d attempt at %d numbered %d", step, i, k+1, a.Attempt)
			}
			if !a.FinishedAt.IsZero() && a.Error == "" {
				won++
			}
		}
		switch {
		case won > 1:
			rt.Fatalf("step %d: item %d succeeded %d times", step, i, won)
		case it.Status == api.RunSucceeded && (won != 1 || successes[i] != 1):
			rt.Fatalf("step %d: item %d succeeded with %d successful attempts, %d reported", step, i, won, successes[i])
		case r.Status.Final() && !it.Status.Final():
			rt.Fatalf("step %d: run %s with item %d %s", step, r.Status, i, it.Status)
		case !r.Status.Final() && it.Status == api.RunSkipped:
			rt.Fatalf("step %d: undecided run with item %d skipped", step, i)
		}
	}
	if r.MaxParallel > 0 && c.Running > r.MaxParallel {
		rt.Fatalf("step %d: %d items running, max_parallel %d", step, c.Running, r.MaxParallel)
	}
	decided := c.Succeeded >= need || c.Dead+c.Skipped > len(r.Items)-need
	switch {
	case decided != r.Status.Final():
		rt.Fatalf("step %d: run %s with %+v of %d items (%d required)", step, r.Status, c, len(r.Items), need)
	case r.Status == api.RunSucceeded && c.Succeeded < need:
		rt.Fatalf("step %d: run succeeded with %d of %d required items", step, c.Succeeded, need)
	case r.Status == api.RunDead && c.Succeeded >= need:
		rt.Fatalf("step %d: run dead with %d succeeded of %d required", step, c.Succeeded, need)
	case !r.Status.Final() && (r.Status == api.RunPending) != (r.AttemptCount() == 0):
		rt.Fatalf("step %d: run %s with %d attempts", step, r.Status, r.AttemptCount())
	}
}

// roundTrip returns r as read back from its stored form, failing if it
// differs from r.
func roundTrip(rt *rapid.T, r api.Run) api.Run {
	b, err := r.MarshalStored()
	if err != nil {
		rt.Fatalf("stored form: %v", err)
	}
	var back api.Run
	if err := json.Unmarshal(b, &back); err != nil {
		rt.Fatalf("reading the stored form back: %v\n%s", err, b)
	}
	want, _ := json.Marshal(r)
	got, _ := json.Marshal(back)
	if string(got) != string(want) {
		rt.Fatalf("stored form read back differs:\n got %s\nwant %s\nstored %s", got, want, b)
	}
	return back
}

func TestBroadcastItems(t *testing.T) {
	j := api.Job{ID: "team/flush", Executor: api.Executor{Type: "http"}, Placement: &api.PlacementPolicy{Broadcast: true}}
	live := []dispatch.LiveWorker{
		{Worker: api.Worker{ID: "w-c", Executors: []string{"http"}}, Registration: 30},
		{Worker: api.Worker{ID: "w-a", Executors: []string{"http", "shell"}}, Registration: 10},
		{Worker: api.Worker{ID: "w-shell", Executors: []string{"shell"}}, Registration: 40},
		{Worker: api.Worker{ID: "w-other-team", Executors: []string{"http"}, Prefix: "other/"}, Registration: 50},
		{Worker: api.Worker{ID: "w-b", Executors: []string{"http"}, Prefix: "team/"}, Registration: 20},
	}
	items, reason := dispatch.BroadcastItems(&j, live)
	var got []string
	for i, it := range items {
		if it.Index != i || it.Status != api.RunPending {
			t.Errorf("item %d = %+v, want index %d pending", i, it, i)
		}
		got = append(got, fmt.Sprintf("%s@%d", it.Worker, it.Registration))
	}
	if strings.Join(got, ",") != "w-a@10,w-b@20,w-c@30" || reason != "" {
		t.Fatalf("broadcast items = %v (%q), want w-a@10,w-b@20,w-c@30: the workers that run http within their scope, by ID", got, reason)
	}
	if items, reason := dispatch.BroadcastItems(&j, live[2:4]); len(items) != 0 || !strings.Contains(reason, "no live worker") {
		t.Fatalf("broadcast without a matching worker = %d items, %q; want none and the reason", len(items), reason)
	}
}

// TestBroadcastItemsWithSelector: a broadcast job's selector narrows its
// targets to the live workers whose labels it matches (on top of the
// executor type and the scope); none matching gives a reason naming it.
func TestBroadcastItemsWithSelector(t *testing.T) {
	j := api.Job{ID: "flush", Executor: api.Executor{Type: "http"}, Placement: &api.PlacementPolicy{Broadcast: true, Selector: "pool=a,!spot"}}
	live := []dispatch.LiveWorker{
		{Worker: api.Worker{ID: "w-a", Executors: []string{"http"}, Labels: map[string]string{"pool": "a"}}, Registration: 10},
		{Worker: api.Worker{ID: "w-a-spot", Executors: []string{"http"}, Labels: map[string]string{"pool": "a", "spot": "yes"}}, Registration: 20},
		{Worker: api.Worker{ID: "w-b", Executors: []string{"http"}, Labels: map[string]string{"pool": "b"}}, Registration: 30},
		{Worker: api.Worker{ID: "w-bare", Executors: []string{"http"}}, Registration: 40},
		{Worker: api.Worker{ID: "w-a-shell", Executors: []string{"shell"}, Labels: map[string]string{"pool": "a"}}, Registration: 50},
	}
	items, reason := dispatch.BroadcastItems(&j, live)
	if len(items) != 1 || items[0].Worker != "w-a" || reason != "" {
		t.Fatalf("broadcast items = %+v (%q), want one for w-a only", items, reason)
	}
	if items, reason := dispatch.BroadcastItems(&j, live[1:]); len(items) != 0 || !strings.Contains(reason, `"pool=a,!spot"`) {
		t.Fatalf("broadcast without a matching worker = %d items, %q; want none and a reason naming the selector", len(items), reason)
	}
}

// TestSettleEndsTheRest: once min_succeeded items have succeeded the run
// is succeeded and its other items end: pending ones skipped, a running
// one's attempt cancelled (returned, for its worker to be told).
func TestSettleEndsTheRest(t *testing.T) {
	j := itemsJob(4, 1, 0, 2)
	now := time.Date(2026, 6, 1, 0, 0, 0, 0, time.UTC)
	r := dispatch.NewRun(&j, now, now, "m1", 1)
	r = dispatch.StartItems(r, []int{0, 1, 2}, "w1", "c", now)
	r, _, cancelled := dispatch.FinishItem(&j, r, 0, dispatch.Outcome{Success: true}, now, 0)
	if r.Status != api.RunRunning || len(cancelled) != 0 {
		t.Fatalf("after one success of two required: %s, cancelled %v; want running, none", r.Status, cancelled)
	}
	r, _, cancelled = dispatch.FinishItem(&j, r, 2, dispatch.Outcome{Success: true}, now, 0)
	if r.Status != api.RunSucceeded || fmt.Sprint(cancelled) != "[1]" {
		t.Fatalf("after two successes: %s, cancelled %v; want succeeded, item 1 cancelled", r.Status, cancelled)
	}
	want := []api.RunStatus{api.RunSucceeded, api.RunSkipped, api.RunSucceeded, api.RunSkipped}
	for i, it := range r.Items {
		if it.Status != want[i] {
			t.Errorf("item %d %s, want %s", i, it.Status, want[i])
		}
	}
	if a := r.Items[1].Attempts[0]; a.FinishedAt.IsZero() || !strings.Contains(a.Error, "cancelled") {
		t.Errorf("cancelled item's attempt = %+v, want finished as cancelled", a)
	}
	if !strings.Contains(r.Reason, "2 of 4 items succeeded (2 required)") {
		t.Errorf("reason = %q", r.Reason)
	}
}

// TestItemRetriesAreItsOwn: an item's failed attempt is retried under
// the job's retry policy, numbered within the item; the run dies when an
// item has no attempt left and all items are required.
func TestItemRetriesAreItsOwn(t *testing.T) {
	j := itemsJob(2, 2, 0, 0)
	now := time.Date(2026, 6, 1, 0, 0, 0, 0, time.UTC)
	r := dispatch.NewRun(&j, now, now, "m1", 1)
	r = dispatch.StartItems(r, []int{0, 1}, "w1", "c", now)
	r, nb, _ := dispatch.FinishItem(&j, r, 1, dispatch.Outcome{Error: "boom"}, now, 0)
	if r.Items[1].Status != api.RunFailed || !nb.After(now) || r.Status != api.RunRunning {
		t.Fatalf("item 1 after a failure: %s not before %v, run %s; want failed with a backoff, run running", r.Items[1].Status, nb, r.Status)
	}
	if got := dispatch.DispatchableItems(r, []time.Time{{}, nb}, now, nil, 10); len(got) != 0 {
		t.Fatalf("dispatchable before the backoff: %v", got)
	}
	if got := dispatch.DispatchableItems(r, []time.Time{{}, nb}, nb, nil, 10); fmt.Sprint(got) != "[1]" {
		t.Fatalf("dispatchable after the backoff: %v, want [1]", got)
	}
	r = dispatch.StartItems(r, []int{1}, "w2", "c", nb)
	if a := r.Items[1].Attempts; len(a) != 2 || a[1].Attempt != 2 || a[1].Worker != "w2" || len(r.Items[0].Attempts) != 1 {
		t.Fatalf("retry = %+v", r.Items[1])
	}
	r, _, _ = dispatch.FinishItem(&j, r, 1, dispatch.Outcome{Error: "boom again"}, nb, 0)
	if r.Items[1].Status != api.RunDead || r.Status != api.RunDead || r.Items[0].Status != api.RunSkipped {
		t.Fatalf("after the last attempt failed: item 1 %s, run %s, item 0 %s; want dead, dead, skipped", r.Items[1].Status, r.Status, r.Items[0].Status)
	}
	if !strings.Contains(r.Reason, "dead: 1") {
		t.Errorf("reason = %q, want it to name item 1", r.Reason)
	}
}
