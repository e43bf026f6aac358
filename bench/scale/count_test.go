package scale

import (
	"testing"
	"time"
)

// TestCountPause: counts of keys are paced by their cost, so that a count
// over a million keys does not take the store's CPU from the fleet.
func TestCountPause(t *testing.T) {
	for _, c := range []struct{ least, took, want time.Duration }{
		{50 * time.Millisecond, time.Millisecond, 50 * time.Millisecond},
		{50 * time.Millisecond, 200 * time.Millisecond, 800 * time.Millisecond},
		{0, 300 * time.Millisecond, 1200 * time.Millisecond},
		{250 * time.Millisecond, 0, 250 * time.Millisecond},
	} {
		if got := countPause(c.least, c.took); got != c.want {
			t.Errorf("countPause(%v, %v) = %v, want %v", c.least, c.took, got, c.want)
		}
	}
}
