package dispatch

import (
	"math"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

func TestHistogramQuantile(t *testing.T) {
	bounds := []float64{1, 2, 4}
	for _, tt := range []struct {
		name       string
		q          float64
		cumulative []uint64
		total      uint64
		want       float64
	}{
		{"no observations", 0.99, []uint64{0, 0, 0}, 0, 0},
		{"all in the first bucket, half way", 0.5, []uint64{10, 10, 10}, 10, 0.5},
		{"in the second bucket", 0.75, []uint64{50, 100, 100}, 100, 1.5},
		{"in the third bucket", 0.99, []uint64{0, 0, 100}, 100, 2 + 2*0.99},
		{"past the last bound", 0.99, []uint64{0, 0, 50}, 100, 4},
		{"q outside 0..1", 1.5, []uint64{1, 1, 1}, 1, math.NaN()},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got := HistogramQuantile(tt.q, bounds, tt.cumulative, tt.total)
			if math.IsNaN(tt.want) != math.IsNaN(got) || (!math.IsNaN(got) && math.Abs(got-tt.want) > 1e-9) {
				t.Errorf("got %v, want %v", got, tt.want)
			}
		})
	}
}

func TestTotalsReadTheCounters(t *testing.T) {
	m := NewMetrics(prometheus.NewRegistry())
	m.fired("pending", 3)
	m.fired("skipped", 1)
	m.finishedRun("dead")
	m.finishedRun("failed")
	m.finishedRun("failed")
	for range 99 {
		m.observeLag(0.0015) // the (0.001, 0.002] bucket
	}
	m.observeLag(10)
	got := m.Totals()
	if got.Fires != 4 || got.Dead != 1 || got.Failed != 2 {
		t.Errorf("got %+v, want 4 fires, 1 dead, 2 failed", got)
	}
	if got.LagP99 <= 0.001 || got.LagP99 > 0.002 {
		t.Errorf("lag p99 %v, want within (0.001, 0.002]", got.LagP99)
	}
	var none *Metrics
	if none.Totals() != (Totals{}) {
		t.Errorf("nil metrics read %+v, want zeros", none.Totals())
	}
}
