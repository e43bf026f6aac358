package scale

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jobfleet/jobfleet/api"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/jobfleet/jobfleet/store"
)

// noopExecutor is the executor type of the bench's jobs: a handler no
// worker serves, so runs stay pending once fired (a fire is measured
// until its run is durable).
const noopExecutor = "scale-noop"

// jobPrefix is the ID prefix of the bench's jobs; probePrefix that of the
// probes.
const (
	jobPrefix   = "scale-"
	probePrefix = "probe-"
)

func jobID(i int) string { return fmt.Sprintf("%s%07d", jobPrefix, i) }

// jobDoc is the document the bench sends for a job.
type jobDoc struct {
	ID       string       `json:"id"`
	Schedule string       `json:"schedule,omitempty"`
	RunAt    *time.Time   `json:"run_at,omitempty"`
	Jitter   string       `json:"jitter,omitempty"`
	Executor api.Executor `json:"executor"`
}

func oneOff(i int, at time.Time) jobDoc {
	return jobDoc{ID: jobID(i), RunAt: &at, Executor: api.Executor{Type: noopExecutor}}
}

// Write methods: how the jobs were written.
const (
	MethodBatch  = "batch"  // POST /v1/jobs:batch
	MethodSingle = "single" // one POST /v1/jobs (or PUT /v1/jobs/{id}) each
)

// batchRequest and batchReply are the batch endpoint's documents.
type batchRequest struct {
	Jobs []jobDoc `json:"jobs"`
	Mode string   `json:"mode"`
}

type batchReply struct {
	Results []struct {
		ID     string `json:"id"`
		Status int    `json:"status"`
		Error  string `json:"error"`
	} `json:"results"`
}

// writeStats is one pass of writes.
type writeStats struct {
	method  string
	took    time.Duration
	retries int64
}

// writeJobs writes n jobs, doc(i) for i in 0..n-1, creating them (mode
// "create") or creating or replacing them ("apply"), through the batch
// endpoint when the members have it and one request per job otherwise.
func (f *fleet) writeJobs(ctx context.Context, n int, mode, what string, doc func(i int) jobDoc) (writeStats, error) {
	start := time.Now()
	st := writeStats{method: MethodBatch}
	var done atomic.Int64
	// The first batch finds out whether the endpoint exists.
	first := min(n, f.cfg.BatchSize)
	err := f.batch(ctx, 0, first, mode, doc, &st.retries)
	var es *errStatus
	if errors.As(err, &es) && (es.code == http.StatusNotFound || es.code == http.StatusMethodNotAllowed) {
		st.method = MethodSingle
		err = f.single(ctx, 0, n, mode, doc, &done, what, n, &st.retries)
		st.took = time.Since(start)
		return st, err
	}
	if err != nil {
		return st, err
	}
	done.Add(int64(first))
	var (
		next  atomic.Int64
		wg    sync.WaitGroup
		errMu sync.Mutex
		errs  error
	)
	next.Store(int64(first))
	inFlight := max(1, f.cfg.CreateConcurrency/8)
	for range inFlight {
		wg.Go(func() {
			for ctx.Err() == nil {
				from := int(next.Add(int64(f.cfg.BatchSize))) - f.cfg.BatchSize
				if from >= n {
					return
				}
				to := min(n, from+f.cfg.BatchSize)
				if err := f.batch(ctx, from, to, mode, doc, &st.retries); err != nil {
					errMu.Lock()
					errs = errors.Join(errs, err)
					errMu.Unlock()
					return
				}
				f.cfg.Progress.Update("  %s: %d of %d jobs (batches of %d)", what, done.Add(int64(to-from)), n, f.cfg.BatchSize)
			}
		})
	}
	wg.Wait()
	st.took = time.Since(start)
	return st, errs
}

// batch writes jobs from..to-1 in one batch request.
func (f *fleet) batch(ctx context.Context, from, to int, mode string, doc func(int) jobDoc, retries *int64) error {
	req := batchRequest{Mode: mode}
	for i := from; i < to; i++ {
		req.Jobs = append(req.Jobs, doc(i))
	}
	var rep batchReply
	r, err := f.call(ctx, http.MethodPost, "/v1/jobs:batch", req, &rep)
	atomic.AddInt64(retries, int64(r))
	if err != nil {
		return err
	}
	if len(rep.Results) != to-from {
		return fmt.Errorf("batch of %d jobs: %d results", to-from, len(rep.Results))
	}
	for _, x := range rep.Results {
		if x.Status/100 != 2 && !(x.Status == http.StatusConflict && r > 0 && mode == "create") {
			return fmt.Errorf("batch: job %q: status %d: %s", x.ID, x.Status, x.Error)
		}
	}
	return nil
}

