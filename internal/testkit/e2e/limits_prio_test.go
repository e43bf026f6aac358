package e2e_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	jfapi "github.com/jobfleet/jobfleet/api"
	"github.com/jobfleet/jobfleet/dispatch/worker"
	"github.com/jobfleet/jobfleet/internal/testkit/fleettest"
)

// gate records the executions of its handler, on the workers' side, and
// holds each until the test releases it.
type gate struct {
	mu      sync.Mutex
	order   []string // job IDs, in the order their executions started
	running int
	ended   int
	release chan struct{}
}

func newGate() *gate { return &gate{release: make(chan struct{})} }

func (g *gate) handler() worker.Handler {
	return func(ctx context.Context, r worker.Run) error {
		g.mu.Lock()
		g.order = append(g.order, r.JobID)
		g.running++
		g.mu.Unlock()
		defer func() {
			g.mu.Lock()
			g.running--
			g.ended++
			g.mu.Unlock()
		}()
		select {
		case <-g.release:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// counts returns the executions running, ended, and the job IDs in
// start order.
func (g *gate) counts() (running, ended int, order []string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.running, g.ended, append([]string(nil), g.order...)
}

// createLimited creates one-off job id of handler "report" naming key,
// of priority prio (nil: the default).
func createLimited(t *testing.T, f *fleettest.Fleet, base, id, key string, prio *int) {
	t.Helper()
	j := jfapi.Job{ID: id, Executor: jfapi.Executor{Type: "report"}, Limits: []string{key}, Priority: prio}
	if code := api(t, f.AdminToken, "POST", base, "/v1/jobs", j, nil); code != http.StatusCreated {
		t.Fatalf("create %s: %d", id, code)
	}
	waitFor(t, 10*time.Second, func() bool { return len(runsOf(t, f.AdminToken, base, id)) == 1 })
}

func prio(p int) *int { return &p }

// grantInTurn lets key one slot and releases the executions one at a
// time until n have run, returning the job IDs in the order they started.
func grantInTurn(t *testing.T, f *fleettest.Fleet, base, key string, g *gate, n int) []string {
	t.Helper()
	putLimit(t, f, base, key, `{"max_running": 1}`)
	for i := range n {
		waitFor(t, 20*time.Second, func() bool { r, e, _ := g.counts(); return r == 1 && e == i })
		g.release <- struct{}{}
	}
	waitFor(t, 20*time.Second, func() bool { _, e, _ := g.counts(); return e == n })
	_, _, order := g.counts()
	return order
}

// gatedFleet starts a fleet of one member, m1, with 4 partitions and
// the priority aging aging (0: the default), puts limit key's document
// limit, and runs workers w0, w1, … (as many as workers) whose attempts
// pass one gate, which it returns with the fleet and m1's URL.
func gatedFleet(t *testing.T, aging time.Duration, key, limit string, workers int) (*fleettest.Fleet, string, *gate) {
	t.Helper()
	f := fleettest.New(t, etcd, fleettest.Options{Partitions: 4, Scheduler: true, Quiet: true, PriorityAging: aging})
	f.Join("m1")
	f.WaitSettled(15 * time.Second)
	base := f.URLs()[0]
	putLimit(t, f, base, key, limit)
	g := newGate()
	for i := range workers {
		runHandlerWorker(t, fmt.Sprintf("w%d", i), []string{base}, f.WorkerToken, g.handler(), nil)
	}
	return f, base, g
}

// TestHigherPriorityIsGrantedFirst: with one slot of a key and runs of
// priorities 1 and 9 waiting for it (the 1s older, and first by ID), the
// 9s are granted first.
func TestHigherPriorityIsGrantedFirst(t *testing.T) {
	f, base, g := gatedFleet(t, -1, "slot", `{"max_running": 0}`, 1)
	for i := range 3 {
		createLimited(t, f, base, fmt.Sprintf("a-low-%d", i), "slot", prio(1))
	}
	for i := range 3 {
		createLimited(t, f, base, fmt.Sprintf("b-high-%d", i), "slot", prio(9))
	}
	want := `waiting for limit key "slot": no room, 3 ahead of it`
	var last string
	deadline := time.Now().Add(30 * time.Second)
	for {
		r := runsOf(t, f.AdminToken, base, "a-low-0")
		if len(r) == 1 && strings.Contains(r[0].Reason, want) {
			break
		}
		if len(r) == 1 {
			last = string(r[0].Status) + ": " + r[0].Reason
		}
		if time.Now().After(deadline) {
			t.Fatalf("a-low-0 is %q; want it pending, saying %q", last, want)
		}
		time.Sleep(50 * time.Millisecond)
	}
	order := grantInTurn(t, f, base, "slot", g, 6)
	for i, id := range order[:3] {
		if id[:6] != "b-high" {
			t.Fatalf("start %d was %s; want the priority-9 runs first: %v", i, id, order)
		}
	}
}

// TestAgedLowPriorityIsGrantedBeforeFreshHigh: a priority-0 run that has
// waited more than ten agings longer than runs of priority 9 is granted
// before them.
func TestAgedLowPriorityIsGrantedBeforeFreshHigh(t *testing.T) {
	const aging = 100 * time.Millisecond
	f, base, g := gatedFleet(t, aging, "slot", `{"max_running": 0}`, 1)
	createLimited(t, f, base, "z-old", "slot", prio(0))
	fired := runsOf(t, f.AdminToken, base, "z-old")[0].FiredAt
	if d := 11*aging - time.Since(fired); d > 0 {
		time.Sleep(d) // the fresh runs fire more than ten agings after it
	}
	for i := range 3 {
		createLimited(t, f, base, fmt.Sprintf("a-fresh-%d", i), "slot", prio(9))
	}
	order := grantInTurn(t, f, base, "slot", g, 4)
	if order[0] != "z-old" {
		t.Fatalf("first start was %s; want the aged priority-0 run: %v", order[0], order)
	}
}

// TestLoweringMaxRunningStopsNewStarts: lowering a key's max_running
// below the attempts running stops new starts until fewer than the new
// bound run; the running ones are not stopped.
func TestLoweringMaxRunningStopsNewStarts(t *testing.T) {
	f, base, g := gatedFleet(t, 0, "db", `{"max_running": 3}`, 2)
	for i := range 5 {
		createLimited(t, f, base, fmt.Sprintf("q-%d", i), "db", nil)
	}
	waitFor(t, 20*time.Second, func() bool { r, _, _ := g.counts(); return r == 3 })
	putLimit(t, f, base, "db", `{"max_running": 1}`)
	for ended := 1; ended <= 2; ended++ {
		g.release <- struct{}{}
		waitFor(t, 20*time.Second, func() bool { _, e, _ := g.counts(); return e == ended })
		time.Sleep(500 * time.Millisecond) // a start would come within a poll
		if r, _, order := g.counts(); r != 3-ended || len(order) != 3 {
			t.Fatalf("after %d ended under max_running 1: %d running, %d started; want %d running and no new start", ended, r, len(order), 3-ended)
		}
	}
	g.release <- struct{}{} // none running: one may start
	waitFor(t, 20*time.Second, func() bool { r, _, order := g.counts(); return r == 1 && len(order) == 4 })
	time.Sleep(500 * time.Millisecond)
	if r, _, order := g.counts(); r != 1 || len(order) != 4 {
		t.Fatalf("%d running, %d started; want one at a time under max_running 1", r, len(order))
	}
	close(g.release)
	waitFor(t, 20*time.Second, func() bool { _, e, _ := g.counts(); return e == 5 })
}

// TestDeletingAKeyFreesItsWaiters: runs waiting for a key of max_running
// 0 all start once the key is deleted.
func TestDeletingAKeyFreesItsWaiters(t *testing.T) {
	f, base, g := gatedFleet(t, 0, "closed", `{"max_running": 0}`, 1)
	for i := range 3 {
		createLimited(t, f, base, fmt.Sprintf("wait-%d", i), "closed", nil)
	}
	waitFor(t, 10*time.Second, func() bool {
		r := runsOf(t, f.AdminToken, base, "wait-0")
		return len(r) == 1 && r[0].Reason != ""
	})
	if r, _, _ := g.counts(); r != 0 {
		t.Fatalf("%d running under max_running 0", r)
	}
	if code := api(t, f.AdminToken, "DELETE", base, "/v1/limits/closed", nil, nil); code != http.StatusNoContent && code != http.StatusOK {
		t.Fatalf("DELETE limit: %d", code)
	}
	waitFor(t, 20*time.Second, func() bool { r, _, _ := g.counts(); return r == 3 })
	close(g.release)
}

// TestPriorityAcrossMembers: with one slot of a key shared by runs of
// priorities 1 and 9 spread over the partitions of two members, each
// member's partitions polled by a worker of its own, the 9s are granted
// first: a member does not grant the slot to a 1 while a 9 waits on the
// other (limits/queue entries).
func TestPriorityAcrossMembers(t *testing.T) {
	f := fleettest.New(t, etcd, fleettest.Options{Partitions: 8, Scheduler: true, Quiet: true, PriorityAging: -1})
	f.Join("m1")
	f.Join("m2")
	f.WaitSettled(15 * time.Second)
	urls := f.URLs()
	putLimit(t, f, urls[0], "slot", `{"max_running": 0}`)
	g := newGate()
	runHandlerWorker(t, "w0", urls[:1], f.WorkerToken, g.handler(), nil)
	runHandlerWorker(t, "w1", urls[1:], f.WorkerToken, g.handler(), nil)
	highs := map[int]bool{}
	for i := range 4 {
		createLimited(t, f, urls[0], fmt.Sprintf("a-low-%d", i), "slot", prio(1))
	}
	for i := range 4 {
		id := fmt.Sprintf("b-high-%d", i)
		createLimited(t, f, urls[0], id, "slot", prio(9))
		highs[runsOf(t, f.AdminToken, urls[0], id)[0].Partition] = true
	}
	// Every partition with a 9 has published it.
	cli := etcd.Client(t)
	waitFor(t, 20*time.Second, func() bool {
		for p := range highs {
			resp, err := cli.Get(context.Background(), fmt.Sprintf("%slimits/queue/slot/%d", f.NS, p))
			if err != nil || len(resp.Kvs) != 1 || !strings.Contains(string(resp.Kvs[0].Value), `"priority":9`) {
				return false
			}
		}
		return true
	})
	order := grantInTurn(t, f, urls[0], "slot", g, 8)
	for i, id := range order[:4] {
		if !strings.HasPrefix(id, "b-high") {
			t.Fatalf("start %d was %s; want the priority-9 runs first across both members: %v", i, id, order)
		}
	}
}
