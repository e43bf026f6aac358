package bench

import (
	"math"
	"slices"
	"time"
)

// Quantile returns the q-quantile (0..1) of sorted values by the
// nearest-rank method, 0 if there are none.
func Quantile[T ~int64 | ~float64](sorted []T, q float64) T {
	if len(sorted) == 0 {
		return 0
	}
	i := int(math.Ceil(q*float64(len(sorted)))) - 1
	return sorted[max(0, min(i, len(sorted)-1))]
}

// Summary is the distribution of a set of durations.
type Summary struct {
	Count int           `json:"count"`
	P50   time.Duration `json:"p50_ns"`
	P99   time.Duration `json:"p99_ns"`
	Max   time.Duration `json:"max_ns"`
	Mean  time.Duration `json:"mean_ns"`
}

// Summarize sorts ds in place and returns their distribution.
func Summarize(ds []time.Duration) Summary {
	if len(ds) == 0 {
		return Summary{}
	}
	slices.Sort(ds)
	var sum time.Duration
	for _, d := range ds {
		sum += d
	}
	return Summary{
		Count: len(ds),
		P50:   Quantile(ds, 0.50),
		P99:   Quantile(ds, 0.99),
		Max:   ds[len(ds)-1],
		Mean:  sum / time.Duration(len(ds)),
	}
}

// Ms formats a duration as milliseconds with one decimal.
func Ms(d time.Duration) float64 {
	return math.Round(float64(d)/float64(time.Millisecond)*10) / 10
}
