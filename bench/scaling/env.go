package scaling

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jobfleet/jobfleet/api"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/jobfleet/jobfleet/bench"
	"github.com/jobfleet/jobfleet/store"
)

// env is what the trials of one run share: the observer's client (no
// delay: it sets up and watches, it is not measured) and one client per
// orchestrator (with the delay).
type env struct {
	cfg      Config
	observer *clientv3.Client
	clients  []*clientv3.Client

	mu       sync.Mutex // guards the fields below
	specs    int
	specTime time.Duration
	// lastRate is the spec write rate of the latest drain, by whether a
	// sharded fleet was running (its members take every spec in as it is
	// written, which slows the writes down).
	lastRate map[bool]float64
	// margin multiplies the expected write time when picking a due time;
	// it doubles each time the writes overran one.
	margin float64
}

func newEnv(endpoints []string, cfg Config) (*env, error) {
	e := &env{cfg: cfg}
	var err error
	if e.observer, err = bench.NewClient(endpoints, 0); err != nil {
		return nil, err
	}
	n := slicesMax(cfg.Members)
	for range max(n, 8) {
		c, err := bench.NewClient(endpoints, cfg.Delay)
		if err != nil {
			e.close()
			return nil, err
		}
		e.clients = append(e.clients, c)
	}
	return e, nil
}

func (e *env) close() {
	for _, c := range e.clients {
		c.Close()
	}
	if e.observer != nil {
		e.observer.Close()
	}
}

func slicesMax(xs []int) int {
	m := 0
	for _, x := range xs {
		m = max(m, x)
	}
	return m
}

// drainRate is the spec write rate to expect for a drain with or without
// a sharded fleet running: the latest such drain's, else half the
// calibrated rate.
func (e *env) drainRate(sharded bool) float64 {
	e.mu.Lock()
	r, ok := e.lastRate[sharded]
	e.mu.Unlock()
	if ok {
		return r
	}
	return e.specRate() / 2
}

func (e *env) setDrainRate(sharded bool, r float64) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.lastRate == nil {
		e.lastRate = map[bool]float64{}
	}
	e.lastRate[sharded] = r
}

// specRate is the measured rate of all job spec writes so far.
func (e *env) specRate() float64 {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.specs < 100 || e.specTime <= 0 { // not calibrated
		return 500 // a guess before anything was measured
	}
	return float64(e.specs) / e.specTime.Seconds()
}

// calibrate measures the spec write rate on a few hundred jobs, so that
// the first drain's due time is neither too early nor needlessly late.
func (e *env) calibrate(ctx context.Context) error {
	ns := fmt.Sprintf("/jobfleet-bench/calibrate-%d/", time.Now().UnixNano())
	defer e.cleanup(ns)
	jobs := make([]api.Job, 300)
	for i := range jobs {
		jobs[i] = benchJob(fmt.Sprintf("calibrate-%d", i))
		jobs[i].Schedule = "@hourly"
	}
	return e.writeSpecs(ctx, ns, jobs, false, nil)
}