// single writes jobs from..to-1 with CreateConcurrency requests in flight.
func (f *fleet) single(ctx context.Context, from, to int, mode string, doc func(int) jobDoc, done *atomic.Int64, what string, n int, retries *int64) error {
	var (
		next  atomic.Int64
		wg    sync.WaitGroup
		errMu sync.Mutex
		errs  error
	)
	next.Store(int64(from))
	for range f.cfg.CreateConcurrency {
		wg.Go(func() {
			for ctx.Err() == nil {
				i := int(next.Add(1)) - 1
				if i >= to {
					return
				}
				d := doc(i)
				var (
					r   int
					err error
				)
				if mode == "create" {
					r, err = f.call(ctx, http.MethodPost, "/v1/jobs", d, nil)
					var es *errStatus
					if r > 0 && errors.As(err, &es) && es.code == http.StatusConflict {
						err = nil // an earlier try was written
					}
				} else {
					r, err = f.call(ctx, http.MethodPut, "/v1/jobs/"+url.PathEscape(d.ID), d, nil)
				}
				atomic.AddInt64(retries, int64(r))
				if err != nil {
					errMu.Lock()
					errs = errors.Join(errs, fmt.Errorf("job %q: %w", d.ID, err))
					errMu.Unlock()
					return
				}
				f.cfg.Progress.Update("  %s: %d of %d jobs (one request each)", what, done.Add(1), n)
			}
		})
	}
	wg.Wait()
	return errs
}

// keys returns the fleet's etcd key layout.
func (f *fleet) keys() store.Keys { return store.Keys{NS: f.ns} }

// waitStates waits until at least n jobs have a scheduling state (their
// owners took them in). It counts the states, then follows the states
// created and deleted after that count with a watch, and counts again
// when the watch says n (or fails). A count walks etcd's index of every
// state under a read lock that holds back the writes; at a million jobs,
// counting over and over would slow the fleet being measured.
func (f *fleet) waitStates(ctx context.Context, n int, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	prefix := f.keys().AllStatePrefix()
	for {
		start := time.Now()
		resp, err := f.client.Get(ctx, prefix, clientv3.WithPrefix(), clientv3.WithCountOnly())
		if err == nil && resp.Count >= int64(n) {
			return nil
		}
		if err == nil {
			f.cfg.Progress.Update("  %d of %d jobs taken in by their owners", resp.Count, n)
			f.followStates(ctx, prefix, resp.Header.Revision, resp.Count, int64(n))
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("jobs not taken in after %v: %w", timeout, ctx.Err())
		case <-time.After(countPause(50*time.Millisecond, time.Since(start))):
		}
	}
}

// followStates watches the states under prefix after revision rev, of
// which there were have, until have + created − deleted reaches n, the
// watch fails or ctx ends.
func (f *fleet) followStates(ctx context.Context, prefix string, rev, have, n int64) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	ch := f.client.Watch(clientv3.WithRequireLeader(ctx), prefix, clientv3.WithPrefix(), clientv3.WithRev(rev+1))
	for have < n {
		wr, ok := <-ch
		if !ok || wr.Err() != nil {
			return
		}
		for _, ev := range wr.Events {
			switch {
			case ev.Type == clientv3.EventTypePut && ev.IsCreate():
				have++
			case ev.Type == clientv3.EventTypeDelete:
				have--
			}
		}
		f.cfg.Progress.Update("  %d of %d jobs taken in by their owners", have, n)
	}
}

// countPause is the pause after a count of keys that took took before the
// next one: at least least, and at least four times took. A count walks
// etcd's index of every key under its prefix, so at a million keys it
// costs the store a noticeable fraction of a second; counted every
// least, it would take the CPU the measured fleet needs.
func countPause(least, took time.Duration) time.Duration {
	return max(least, 4*took)
}

// inUse returns etcd's database size in use.
func (f *fleet) inUse(ctx context.Context) (int64, error) {
	st, err := f.client.Status(ctx, f.etcd.Endpoints()[0])
	if err != nil {
		return 0, fmt.Errorf("etcd status: %w", err)
	}
	return st.DbSizeInUse, nil
}

// meanBytes is the mean logical size (key + value) of up to 2000 keys
// under prefix whose key contains marker.
func (f *fleet) meanBytes(ctx context.Context, prefix, marker string) (float64, error) {
	resp, err := f.client.Get(ctx, prefix, clientv3.WithPrefix(), clientv3.WithLimit(2000))
	if err != nil {
		return 0, fmt.Errorf("read %s: %w", prefix, err)
	}
	var sum, count int64
	for _, kv := range resp.Kvs {
		if strings.Contains(string(kv.Key), marker) {
			sum += int64(len(kv.Key) + len(kv.Value))
			count++
		}
	}
	if count == 0 {
		return 0, nil
	}
	return float64(sum) / float64(count), nil
}

// states reads the scheduling states of jobs ids (partition of each in
// parts); a job without one is missing from the map.
func (f *fleet) states(ctx context.Context, ids []string, parts []int) (map[string]api.JobState, error) {
	out := map[string]api.JobState{}
	for from := 0; from < len(ids); from += 100 {
		var ops []clientv3.Op
		to := min(len(ids), from+100)
		for i := from; i < to; i++ {
			ops = append(ops, clientv3.OpGet(f.keys().State(parts[i], ids[i])))
		}
		resp, err := f.client.Txn(ctx).Then(ops...).Commit()
		if err != nil {
			return nil, fmt.Errorf("read states: %w", err)
		}
		for i, r := range resp.Responses {
			if kvs := r.GetResponseRange().Kvs; len(kvs) == 1 {
				var st api.JobState
				if err := json.Unmarshal(kvs[0].Value, &st); err != nil {
					return nil, fmt.Errorf("state of %q: %w", ids[from+i], err)
				}
				out[ids[from+i]] = st
			}
		}
	}
	return out, nil
}
