package skewclock_test

import (
	"context"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"
	"go.uber.org/zap/zaptest"

	"github.com/jobfleet/jobfleet/internal/skewclock"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestWallIsSkewedDurationsAreReal(t *testing.T) {
	c, err := skewclock.New()
	if err != nil {
		t.Fatal(err)
	}
	for _, off := range []time.Duration{5 * time.Second, -5 * time.Second, 0} {
		c.SetOffset(off)
		real := time.Now()
		got := c.Now()
		// The wall reading, as printed, stored or compared with a time
		// without a monotonic reading (a scheduled time), is off.
		if d := got.Round(0).Sub(real.Round(0)); d < off || d > off+time.Second {
			t.Errorf("offset %v: wall reading off by %v, want %v", off, d, off)
		}
		if d := c.Until(real.Round(0).Add(off)); d > 0 {
			t.Errorf("offset %v: a time at the skewed now is %v away, want due", off, d)
		}
	}
	// A duration measured across a change of the offset is the real one,
	// as on a host whose clock is stepped.
	c.SetOffset(0)
	before := c.Now()
	deadline := before.Add(4 * time.Second)
	c.SetOffset(10 * time.Second)
	if got := c.Since(before); got < 0 || got > time.Second {
		t.Errorf("Since across a +10s step = %v, want the real elapsed time", got)
	}
	if c.Now().After(deadline) {
		t.Errorf("a +10s step expired an in-memory deadline 4s ahead")
	}
	c.SetOffset(-10 * time.Second)
	if got := c.Since(before); got < 0 || got > time.Second {
		t.Errorf("Since across a -10s step = %v, want the real elapsed time", got)
	}
	// A context deadline made from a reading is real too.
	ctx, cancel := context.WithDeadline(context.Background(), c.Now().Add(time.Minute))
	defer cancel()
	if ctx.Err() != nil {
		t.Errorf("a deadline a minute ahead of a clock 10s behind has passed: %v", ctx.Err())
	}
}

func TestParseOffset(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want time.Duration
		bad  bool
	}{
		{"", 0, false}, {" 5s\n", 5 * time.Second, false}, {"-2.5s", -2500 * time.Millisecond, false},
		{"0", 0, false}, {"five", 0, true}, {"48h", 0, true},
	} {
		got, err := skewclock.ParseOffset([]byte(tc.in))
		if (err != nil) != tc.bad || got != tc.want {
			t.Errorf("ParseOffset(%q) = %v, %v; want %v, error %v", tc.in, got, err, tc.want, tc.bad)
		}
	}
}

func TestFollowReadsTheFile(t *testing.T) {
	c, err := skewclock.New()
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "offset")
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() { skewclock.Follow(ctx, c, path, 5*time.Millisecond, zaptest.NewLogger(t)) })
	defer func() { cancel(); wg.Wait() }()
	await := func(want time.Duration) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for c.Offset() != want {
			if time.Now().After(deadline) {
				t.Fatalf("offset %v, want %v", c.Offset(), want)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	for _, step := range []struct {
		content string
		want    time.Duration
	}{{"3s", 3 * time.Second}, {"nonsense", 3 * time.Second}, {"-4s", -4 * time.Second}, {"", 0}} {
		// Written whole, by rename: os.WriteFile truncates first, and a
		// read between the truncation and the write sees an empty file
		// (offset 0).
		tmp := path + ".tmp"
		if err := os.WriteFile(tmp, []byte(step.content), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tmp, path); err != nil {
			t.Fatal(err)
		}
		if step.content == "nonsense" {
			time.Sleep(50 * time.Millisecond) // several reads: the offset must stay
		}
		await(step.want)
	}
}