// writeSpecs creates jobs through store.Etcd with 64 writers, and, with
// dueIndex, the baselines' due-index entry of each (first due at due(j)).
func (e *env) writeSpecs(ctx context.Context, ns string, jobs []api.Job, dueIndex bool, due func(api.Job) time.Time) error {
	start := time.Now()
	st := store.NewEtcd(e.observer, ns, e.cfg.Partitions, api.DefaultLimits(), nil)
	var next atomic.Int64
	var wg sync.WaitGroup
	errs := make([]error, 64)
	for w := range errs {
		wg.Go(func() {
			for ctx.Err() == nil {
				i := int(next.Add(1)) - 1
				if i >= len(jobs) {
					return
				}
				j, err := st.Create(ctx, jobs[i])
				if err != nil {
					errs[w] = fmt.Errorf("create job %s: %w", jobs[i].ID, err)
					return
				}
				jobs[i] = j
				if i%200 == 0 {
					e.cfg.Progress.Update("  writing job specs %d/%d", i, len(jobs))
				}
			}
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	took := time.Since(start)
	e.mu.Lock()
	e.specs += len(jobs)
	e.specTime += took
	e.mu.Unlock()
	if !dueIndex {
		return nil
	}
	for i := 0; i < len(jobs); i += 100 {
		var ops []clientv3.Op
		for _, j := range jobs[i:min(i+100, len(jobs))] {
			ops = append(ops, clientv3.OpPut(dueKey(ns, due(j), j.ID), ""))
		}
		if _, err := e.observer.Txn(ctx).Then(ops...).Commit(); err != nil {
			return fmt.Errorf("write due index: %w", err)
		}
	}
	return nil
}

// dueKey is the baselines' due-index key of job id at t: time-ordered, so
// one range read returns the earliest due jobs.
func dueKey(ns string, t time.Time, id string) string {
	return fmt.Sprintf("%sdue/%013d/%s", ns, t.UnixMilli(), api.EscapeID(id))
}

func duePrefix(ns string) string { return ns + "due/" }

// runner is one strategy's n orchestrators.
type runner interface {
	// stop stops every orchestrator and returns duplicates and errors
	// counted.
	stop() (duplicates, errs int)
}

// trial runs strategy s with n orchestrators on workload w.
func (e *env) trial(ctx context.Context, s string, n int, w string) (Trial, error) {
	ns := fmt.Sprintf("/jobfleet-bench/%s-%d-%s-%d/", s, n, w, time.Now().UnixNano())
	t := Trial{Strategy: s, Members: n, Workload: w}
	defer e.cleanup(ns)

	var r runner
	var err error
	baseline := s == GlobalLock || s == NoCoordination
	switch s {
	case Sharded:
		r, err = e.startSharded(ctx, ns, n, e.cfg.CommitsInFlight)
	case ShardedUnbatched:
		r, err = e.startSharded(ctx, ns, n, -1)
	default:
		r, err = e.startBaseline(ctx, ns, n, s == GlobalLock, w == Steady)
	}
	if err != nil {
		return t, err
	}
	stopped := false
	stop := func() {
		if !stopped {
			stopped = true
			t.Duplicates, t.Errors = r.stop()
		}
	}
	defer stop()

	obs, err := observe(ctx, e.observer, ns)
	if err != nil {
		return t, err
	}
	defer obs.close()

	switch w {
	case Drain:
		err = e.drain(ctx, ns, baseline, obs, &t)
	case Steady:
		err = e.steady(ctx, ns, baseline, obs, &t)
	}
	stop()
	return t, err
}

// cleanup deletes a trial's keys and compacts etcd's history, so the next
// trials' etcd is not bigger; it defragments the database when its file
// passes 512 MiB (a run writes gigabytes in all, past etcd's default
// quota of 2 GiB).
func (e *env) cleanup(ns string) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	resp, err := e.observer.Delete(ctx, ns, clientv3.WithPrefix())
	if err != nil {
		return
	}
	if _, err := e.observer.Compact(ctx, resp.Header.Revision, clientv3.WithCompactPhysical()); err != nil {
		return
	}
	for _, ep := range e.observer.Endpoints() {
		st, err := e.observer.Status(ctx, ep)
		if err == nil && st.DbSize > 512<<20 {
			e.cfg.Progress.Step("etcd: defragmenting a %d MiB database", st.DbSize>>20)
			e.observer.Defragment(ctx, ep)
		}
	}
}

// drain writes N one-off jobs due at one instant D, chosen so that the
// writes finish before it, and waits until every run exists.
func (e *env) drain(ctx context.Context, ns string, dueIndex bool, obs *observer, t *Trial) error {
	n := e.cfg.DrainJobs
	t.Expected = n
	sharded := !dueIndex
	e.mu.Lock()
	margin := max(e.margin, 1.5)
	e.mu.Unlock()
	estimate := time.Duration(float64(n) / e.drainRate(sharded) * margin * float64(time.Second))
	due := time.Now().Add(estimate + time.Second).Truncate(time.Millisecond)
	writeStart := time.Now()
	jobs := make([]api.Job, n)
	for i := range jobs {
		at := due
		jobs[i] = benchJob(fmt.Sprintf("drain-%06d", i))
		jobs[i].RunAt = &at
	}
	if err := e.writeSpecs(ctx, ns, jobs, dueIndex, func(api.Job) time.Time { return due }); err != nil {
		return err
	}
	e.setDrainRate(sharded, float64(n)/time.Since(writeStart).Seconds())
	if late := time.Since(due); late > 0 {
		// Runs were fired while specs were still being written: the
		// drain would measure the writes. Wait longer next time.
		e.mu.Lock()
		e.margin = 2 * margin
		e.mu.Unlock()
		return fmt.Errorf("%w by %v", errOverran, late.Round(time.Millisecond))
	}
	deadline := time.Now().Add(e.cfg.Timeout)
	for {
		count, last := obs.count()
		e.cfg.Progress.Update("  drain: %d/%d runs", count, n)
		if count >= n {
			t.Runs = count
			t.Elapsed = last.Sub(due)
			break
		}
		if time.Now().After(deadline) {
			t.Runs = count
			t.Elapsed = time.Since(due)
			t.Note = "timed out"
			break
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(5 * time.Millisecond):
		}
	}
	t.Misses = t.Expected - t.Runs
	if t.Elapsed > 0 {
		t.FiresPerSec = float64(t.Runs) / t.Elapsed.Seconds()
	}
	if early := obs.before(due); early > 0 {
		return fmt.Errorf("%d runs created before their due time", early)
	}
	return nil
}

// steady writes J jobs "@every 1s" and measures the fires scheduled in a
// window that starts once they are all written.
func (e *env) steady(ctx context.Context, ns string, dueIndex bool, obs *observer, t *Trial) error {
	jobs := make([]api.Job, e.cfg.SteadyJobs)
	for i := range jobs {
		jobs[i] = benchJob(fmt.Sprintf("steady-%05d", i))
		jobs[i].Schedule = "@every 1s"
	}
	// The baselines' first due time is, like an "@every 1s" job's, the
	// first whole second after the job was created.
	first := func(api.Job) time.Time { return time.Now().Truncate(time.Second).Add(time.Second) }
	if err := e.writeSpecs(ctx, ns, jobs, dueIndex, first); err != nil {
		return err
	}
	w0 := time.Now().Truncate(time.Second).Add(2 * time.Second)
	w1 := w0.Add(e.cfg.SteadyWindow.Truncate(time.Second))
	secs := int(w1.Sub(w0) / time.Second)
	t.Expected = len(jobs) * secs
	t.Elapsed = w1.Sub(w0)
	inWindow := func(at time.Time) bool { return !at.Before(w0) && at.Before(w1) }
	grace := w1.Add(10 * time.Second)
	for {
		now := time.Now()
		got := obs.countScheduled(inWindow)
		if now.Before(w1) {
			e.cfg.Progress.Update("  steady: %v left, %d/%d runs", w1.Sub(now).Round(time.Second), got, t.Expected)
		} else if got >= t.Expected || now.After(grace) {
			break
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
	docs, err := readRuns(ctx, e.observer, ns)
	if err != nil {
		return err
	}
	var lag, durable []time.Duration
	for _, r := range docs {
		if !inWindow(r.ScheduledAt) {
			continue
		}
		t.Runs++
		lag = append(lag, r.FiredAt.Sub(r.ScheduledAt))
		if seen, ok := obs.seen(r.key); ok {
			durable = append(durable, seen.Sub(r.ScheduledAt))
		}
	}
	t.Lag, t.Durable = bench.Summarize(lag), bench.Summarize(durable)
	t.Misses = t.Expected - t.Runs
	if t.Misses > 0 {
		t.Note = fmt.Sprintf("%d runs of the window not created within 10s of its end", t.Misses)
	}
	t.FiresPerSec = float64(t.Runs) / t.Elapsed.Seconds()
	return nil
}

// benchJob is the job every workload uses: an HTTP hook with a small
// payload, as a typical job would have.
func benchJob(id string) api.Job {
	return api.Job{
		ID:       id,
		Executor: api.Executor{Type: api.ExecutorHTTP, URL: "http://127.0.0.1:9/hook", Method: "POST"},
		Payload:  []byte(`{"report":"daily","shard":7}`),
	}
}

var (
	errNotSettled = errors.New("fleet did not settle")
	errOverran    = errors.New("spec writes overran the due time")
)
