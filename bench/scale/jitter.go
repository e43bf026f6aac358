package scale

import (
	"context"
	"fmt"
	"time"

	"github.com/jobfleet/jobfleet/api"
)

// DefaultJitter is the jitter phase's jitter when Config.Jitter is 0.
const DefaultJitter = time.Minute

// jitter is the jitter phase: every one of the N jobs rewritten to the
// same hourly schedule, "S M * * * *" (second S of minute M of every
// hour, in UTC) whose next time is one second far enough ahead for the
// writes to end before it, with Config.Jitter; then their runs watched
// until all are durable. Without a jitter they would all be due in that
// second, as the herd is; with one, the figures (PeakPerSecond, the lags
// from the scheduled time) show how the owners spread them over
// [S, S+jitter).
func (p *Point) jitter(ctx context.Context, f *fleet) (Workload, error) {
	j := f.cfg.Jitter
	if j == 0 {
		j = DefaultJitter
	}
	w, err := p.fires(ctx, f, p.Jobs, 0, j, "jitter", func(i int, at time.Time) jobDoc {
		at = at.UTC()
		return jobDoc{ID: jobID(i), Schedule: fmt.Sprintf("%d %d * * * *", at.Second(), at.Minute()), Jitter: j.String(), Executor: api.Executor{Type: noopExecutor}}
	})
	w.Period = j
	if err == nil {
		f.cfg.Progress.Step("  jitter: %d hourly jobs with a %v jitter: at most %d fired in one second (%s), fired_at − scheduled p50/p99/max %v/%v/%v",
			w.Runs, j, w.PeakPerSecond, w.PeakAt.Format(time.TimeOnly), w.LagFired.P50.Round(time.Millisecond), w.LagFired.P99.Round(time.Millisecond), w.LagFired.Max.Round(time.Millisecond))
	}
	return w, err
}
