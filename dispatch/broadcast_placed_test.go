package dispatch_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jobfleet/jobfleet/api"
	"github.com/jobfleet/jobfleet/dispatch/workers"
)

// keepLabeled registers each worker of labels with its labels (serving
// http, credential "") and keeps the registrations alive until the test
// ends (keepRegistering).
func keepLabeled(t *testing.T, reg *workers.Registry, labels map[string]map[string]string) {
	t.Helper()
	var reqs []api.RegisterRequest
	for id, l := range labels {
		reqs = append(reqs, api.RegisterRequest{Worker: id, Executors: []string{"http"}, Concurrency: 2, Labels: l})
	}
	keepRegistering(t, reg, reqs...)
}

// TestBroadcastWithSelector: a broadcast job with a placement selector
// runs each fire on every live worker whose labels the selector matches
// and on no other: the run's items are pinned to the matching workers
// only, a worker outside the selector polls and gets nothing, and each
// matching worker gets its own item. A fire that no live worker matches
// is skipped, its reason naming the selector.
func TestBroadcastWithSelector(t *testing.T) {
	h := newHarness(t)
	reg := h.withRegistry("m1")
	h.start("m1")
	keepLabeled(t, reg, map[string]map[string]string{
		"w-a1": {"pool": "a"},
		"w-a2": {"pool": "a", "spot": "true"},
		"w-b":  {"pool": "b"},
		"w-0":  nil,
	})
	waitWorkers(t, reg, "w-0", "w-a1", "w-a2", "w-b")
	h.create(api.Job{ID: "bc", Schedule: "@every 1h", Placement: &api.PlacementPolicy{Broadcast: true, Selector: "pool=a"}})
	h.create(api.Job{ID: "bc-none", Schedule: "@every 1h", Placement: &api.PlacementPolicy{Broadcast: true, Selector: "pool=gpu"}})
	h.advance(time.Hour)
	r := h.waitRun(h.waitRuns("bc", 1)[0].ID, func(api.Run) bool { return true })
	var pinned []string
	for _, it := range r.Items {
		pinned = append(pinned, it.Worker)
	}
	if !r.Broadcast || strings.Join(pinned, ",") != "w-a1,w-a2" {
		t.Fatalf("broadcast run pinned to %v (broadcast %v), want w-a1,w-a2: the workers pool=a matches", pinned, r.Broadcast)
	}
	none := h.waitRun(h.waitRuns("bc-none", 1)[0].ID, func(r api.Run) bool { return r.Status.Final() })
	if none.Status != api.RunSkipped || !strings.Contains(none.Reason, `"pool=gpu"`) {
		t.Fatalf("broadcast that no worker matches: %s (%q), want skipped naming the selector", none.Status, none.Reason)
	}
	for _, w := range []string{"w-b", "w-0"} {
		if as := h.pollItems(w, 5, 0); len(as) != 0 {
			t.Fatalf("%s, outside the selector, got %s", w, indexes(as))
		}
	}
	for i, w := range pinned {
		as := h.pollItems(w, 5, 10*time.Second)
		if want := fmt.Sprintf("%d/2", i); indexes(as) != want {
			t.Fatalf("%s got %s, want only its item %s", w, indexes(as), want)
		}
		if _, err := h.completeItem(as[0], w, true); err != nil {
			t.Fatal(err)
		}
	}
	if r := h.waitRun(r.ID, func(r api.Run) bool { return r.Status.Final() }); r.Status != api.RunSucceeded {
		t.Fatalf("run %s (%q), want succeeded", r.Status, r.Reason)
	}
}
