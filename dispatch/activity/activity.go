// Package activity keeps a member's activity of the last hour, per
// minute of its clock: fires, attempts' outcomes, schedule lag and the
// attempts running and runs waiting, for the charts of the console. It
// is bounded (api.ActivityMinutes minutes of fixed size) and in memory
// only: a member that restarts starts an empty history. The dispatcher
// feeds a Recorder through its metrics; the orchestrator publishes its
// minutes to the fleet (see Publish) so any member can answer for all.
package activity

import (
	"slices"
	"sync"
	"time"

	"github.com/jonboulle/clockwork"

	"github.com/jobfleet/jobfleet/api"
)

// buckets is the number of lag buckets: one per bound, and one above.
var bounds = api.ActivityLagBounds()

// minute is one minute's counts; start zero if unused.
type minute struct {
	start                                              time.Time
	fires, skipped, succeeded, failed, dead, cancelled int64
	lag                                                [17]int64 // len(bounds)+1
	running, waiting                                   int
}

// Recorder counts a member's activity per minute. Its methods are safe
// for concurrent use and cost a lock and a few additions; a nil
// *Recorder records nothing.
type Recorder struct {
	clock clockwork.Clock

	mu      sync.Mutex
	minutes [api.ActivityMinutes]minute // ring, by minute number
}

// New returns a recorder that reads the time from clock.
func New(clock clockwork.Clock) *Recorder {
	return &Recorder{clock: clock}
}

// current returns the minute of now, cleared if it held an older
// minute. The caller holds mu.
func (r *Recorder) current() *minute {
	start := r.clock.Now().UTC().Truncate(time.Minute)
	m := &r.minutes[start.Unix()/60%api.ActivityMinutes]
	if !m.start.Equal(start) {
		*m = minute{start: start}
	}
	return m
}

// Fired counts n runs a fire recorded with status (api.RunPending or
// api.RunSkipped; others are ignored).
func (r *Recorder) Fired(status api.RunStatus, n int) {
	if r == nil || n <= 0 {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	m := r.current()
	switch status {
	case api.RunPending:
		m.fires += int64(n)
	case api.RunSkipped:
		m.skipped += int64(n)
	}
}

// Lag counts one fire's schedule lag, in seconds.
func (r *Recorder) Lag(seconds float64) {
	if r == nil {
		return
	}
	i, _ := slices.BinarySearch(bounds, seconds) // first bound ≥ seconds
	r.mu.Lock()
	defer r.mu.Unlock()
	r.current().lag[i]++
}

// Finished counts an attempt that ended with its run in status
// (succeeded, failed, dead), or a run cancelled; others are ignored.
func (r *Recorder) Finished(status api.RunStatus) {
	if r == nil {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	m := r.current()
	switch status {
	case api.RunSucceeded:
		m.succeeded++
	case api.RunFailed:
		m.failed++
	case api.RunDead:
		m.dead++
	case api.RunCancelled:
		m.cancelled++
	}
}

// Sample records the attempts running and runs waiting now; a minute
// shows its last sample.
func (r *Recorder) Sample(running, waiting int) {
	if r == nil {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	m := r.current()
	m.running, m.waiting = running, waiting
}

// Minutes returns the minutes of the last hour, oldest first, ending with
// the current one: every minute of the span, those without activity
// with zero counts (and no samples: Running and Waiting 0). A minute
// before the recorder's first use is left out.
func (r *Recorder) Minutes() []api.ActivityMinute {
	if r == nil {
		return []api.ActivityMinute{}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	now := r.current().start
	var first time.Time
	for _, m := range r.minutes {
		if !m.start.IsZero() && (first.IsZero() || m.start.Before(first)) {
			first = m.start
		}
	}
	out := make([]api.ActivityMinute, 0, api.ActivityMinutes)
	for k := api.ActivityMinutes - 1; k >= 0; k-- {
		start := now.Add(-time.Duration(k) * time.Minute)
		if start.Before(first) {
			continue
		}
		m := r.minutes[start.Unix()/60%api.ActivityMinutes]
		if !m.start.Equal(start) {
			out = append(out, api.ActivityMinute{Start: start})
			continue
		}
		out = append(out, m.doc())
	}
	return out
}

// doc returns m as the API shows it.
func (m minute) doc() api.ActivityMinute {
	d := api.ActivityMinute{Start: m.start, Fires: m.fires, Skipped: m.skipped, Succeeded: m.succeeded,
		Failed: m.failed, Dead: m.dead, Cancelled: m.cancelled, Running: m.running, Waiting: m.waiting}
	var n int64
	for _, c := range m.lag {
		n += c
	}
	if n > 0 {
		d.LagBuckets = slices.Clone(m.lag[:])
		d.LagP50Seconds, d.LagP99Seconds = Quantile(d.LagBuckets, 0.5), Quantile(d.LagBuckets, 0.99)
	}
	return d
}

// Quantile estimates quantile q (0 to 1) of lags counted in buckets (as
// api.ActivityMinute.LagBuckets): the upper bound of the bucket that
// holds it, the largest bound for the last bucket; 0 if buckets count
// nothing. Buckets of several members' minutes, added up, give the
// fleet's quantile.
func Quantile(buckets []int64, q float64) float64 {
	var n int64
	for _, c := range buckets {
		n += c
	}
	if n == 0 {
		return 0
	}
	rank := int64(q*float64(n) + 0.5)
	rank = max(rank, 1)
	var seen int64
	for i, c := range buckets {
		seen += c
		if seen >= rank {
			return bounds[min(i, len(bounds)-1)]
		}
	}
	return bounds[len(bounds)-1]
}
