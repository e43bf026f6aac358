package worker_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"

	"github.com/jobfleet/jobfleet/api"
	"github.com/jobfleet/jobfleet/dispatch/worker"
)

func okHandler(w *worker.Worker, t *testing.T) {
	mustHandle(t, w, "ok", func(context.Context, worker.Run) error { return nil })
}

// TestMembersListDiscovery: the worker, given one seed, polls every member
// of the list, stops polling a member that leaves and polls it again when
// it comes back.
func TestMembersListDiscovery(t *testing.T) {
	clock := clockwork.NewFakeClock() // drives the refreshes only
	a, b := newFakeOrch(t, "a", nil), newFakeOrch(t, "b", nil)
	both := []api.Member{{ID: "a", Addr: a.URL()}, {ID: "b", Addr: b.URL()}}
	a.setMembers(both...)
	b.setMembers(both...)
	d := worker.MembersFrom(a.URL())
	d.Clock = clock
	d.Interval = 10 * time.Second
	lg, logs := newTestLogger(t)
	startWorker(t, worker.Config{Orchestrators: d, Logger: lg}, func(w *worker.Worker) { okHandler(w, t) })

	b.enqueue(b.assignment("r1", handlerExec("ok"), ""))
	b.waitComplete(t, "r1") // b was found through a's members list

	a.setMembers(both[0])
	b.setMembers(both[0])
	blockUntil(t, clock, 1)
	clock.Advance(10 * time.Second)
	logs.wait(t, "orchestrator removed")
	b.waitFor(t, "polls to stop", func() bool { return b.pollsActive == 0 })
	polls, _, _, _ := b.snapshot()

	a.setMembers(both...)
	b.setMembers(both...)
	blockUntil(t, clock, 1)
	clock.Advance(10 * time.Second)
	// A poll the removed poller sent just before it stopped may reach b
	// after it stopped (its connection closed, which b notices a moment
	// later): an attempt handed to it would never reach the worker. Two
	// polls since make sure the poller started anew is polling, as its
	// first poll is held for the short wait of a changed set.
	b.waitFor(t, "polls to resume", func() bool { return len(b.polls) >= len(polls)+2 })
	b.enqueue(b.assignment("r2", handlerExec("ok"), ""))
	b.waitComplete(t, "r2")
}

// TestMembersListSeedDown: an unreachable seed is skipped, and a member
// learned earlier is asked when the seeds are down.
func TestMembersListFallback(t *testing.T) {
	clock := clockwork.NewFakeClock()
	a := newFakeOrch(t, "a", nil)
	a.setMembers(api.Member{ID: "a", Addr: a.URL()})
	d := worker.MembersFrom("http://127.0.0.1:1", a.URL())
	d.Clock = clock
	updates := make(chan []string, 10)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- d.Watch(ctx, func(addrs []string) { updates <- addrs }) }()
	if got := recv(t, updates, "first update"); !slices.Equal(got, []string{a.URL()}) {
		t.Errorf("update %q, want [%q]", got, a.URL())
	}
	cancel()
	if err := recv(t, done, "Watch to return"); err != nil {
		t.Errorf("Watch = %v, want nil", err)
	}
}

// TestMembersListSettlesQuickly: after the list changed, a member that
// registers next is found within a second, not a whole Interval.
func TestMembersListSettlesQuickly(t *testing.T) {
	clock := clockwork.NewFakeClock()
	a, b := newFakeOrch(t, "a", nil), newFakeOrch(t, "b", nil)
	a.setMembers(api.Member{ID: "a", Addr: a.URL()})
	d := worker.MembersFrom(a.URL())
	d.Clock = clock
	d.Interval = time.Minute
	updates := make(chan []string, 10)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- d.Watch(ctx, func(addrs []string) { updates <- addrs }) }()
	defer func() { cancel(); recv(t, done, "Watch to return") }()
	if got := recv(t, updates, "first update"); !slices.Equal(got, []string{a.URL()}) {
		t.Fatalf("update %q, want [%q]", got, a.URL())
	}
	a.setMembers(api.Member{ID: "a", Addr: a.URL()}, api.Member{ID: "b", Addr: b.URL()})
	blockUntil(t, clock, 1)
	clock.Advance(time.Second)
	want := []string{a.URL(), b.URL()}
	slices.Sort(want)
	if got := recv(t, updates, "the second member"); !slices.Equal(got, want) {
		t.Fatalf("update %q, want %q", got, want)
	}
}
