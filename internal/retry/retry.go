// Package retry paces the retries of long-running loops: exponential
// back-off with jitter (github.com/cenkalti/backoff/v5) between attempts,
// and waits on an injected clock that end early when the loop is stopped
// (and the timers loops wait on for their next event).
// Every loop of jobfleet that retries etcd or an orchestrator uses it, so
// that the shape of a back-off is chosen in one place and tests control
// time through the clock instead of sleeping.
//
// A Backoff is not safe for concurrent use: each loop owns its own.
package retry

import (
	"context"
	"time"

	"github.com/cenkalti/backoff/v5"
	"github.com/jonboulle/clockwork"
)

// Policy is the shape of a back-off: the first wait and the longest. Each
// wait is the previous one × 1.5, randomised by ±50% so that members that
// failed together do not retry together.
type Policy struct {
	// Initial is the first wait (before randomisation); > 0.
	Initial time.Duration
	// Max caps every wait (before randomisation); ≥ Initial.
	Max time.Duration
}

// The policies of the fleet's loops.
var (
	// Watch re-lists and re-watches etcd after a watch ended: quick at
	// first (a watch ends on compaction or a leader change, which heal
	// at once), at most every 2 s.
	Watch = Policy{Initial: 50 * time.Millisecond, Max: 2 * time.Second}
	// Etcd retries an etcd request that failed (unreachable, no leader,
	// timed out): from 100 ms to 5 s.
	Etcd = Policy{Initial: 100 * time.Millisecond, Max: 5 * time.Second}
)

// Backoff yields the waits between the attempts of one loop.
type Backoff struct {
	bo *backoff.ExponentialBackOff
}

// New returns a back-off with policy p, at its first wait.
func New(p Policy) *Backoff {
	bo := backoff.NewExponentialBackOff()
	bo.InitialInterval = p.Initial
	bo.MaxInterval = p.Max
	bo.Reset()
	return &Backoff{bo: bo}
}

// Next returns the wait before the next attempt, and lengthens the one
// after it.
func (b *Backoff) Next() time.Duration { return b.bo.NextBackOff() }

// Reset starts over at the first wait: call it after a success.
func (b *Backoff) Reset() { b.bo.Reset() }

// Sleep waits d on clock and reports true, or reports false as soon as ctx
// ends. A d of zero or less returns at once (true unless ctx has ended).
func Sleep(ctx context.Context, clock clockwork.Clock, d time.Duration) bool {
	return SleepOrClosed(ctx, clock, d, nil)
}

// SleepOrClosed waits d on clock and reports true, or reports false as
// soon as ctx ends or stop is closed (a nil stop never closes).
func SleepOrClosed(ctx context.Context, clock clockwork.Clock, d time.Duration, stop <-chan struct{}) bool {
	if d <= 0 {
		select {
		case <-stop:
			return false
		default:
			return ctx.Err() == nil
		}
	}
	t := clock.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.Chan():
		return true
	case <-ctx.Done():
		return false
	case <-stop:
		return false
	}
}

// ArmAt sets timer, of a loop that waits for its next event, to fire at
// instant at of clock (at once if it has passed), or in an hour where at
// is zero (no event due). A timer counts its duration from when it is
// set, so a clock that jumps between reading it and setting the timer (a
// controlled clock in tests; in production a pause of the process) would
// make it fire late by the jump: it is set again until the clock stood
// (within a millisecond) while it was set.
func ArmAt(clock clockwork.Clock, timer clockwork.Timer, at time.Time) {
	if at.IsZero() {
		timer.Reset(time.Hour)
		return
	}
	for {
		before := clock.Now()
		timer.Reset(max(at.Sub(before), 0))
		if clock.Since(before) < time.Millisecond {
			return
		}
	}
}
