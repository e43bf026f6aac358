package activity

import (
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
	"pgregory.net/rapid"

	"github.com/jobfleet/jobfleet/api"
)

var t0 = time.Date(2026, 6, 1, 12, 0, 30, 0, time.UTC)

func TestMinutesCountPerMinute(t *testing.T) {
	clock := clockwork.NewFakeClockAt(t0)
	r := New(clock)
	r.Fired(api.RunPending, 3)
	r.Fired(api.RunSkipped, 1)
	r.Lag(0.0005)
	r.Lag(0.003)
	r.Lag(100) // above every bound
	r.Finished(api.RunSucceeded)
	r.Finished(api.RunFailed)
	r.Sample(2, 7)
	clock.Advance(time.Minute)
	r.Finished(api.RunDead)
	r.Finished(api.RunCancelled)
	r.Sample(1, 0)

	got := r.Minutes()
	if len(got) != 2 {
		t.Fatalf("got %d minutes, want 2 (since the first use): %+v", len(got), got)
	}
	m0, m1 := got[0], got[1]
	if !m0.Start.Equal(t0.Truncate(time.Minute)) || !m1.Start.Equal(m0.Start.Add(time.Minute)) {
		t.Fatalf("minutes start at %s and %s", m0.Start, m1.Start)
	}
	if m0.Fires != 3 || m0.Skipped != 1 || m0.Succeeded != 1 || m0.Failed != 1 || m0.Running != 2 || m0.Waiting != 7 {
		t.Errorf("first minute %+v", m0)
	}
	if m1.Dead != 1 || m1.Cancelled != 1 || m1.Fires != 0 || m1.Running != 1 || m1.LagBuckets != nil {
		t.Errorf("second minute %+v", m1)
	}
	if m0.LagBuckets[0] != 1 || m0.LagBuckets[2] != 1 || m0.LagBuckets[len(m0.LagBuckets)-1] != 1 {
		t.Errorf("lag buckets %v: want 0.5 ms in the first, 3 ms in the third (≤4 ms), 100 s in the last", m0.LagBuckets)
	}
	if m0.LagP50Seconds != 0.004 || m0.LagP99Seconds != 32.768 {
		t.Errorf("lag p50 %v, p99 %v; want 0.004 and 32.768", m0.LagP50Seconds, m0.LagP99Seconds)
	}
}

func TestMinutesKeepAnHour(t *testing.T) {
	clock := clockwork.NewFakeClockAt(t0)
	r := New(clock)
	for range 150 {
		r.Fired(api.RunPending, 1)
		clock.Advance(time.Minute)
	}
	clock.Advance(10 * time.Minute) // ten quiet minutes
	got := r.Minutes()
	if len(got) != api.ActivityMinutes {
		t.Fatalf("got %d minutes, want %d", len(got), api.ActivityMinutes)
	}
	now := clock.Now().Truncate(time.Minute)
	for i, m := range got {
		want := now.Add(-time.Duration(len(got)-1-i) * time.Minute)
		if !m.Start.Equal(want) {
			t.Fatalf("minute %d starts at %s, want %s", i, m.Start, want)
		}
		if quiet := i >= len(got)-11; quiet != (m.Fires == 0) {
			t.Errorf("minute %d (%s) has %d fires", i, m.Start, m.Fires)
		}
	}
}

func TestNilRecorderRecordsNothing(t *testing.T) {
	var r *Recorder
	r.Fired(api.RunPending, 1)
	r.Lag(1)
	r.Finished(api.RunDead)
	r.Sample(1, 1)
	if got := r.Minutes(); len(got) != 0 {
		t.Fatalf("nil recorder minutes %v", got)
	}
}

// TestQuantileIsTheBucketOfTheRank: over random lags, the estimate is the
// bound of the bucket that holds the lag of rank ⌈q·n⌉ in sorted order.
func TestQuantileIsTheBucketOfTheRank(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		lags := rapid.SliceOfN(rapid.Float64Range(0, 60), 1, 200).Draw(t, "lags")
		q := rapid.SampledFrom([]float64{0.5, 0.9, 0.99}).Draw(t, "q")
		clock := clockwork.NewFakeClockAt(t0)
		r := New(clock)
		for _, l := range lags {
			r.Lag(l)
		}
		got := r.Minutes()[0]
		est := Quantile(got.LagBuckets, q)
		var below, atOrBelow int
		for _, l := range lags {
			if l <= est || est == bounds[len(bounds)-1] {
				atOrBelow++
			}
			if l < est/2 && est > bounds[0] {
				below++
			}
		}
		if float64(atOrBelow) < q*float64(len(lags))-0.5 {
			t.Fatalf("estimate %v for q %v: only %d of %d lags at or below it", est, q, atOrBelow, len(lags))
		}
		if est > bounds[0] && float64(below) > q*float64(len(lags))+0.5 {
			t.Fatalf("estimate %v for q %v: %d of %d lags are in lower buckets, the quantile is lower", est, q, below, len(lags))
		}
	})
}
