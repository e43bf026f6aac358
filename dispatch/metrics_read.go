package dispatch

import (
	"math"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

// Totals is a reading of a member's dispatcher counters since it started.
type Totals struct {
	// Fires counts the runs fires recorded (every status).
	Fires float64
	// LagP99 is the 99th percentile of the schedule lag of on-time fires,
	// in seconds, estimated from the histogram's buckets; 0 before any.
	LagP99 float64
	// Failed and Dead count attempts that finished with the run failed
	// (a retry follows) and dead (no retry left).
	Failed, Dead float64
}

// Totals reads the counters now. A nil *Metrics reads zeros. Safe for
// concurrent use.
func (m *Metrics) Totals() Totals {
	if m == nil {
		return Totals{}
	}
	var t Totals
	for _, st := range []string{"pending", "skipped"} {
		t.Fires += counterValue(m.fires.WithLabelValues(st))
	}
	t.Failed = counterValue(m.finished.WithLabelValues("failed"))
	t.Dead = counterValue(m.finished.WithLabelValues("dead"))
	var d dto.Metric
	if m.lag.Write(&d) == nil && d.Histogram != nil {
		var bounds []float64
		var counts []uint64
		for _, b := range d.Histogram.Bucket {
			bounds = append(bounds, b.GetUpperBound())
			counts = append(counts, b.GetCumulativeCount())
		}
		t.LagP99 = HistogramQuantile(0.99, bounds, counts, d.Histogram.GetSampleCount())
	}
	return t
}

func counterValue(c prometheus.Counter) float64 {
	var d dto.Metric
	if c.Write(&d) != nil || d.Counter == nil {
		return 0
	}
	return d.Counter.GetValue()
}

// HistogramQuantile estimates quantile q (0..1) of a histogram with
// ascending upper bounds and the cumulative count of each bucket, and
// total observations in all (the implicit +Inf bucket included), the way
// Prometheus's histogram_quantile does: linear within the bucket that
// holds the rank, from the previous bound (0 for the first). A rank past
// the last finite bound answers that bound. It returns 0 for no
// observations, and NaN for q outside 0..1 or mismatched slices.
func HistogramQuantile(q float64, bounds []float64, cumulative []uint64, total uint64) float64 {
	if q < 0 || q > 1 || len(bounds) != len(cumulative) {
		return math.NaN()
	}
	if total == 0 {
		return 0
	}
	rank := q * float64(total)
	lower, below := 0.0, uint64(0)
	for i, ub := range bounds {
		if float64(cumulative[i]) >= rank {
			in := cumulative[i] - below
			if in == 0 {
				return ub
			}
			return lower + (ub-lower)*(rank-float64(below))/float64(in)
		}
		lower, below = ub, cumulative[i]
	}
	if len(bounds) == 0 {
		return 0
	}
	return bounds[len(bounds)-1]
}
