package notify

import (
	"time"

	"github.com/jobfleet/jobfleet/internal/retry"
)

// breaker is one destination's circuit breaker:
//
//	closed ──(threshold failed tries in a row)──▶ open
//	open ──(its back-off passed)──▶ half-open: one probe may be sent
//	half-open ──(probe succeeded)──▶ closed, back-off reset
//	half-open ──(probe failed)──▶ open, for a longer back-off
//
// A try that was in flight when the circuit opened does not change it
// when it fails; any success closes it. Home-made rather than
// sony/gobreaker: that one reads the real clock (tests could not control
// it), keeps one open period rather than a growing one, and does not say
// when it half-opens, which the deliverer needs to know when to wake.
// Not safe for concurrent use: the deliverer's lock guards it.
type breaker struct {
	failures  int       // failed tries in a row
	openUntil time.Time // zero: closed; else open until then, half-open after
	probing   bool      // half-open and its probe is in flight
	bo        *retry.Backoff
}

// isOpen reports whether the circuit is open or half-open.
func (b *breaker) isOpen() bool { return !b.openUntil.IsZero() }

// allow reports whether a try may start at now; if not, until is when
// one may (zero: when the probe in flight returns).
func (b *breaker) allow(now time.Time) (ok bool, until time.Time) {
	switch {
	case !b.isOpen():
		return true, time.Time{}
	case now.Before(b.openUntil):
		return false, b.openUntil
	case b.probing:
		return false, time.Time{}
	}
	return true, time.Time{}
}

// started records that a try allowed at now started: the probe, if the
// circuit is half-open.
func (b *breaker) started(now time.Time) {
	if b.isOpen() && !now.Before(b.openUntil) {
		b.probing = true
	}
}

// succeeded records a successful try and reports whether it closed the
// circuit.
func (b *breaker) succeeded() (closed bool) {
	closed = b.isOpen()
	b.failures, b.openUntil, b.probing = 0, time.Time{}, false
	if b.bo != nil {
		b.bo.Reset()
	}
	return closed
}

// failed records a failed try at now and reports whether it opened the
// circuit, and for how long.
func (b *breaker) failed(now time.Time, threshold int, p retry.Policy) (opened bool, wait time.Duration) {
	b.failures++
	switch {
	case b.probing:
		b.probing = false
	case !b.isOpen() && b.failures >= threshold:
		if b.bo == nil {
			b.bo = retry.New(p)
		}
	default:
		return false, 0
	}
	wait = b.bo.Next()
	b.openUntil = now.Add(wait)
	return true, wait
}

// idle reports whether the breaker holds nothing worth keeping at now:
// closed, or open with its back-off passed and no probe in flight.
func (b *breaker) idle(now time.Time) bool {
	return !b.isOpen() || (!now.Before(b.openUntil) && !b.probing)
}
