package scale

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/jobfleet/jobfleet/bench"
)

// runWatch watches the run documents the fleet creates and records, for
// those of the bench's jobs, when each fired (its fired_at) and when the
// bench saw it in etcd (visibility), against its scheduled time.
type runWatch struct {
	want   int
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu          sync.Mutex // guards the fields below
	count       int
	lagFired    []time.Duration
	lagVisible  []time.Duration
	perSecond   map[int64]int // runs by the whole second of their fired_at (Unix)
	lastFired   time.Time
	lastVisible time.Time
	err         error
	full        chan struct{} // closed when count reaches want
}

// watchRuns starts watching the runs created after the current revision
// until stop; want is the number of runs that closes full.
func (f *fleet) watchRuns(ctx context.Context, want int) (*runWatch, error) {
	resp, err := f.client.Get(ctx, f.keys().AllRunsPrefix(), clientv3.WithPrefix(), clientv3.WithCountOnly())
	if err != nil {
		return nil, fmt.Errorf("read revision: %w", err)
	}
	ctx, cancel := context.WithCancel(ctx)
	w := &runWatch{want: want, cancel: cancel, full: make(chan struct{}),
		lagFired: make([]time.Duration, 0, want), lagVisible: make([]time.Duration, 0, want), perSecond: map[int64]int{}}
	ch := f.client.Watch(clientv3.WithRequireLeader(ctx), f.keys().AllRunsPrefix(), clientv3.WithPrefix(), clientv3.WithRev(resp.Header.Revision+1))
	w.wg.Go(func() {
		for wr := range ch {
			if err := wr.Err(); err != nil {
				w.mu.Lock()
				w.err = err
				w.mu.Unlock()
				return
			}
			seen := time.Now()
			for _, ev := range wr.Events {
				if ev.Type != clientv3.EventTypePut || !ev.IsCreate() {
					continue
				}
				var r struct {
					JobID       string    `json:"job_id"`
					ScheduledAt time.Time `json:"scheduled_at"`
					FiredAt     time.Time `json:"fired_at"`
				}
				if json.Unmarshal(ev.Kv.Value, &r) != nil || !strings.HasPrefix(r.JobID, jobPrefix) {
					continue
				}
				w.add(r.ScheduledAt, r.FiredAt, seen)
			}
		}
	})
	return w, nil
}

func (w *runWatch) add(scheduled, fired, seen time.Time) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.count++
	w.lagFired = append(w.lagFired, fired.Sub(scheduled))
	w.lagVisible = append(w.lagVisible, seen.Sub(scheduled))
	w.perSecond[fired.Unix()]++
	if fired.After(w.lastFired) {
		w.lastFired = fired
	}
	w.lastVisible = seen
	if w.count == w.want {
		close(w.full)
	}
}

// wait waits until want runs were seen, the watch failed, or timeout; it
// reports progress meanwhile. Every 250 ms it also counts the runs in etcd
// (count, a range with no values) and returns when the count first reached
// target, which does not depend on how fast the watch delivers (zero if
// the watch saw every run first). A count that takes long (a million
// runs) is made less often: see countPause.
func (w *runWatch) wait(ctx context.Context, timeout time.Duration, p *bench.Progress, what string, count func() (int64, error), target int64) (counted time.Time, err error) {
	t := time.NewTimer(timeout)
	defer t.Stop()
	tick := time.NewTicker(250 * time.Millisecond)
	defer tick.Stop()
	var nextCount time.Time // counts are paced by their cost (countPause)
	tryCount := func() {
		if !counted.IsZero() || time.Now().Before(nextCount) {
			return
		}
		start := time.Now()
		c, err := count()
		if err == nil && c >= target {
			counted = time.Now()
		}
		// The ticker's 250 ms is the least pause.
		nextCount = time.Now().Add(countPause(0, time.Since(start)))
	}
	for {
		select {
		case <-w.full:
			if counted.IsZero() {
				if n, err := count(); err == nil && n >= target {
					counted = time.Now()
				}
			}
			return counted, nil
		case <-ctx.Done():
			return counted, ctx.Err()
		case <-t.C:
			w.mu.Lock()
			defer w.mu.Unlock()
			return counted, fmt.Errorf("%s: %d of %d runs after %v", what, w.count, w.want, timeout)
		case <-tick.C:
			w.mu.Lock()
			n, err := w.count, w.err
			w.mu.Unlock()
			if err != nil {
				return counted, fmt.Errorf("%s: watch: %w", what, err)
			}
			tryCount()
			p.Update("  %s: %d of %d runs durable", what, n, w.want)
		}
	}
}

// stop ends the watch and waits for it.
func (w *runWatch) stop() {
	w.cancel()
	w.wg.Wait()
}

// fireStats summarizes a watched workload: the lags from the scheduled
// time to fired_at and to visibility.
func (w *runWatch) fireStats() FireStats {
	w.mu.Lock()
	defer w.mu.Unlock()
	st := FireStats{
		Runs:       w.count,
		LagFired:   bench.Summarize(w.lagFired),
		LagVisible: bench.Summarize(w.lagVisible),
	}
	for sec, n := range w.perSecond {
		if n > st.PeakPerSecond || n == st.PeakPerSecond && sec < st.peakSecond {
			st.PeakPerSecond, st.peakSecond = n, sec
		}
	}
	if len(w.perSecond) > 0 {
		st.PeakAt = time.Unix(st.peakSecond, 0).UTC()
	}
	return st
}
