package worker_test

import (
	"context"
	"encoding/json"
	"slices"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"

	"github.com/jobfleet/jobfleet/dispatch/worker"
	"github.com/jobfleet/jobfleet/internal/testkit/etcdtest"
	"github.com/jobfleet/jobfleet/membership"
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
	both := []membership.Member{{ID: "a", Addr: a.URL()}, {ID: "b", Addr: b.URL()}}
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
	b.waitFor(t, "polls to resume", func() bool { return len(b.polls) > len(polls) })
	b.enqueue(b.assignment("r2", handlerExec("ok"), ""))
	b.waitComplete(t, "r2")
}

// TestMembersListSeedDown: an unreachable seed is skipped, and a member
// learned earlier is asked when the seeds are down.
func TestMembersListFallback(t *testing.T) {
	clock := clockwork.NewFakeClock()
	a := newFakeOrch(t, "a", nil)
	a.setMembers(membership.Member{ID: "a", Addr: a.URL()})
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

func putMember(t *testing.T, ctx context.Context, ns string, m membership.Member) {
	t.Helper()
	b, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := etcd.Client(t).Put(ctx, membership.Key(ns, m.ID), string(b)); err != nil {
		t.Fatalf("put member: %v", err)
	}
}

func TestEtcdDiscovery(t *testing.T) {
	client := etcd.Client(t)
	ns := etcdtest.Namespace(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	d := worker.EtcdOrchestrators(client, ns)
	updates := make(chan []string, 100)
	done := make(chan error, 1)
	go func() { done <- d.Watch(ctx, func(addrs []string) { updates <- addrs }) }()
	waitUpdate := func(want ...string) {
		t.Helper()
		for {
			got := recv(t, updates, "an update")
			if slices.Equal(got, want) {
				return
			}
		}
	}
	waitUpdate()
	putMember(t, ctx, ns, membership.Member{ID: "a", Addr: "http://a.example:8080/"})
	waitUpdate("http://a.example:8080")
	putMember(t, ctx, ns, membership.Member{ID: "b", Addr: "http://b.example:8080"})
	waitUpdate("http://a.example:8080", "http://b.example:8080")
	if _, err := client.Delete(ctx, membership.Key(ns, "a")); err != nil {
		t.Fatal(err)
	}
	waitUpdate("http://b.example:8080")
	cancel()
	if err := recv(t, done, "Watch to return"); err != nil {
		t.Errorf("Watch = %v, want nil", err)
	}
}

// TestEtcdDiscoveryEndToEnd: a worker finds an orchestrator registered in
// etcd and runs its attempt.
func TestEtcdDiscoveryEndToEnd(t *testing.T) {
	ns := etcdtest.Namespace(t)
	f := newFakeOrch(t, "a", nil)
	putMember(t, context.Background(), ns, membership.Member{ID: "a", Addr: f.URL()})
	startWorker(t, worker.Config{Orchestrators: worker.EtcdOrchestrators(etcd.Client(t), ns)}, func(w *worker.Worker) { okHandler(w, t) })
	f.enqueue(f.assignment("r1", handlerExec("ok"), ""))
	if c := f.waitComplete(t, "r1"); !c.Success {
		t.Fatalf("completion %+v, want success", c)
	}
}

func TestEtcdDiscoveryValidate(t *testing.T) {
	for _, ns := range []string{"", "/jobfleet"} {
		if err := worker.EtcdOrchestrators(etcd.Client(t), ns).Validate(); err == nil {
			t.Errorf("namespace %q: Validate() = nil, want an error", ns)
		}
	}
}

// TestMembersListSettlesQuickly: after the list changed, a member that
// registers next is found within a second, not a whole Interval.
func TestMembersListSettlesQuickly(t *testing.T) {
	clock := clockwork.NewFakeClock()
	a, b := newFakeOrch(t, "a", nil), newFakeOrch(t, "b", nil)
	a.setMembers(membership.Member{ID: "a", Addr: a.URL()})
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
	a.setMembers(membership.Member{ID: "a", Addr: a.URL()}, membership.Member{ID: "b", Addr: b.URL()})
	blockUntil(t, clock, 1)
	clock.Advance(time.Second)
	want := []string{a.URL(), b.URL()}
	slices.Sort(want)
	if got := recv(t, updates, "the second member"); !slices.Equal(got, want) {
		t.Fatalf("update %q, want %q", got, want)
	}
}
