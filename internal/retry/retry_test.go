package retry_test

import (
	"context"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"

	"github.com/jobfleet/jobfleet/internal/retry"
)

// TestBackoffGrowsWithinPolicy checks that waits grow from the policy's
// first wait to its cap (within the ±50% jitter) and start over on Reset.
func TestBackoffGrowsWithinPolicy(t *testing.T) {
	p := retry.Policy{Initial: 100 * time.Millisecond, Max: time.Second}
	b := retry.New(p)
	first := b.Next()
	if first < p.Initial/2 || first > p.Initial*3/2 {
		t.Fatalf("first wait %v outside %v ± 50%%", first, p.Initial)
	}
	var last time.Duration
	for range 50 {
		last = b.Next()
		if last > p.Max*3/2 {
			t.Fatalf("wait %v beyond the cap %v + 50%%", last, p.Max)
		}
	}
	if last < p.Max/2 {
		t.Errorf("after 50 waits the wait is %v, want near the cap %v", last, p.Max)
	}
	b.Reset()
	if again := b.Next(); again > p.Initial*3/2 {
		t.Errorf("after Reset the wait is %v, want about %v", again, p.Initial)
	}
}

// TestSleep checks that Sleep ends when the controlled clock reaches the
// wait, and at once when the context ends, without waiting for real time.
func TestSleep(t *testing.T) {
	clock := clockwork.NewFakeClock()
	ctx := context.Background()
	done := make(chan bool)
	go func() { done <- retry.Sleep(ctx, clock, time.Hour) }()
	if err := clock.BlockUntilContext(ctx, 1); err != nil {
		t.Fatal(err)
	}
	select {
	case <-done:
		t.Fatal("Sleep returned before the clock moved")
	default:
	}
	clock.Advance(time.Hour)
	if !<-done {
		t.Error("Sleep reported a stop after its full wait")
	}

	cctx, cancel := context.WithCancel(ctx)
	go func() { done <- retry.Sleep(cctx, clock, time.Hour) }()
	if err := clock.BlockUntilContext(ctx, 1); err != nil {
		t.Fatal(err)
	}
	cancel()
	if <-done {
		t.Error("Sleep reported a full wait although its context ended")
	}
	if retry.Sleep(cctx, clock, 0) {
		t.Error("Sleep(0) on an ended context reported true")
	}
	if !retry.Sleep(ctx, clock, 0) {
		t.Error("Sleep(0) reported a stop")
	}
}

// TestSleepOrClosed checks that a closed stop channel ends the wait.
func TestSleepOrClosed(t *testing.T) {
	clock := clockwork.NewFakeClock()
	ctx := context.Background()
	stop := make(chan struct{})
	done := make(chan bool)
	go func() { done <- retry.SleepOrClosed(ctx, clock, time.Hour, stop) }()
	if err := clock.BlockUntilContext(ctx, 1); err != nil {
		t.Fatal(err)
	}
	close(stop)
	if <-done {
		t.Error("SleepOrClosed reported a full wait although stop was closed")
	}
	if retry.SleepOrClosed(ctx, clock, 0, stop) {
		t.Error("SleepOrClosed(0) with stop closed reported true")
	}
	go func() { done <- retry.SleepOrClosed(ctx, clock, time.Minute, nil) }()
	if err := clock.BlockUntilContext(ctx, 1); err != nil {
		t.Fatal(err)
	}
	clock.Advance(time.Minute)
	if !<-done {
		t.Error("SleepOrClosed with a nil stop reported a stop")
	}
}

// TestArmAt: a timer armed for an instant fires when the clock reaches
// it (at once for one passed), and one armed for no instant only after
// an hour.
func TestArmAt(t *testing.T) {
	clock := clockwork.NewFakeClock()
	timer := clock.NewTimer(time.Hour)
	fired := func() bool {
		select {
		case <-timer.Chan():
			return true
		default:
			return false
		}
	}
	retry.ArmAt(clock, timer, clock.Now().Add(time.Minute))
	clock.Advance(59 * time.Second)
	if fired() {
		t.Fatal("fired a second before its instant")
	}
	clock.Advance(time.Second)
	if !fired() {
		t.Fatal("not fired at its instant")
	}
	retry.ArmAt(clock, timer, clock.Now().Add(-time.Minute))
	if !fired() {
		t.Fatal("armed for a passed instant, not fired at once")
	}
	retry.ArmAt(clock, timer, time.Time{})
	clock.Advance(59 * time.Minute)
	if fired() {
		t.Fatal("armed for no instant, fired before an hour")
	}
	clock.Advance(time.Minute)
	if !fired() {
		t.Fatal("armed for no instant, not fired after an hour")
	}
}
