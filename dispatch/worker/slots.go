package worker

import (
	"context"
	"slices"
	"sync"
)

// slots counts the free attempt slots. Pollers waiting for slots are
// served first come, first served, so a poller that gives its slot back
// (an idle long poll returning empty) and asks again at once queues behind
// the pollers already waiting, instead of starving them.
type slots struct {
	mu      sync.Mutex    // guards the fields below
	free    int           // slots neither held nor granted
	waiters []*slotWaiter // FIFO
}

// slotWaiter is a take waiting for slots; got is set, and ready closed,
// when it is granted.
type slotWaiter struct {
	want, got int
	ready     chan struct{}
}

func newSlots(n int) *slots { return &slots{free: n} }

// take waits until a slot is free (and earlier takes are served), then
// takes up to want of the free ones and returns how many it took.
func (s *slots) take(ctx context.Context, want int) (int, error) {
	want = max(want, 1)
	s.mu.Lock()
	if len(s.waiters) == 0 && s.free > 0 {
		n := min(s.free, want)
		s.free -= n
		s.mu.Unlock()
		return n, nil
	}
	wt := &slotWaiter{want: want, ready: make(chan struct{})}
	s.waiters = append(s.waiters, wt)
	s.mu.Unlock()
	select {
	case <-wt.ready:
		return wt.got, nil
	case <-ctx.Done():
		s.mu.Lock()
		defer s.mu.Unlock()
		select {
		case <-wt.ready: // granted meanwhile: give it back
			s.free += wt.got
			s.grantLocked()
		default:
			s.waiters = slices.DeleteFunc(s.waiters, func(o *slotWaiter) bool { return o == wt })
		}
		return 0, ctx.Err()
	}
}

// put gives n slots back.
func (s *slots) put(n int) {
	if n <= 0 {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.free += n
	s.grantLocked()
}

// grantLocked hands free slots to waiters in order; s.mu must be held.
func (s *slots) grantLocked() {
	for len(s.waiters) > 0 && s.free > 0 {
		wt := s.waiters[0]
		s.waiters = s.waiters[1:]
		wt.got = min(s.free, wt.want)
		s.free -= wt.got
		close(wt.ready)
	}
}
