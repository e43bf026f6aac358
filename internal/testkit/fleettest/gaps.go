package fleettest

import (
	"context"
	"time"

	"github.com/jobfleet/jobfleet/internal/gapwatch"
	"github.com/jobfleet/jobfleet/shard"
)

// GapRecorder measures ownership gaps as an observer sees them: for each
// partition, the time from its owner key's deletion to its next creation.
type GapRecorder struct{ r *gapwatch.Recorder }

// RecordGaps starts watching the fleet's owner keys from now on. Stop it
// with Stop.
func (f *Fleet) RecordGaps() *GapRecorder {
	f.t.Helper()
	r, err := gapwatch.Start(context.Background(), f.Client, shard.OwnersPrefix(f.NS))
	if err != nil {
		f.t.Fatalf("fleettest: %v", err)
	}
	return &GapRecorder{r: r}
}

// Stop ends the recording and returns the gaps seen, sorted, and how many
// partitions are still without an owner.
func (g *GapRecorder) Stop() (gaps []time.Duration, open int) {
	res := g.r.Stop()
	return res.Gaps, res.Open
}

// Quantile returns the q-quantile (0..1) of sorted durations, 0 if empty.
func Quantile(sorted []time.Duration, q float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := int(q * float64(len(sorted)-1))
	return sorted[i]
}
