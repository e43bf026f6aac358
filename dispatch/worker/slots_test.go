package worker

import (
	"context"
	"testing"
	"time"
)

func TestSlotsFIFO(t *testing.T) {
	s := newSlots(2)
	ctx := context.Background()
	if n, _ := s.take(ctx, 5); n != 2 {
		t.Fatalf("take(5) of 2 free = %d, want 2", n)
	}
	// Two waiters queue; the first gets the first slot given back even if
	// the second asks again sooner.
	got := make(chan string, 2)
	first := make(chan struct{})
	go func() {
		close(first)
		s.take(ctx, 1)
		got <- "first"
	}()
	<-first
	waitFor(t, func() bool { s.mu.Lock(); defer s.mu.Unlock(); return len(s.waiters) == 1 })
	go func() {
		s.take(ctx, 1)
		got <- "second"
	}()
	waitFor(t, func() bool { s.mu.Lock(); defer s.mu.Unlock(); return len(s.waiters) == 2 })
	s.put(1)
	if w := <-got; w != "first" {
		t.Fatalf("slot went to the %s waiter, want the first", w)
	}
	s.put(1)
	if w := <-got; w != "second" {
		t.Fatalf("slot went to the %s waiter, want the second", w)
	}
}

func TestSlotsCancelledWaiterGivesBack(t *testing.T) {
	s := newSlots(1)
	if n, _ := s.take(context.Background(), 1); n != 1 {
		t.Fatal("take failed")
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := s.take(ctx, 1)
		done <- err
	}()
	waitFor(t, func() bool { s.mu.Lock(); defer s.mu.Unlock(); return len(s.waiters) == 1 })
	cancel()
	if err := <-done; err == nil {
		t.Fatal("take after cancel = nil error, want the context's")
	}
	s.put(1)
	s.mu.Lock()
	free, waiters := s.free, len(s.waiters)
	s.mu.Unlock()
	if free != 1 || waiters != 0 {
		t.Fatalf("free %d, waiters %d; want 1 and 0", free, waiters)
	}
}

// waitFor polls cond (internal state without an event to wait on).
func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not reached")
		}
		time.Sleep(time.Millisecond)
	}
}
