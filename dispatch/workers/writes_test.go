package workers_test

import (
	"context"
	"testing"
	"time"

	"github.com/jobfleet/jobfleet/dispatch/workers"
)

// TestIdenticalRefreshesWriteNothing: re-registering with the same
// content renews the registration's lease and writes nothing, however
// often; Active alone is stored at most every UpdateInterval, the member
// a worker moves to at once, a change of executors at once.
func TestIdenticalRefreshesWriteNothing(t *testing.T) {
	e := newEnv(t)
	m1 := e.registry("m1", workers.Config{TTL: 5 * time.Second})
	m2 := e.registry("m2", workers.Config{TTL: 5 * time.Second})
	rq := req("w1", "cred-a")
	e.register(m1, rq)
	_, first, _ := e.stored("w1")

	// The lease has run down by a second (on etcd's clock); a refresh
	// renews it, writing nothing.
	ctx := context.Background()
	for {
		ttl, err := e.client.TimeToLive(ctx, first.lease)
		if err != nil {
			t.Fatal(err)
		}
		if ttl.TTL < 5 {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	before := e.revision()
	for range 50 {
		e.register(m1, rq)
	}
	if n := e.writesSince(before); n != 0 {
		t.Fatalf("50 identical refreshes wrote %d times, want none", n)
	}
	if ttl, err := e.client.TimeToLive(ctx, first.lease); err != nil || ttl.TTL < 4 {
		t.Fatalf("lease after the refreshes: %+v (%v), want renewed to the TTL", ttl, err)
	}

	// Active changing at every refresh: not stored within the interval.
	before = e.revision()
	for i := range 20 {
		rq.Active = i % 2
		e.register(m1, rq)
	}
	if n := e.writesSince(before); n != 0 {
		t.Fatalf("Active toggled within the update interval: %d writes, want none", n)
	}
	// Once the interval has passed, the next change is stored, once.
	before = e.revision()
	e.clock.Advance(workers.DefaultUpdateInterval)
	rq.Active = 3
	e.register(m1, rq)
	e.register(m1, rq)
	rq.Active = 2
	e.register(m1, rq)
	w, _, _ := e.stored("w1")
	if n := e.writesSince(before); w.Active != 3 || n != 1 || !w.LastContact.Equal(e.clock.Now()) {
		t.Fatalf("after the interval: active %d (last contact %v) in %d writes, want 3 written once", w.Active, w.LastContact, n)
	}

	// The worker moves to m2: stored at once, with the same registration
	// and lease; and back.
	before = e.revision()
	e.register(m2, rq)
	w, kv, _ := e.stored("w1")
	if w.Orchestrator != "m2" || w.Active != 2 || kv.create != first.create || kv.lease != first.lease {
		t.Fatalf("after the move: %+v %+v, want held by m2 with active 2, same create revision and lease", w, kv)
	}
	e.register(m2, rq)
	e.register(m1, rq)
	if n := e.writesSince(before); n != 2 {
		t.Fatalf("%d writes for a move and back, want 2", n)
	}

	// A change of what the worker serves is stored at once.
	before = e.revision()
	rq.Executors = []string{"http", "resize"}
	e.register(m1, rq)
	w, _, _ = e.stored("w1")
	if n := e.writesSince(before); len(w.Executors) != 2 || n != 1 {
		t.Fatalf("after a change of executors: %+v in %d writes, want stored in one", w, n)
	}
}
