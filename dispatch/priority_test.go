package dispatch_test

import (
	"strings"
	"testing"
	"time"

	"github.com/jobfleet/jobfleet/api"
	"github.com/jobfleet/jobfleet/dispatch"
)

// handOut polls n attempts one at a time as worker w and returns their
// jobs, in the order they were handed out.
func (h *harness) handOut(w string, n int) []string {
	h.t.Helper()
	var order []string
	for range n {
		for _, g := range h.pollItems(w, 1, time.Second) {
			order = append(order, g.JobID)
		}
	}
	return order
}

// TestPollHandsOutHigherPriorityFirst: of runs due at once, a poll for
// one attempt is handed the highest priority first (the older and
// smaller IDs of priority 1 wait), a step's own priority counting for
// its run.
func TestPollHandsOutHigherPriorityFirst(t *testing.T) {
	h := newHarness(t)
	h.configure = func(c *dispatch.Config) { c.PriorityAging = -1 }
	h.start("m1")
	at := ptr(t0.Add(time.Second))
	for _, id := range []string{"a-low-1", "a-low-2"} {
		h.create(api.Job{ID: id, RunAt: at, Priority: ptr(1)})
	}
	h.create(api.Job{ID: "b-default", RunAt: at})
	h.create(api.Job{ID: "c-high", RunAt: at, Priority: ptr(9)})
	h.create(api.Job{ID: "d-step-high", RunAt: at, Priority: ptr(1), Steps: []api.Step{
		{ID: "only", Executor: api.Executor{Type: "http", URL: "http://127.0.0.1:9/hook"}, Priority: ptr(8)}}})
	h.advance(time.Second)
	for _, id := range []string{"a-low-1", "a-low-2", "b-default", "c-high", "d-step-high"} {
		h.waitRuns(id, 1)
	}
	got := strings.Join(h.handOut("w1", 5), " ")
	if want := "c-high d-step-high b-default a-low-1 a-low-2"; got != want {
		t.Fatalf("handed out %s; want %s", got, want)
	}
}

// TestAgingHandsOutALongWaitingLowPriority: a priority-0 run that has
// waited more than ten agings longer than fresh priority-9 runs is handed
// out before them (controlled clock).
func TestAgingHandsOutALongWaitingLowPriority(t *testing.T) {
	const aging = 10 * time.Second
	h := newHarness(t)
	h.configure = func(c *dispatch.Config) { c.PriorityAging = aging }
	h.start("m1")
	h.create(api.Job{ID: "z-old", RunAt: ptr(t0.Add(time.Second)), Priority: ptr(0)})
	fresh := ptr(t0.Add(time.Second + 11*aging))
	for _, id := range []string{"a-fresh-1", "a-fresh-2"} {
		h.create(api.Job{ID: id, RunAt: fresh, Priority: ptr(9)})
	}
	h.advance(time.Second)
	h.waitRuns("z-old", 1)
	h.advance(11 * aging)
	h.waitRuns("a-fresh-1", 1)
	h.waitRuns("a-fresh-2", 1)
	got := strings.Join(h.handOut("w1", 3), " ")
	if want := "z-old a-fresh-1 a-fresh-2"; got != want {
		t.Fatalf("handed out %s; want %s", got, want)
	}
}
