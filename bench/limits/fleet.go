package limits

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/jobfleet/jobfleet/api"
	"github.com/jobfleet/jobfleet/bench"
	"github.com/jobfleet/jobfleet/bench/procfleet"
	"github.com/jobfleet/jobfleet/client"
)

// fleet is the benchmark's etcd, orchestrators, workers and endpoint.
type fleet struct {
	*procfleet.Fleet
	cfg Config
}

func startFleet(ctx context.Context, cfg Config) (*fleet, error) {
	pf, err := procfleet.Start(ctx, procfleet.Config{Name: "limits", Binary: cfg.Binary, Dir: cfg.Dir, Fsync: cfg.Fsync,
		Orchestrators: cfg.Members, Partitions: cfg.Partitions, Workers: procfleet.Workers(cfg.Workers, cfg.Concurrency, nil),
		Hold: cfg.AttemptTime, Path: "/attempt"})
	if err != nil {
		return nil, err
	}
	return &fleet{Fleet: pf, cfg: cfg}, nil
}

// jobID names job i of a scenario; keyName key k.
func jobID(prefix string, i int) string   { return fmt.Sprintf("%s-%05d", prefix, i) }
func keyName(prefix string, k int) string { return fmt.Sprintf("key-%s-%03d", prefix, k) }

// keyOf returns the key job i of a scenario of keys keys names, "" for
// none.
func keyOf(prefix string, i, keys int) string {
	if keys == 0 {
		return ""
	}
	return keyName(prefix, i%keys)
}

// measure stores the scenario's limits, creates its jobs due at one
// instant, waits until the endpoint answered each and its run is final,
// and sums the endpoint's records.
func (f *fleet) measure(ctx context.Context, sc scenario) (Scenario, error) {
	cfg := f.cfg
	s := Scenario{Name: sc.name, Keys: sc.keys, Jobs: cfg.Jobs, Slots: cfg.Slots()}
	if sc.keys > 0 {
		s.MaxRunning, s.Slots = cfg.MaxRunning, min(sc.keys*cfg.MaxRunning, cfg.Slots())
	}
	s.Ideal = float64(s.Slots) / cfg.AttemptTime.Seconds()
	if err := f.WaitWorkers(ctx, time.Minute); err != nil {
		return s, err
	}
	for k := range sc.keys {
		mr := cfg.MaxRunning
		if _, _, err := f.APIs[k%len(f.APIs)].PutLimit(ctx, api.Limit{Key: keyName(sc.prefix, k), MaxRunning: &mr}); err != nil {
			return s, fmt.Errorf("limits: %s: %w", sc.name, err)
		}
	}
	keys := "no key"
	if sc.keys > 0 {
		keys = fmt.Sprintf("%d keys of max_running %d", sc.keys, cfg.MaxRunning)
	}
	cfg.Progress.Step("%s: %d jobs of %v, %s, %d workers × %d slots, %d members", s.Name, cfg.Jobs, cfg.AttemptTime, keys, cfg.Workers, cfg.Concurrency, cfg.Members)
	s.Lead = 2*time.Second + time.Duration(cfg.Jobs)*3*time.Millisecond
	start := time.Now()
	due := start.Add(s.Lead).Truncate(time.Millisecond) // the header's precision
	late, err := f.createJobs(ctx, sc, due)
	if err != nil {
		return s, err
	}
	s.CreatedIn, s.Late = time.Since(start), late
	var execs []procfleet.Execution
	answered := func() bool {
		execs = f.executions(sc.prefix)
		n := countAnswered(execs)
		cfg.Progress.Update("%s: %d/%d jobs answered", s.Name, n, cfg.Jobs)
		return n == cfg.Jobs
	}
	if err := f.WaitFor(ctx, "answer to every job of "+sc.name, cfg.Timeout, answered); err != nil {
		return s, err
	}
	if s.Succeeded, err = f.succeeded(ctx, sc); err != nil {
		return s, err
	}
	keyOfJob := map[string]string{}
	for i := range cfg.Jobs {
		keyOfJob[jobID(sc.prefix, i)] = keyOf(sc.prefix, i, sc.keys)
	}
	fig := summarize(execs, due, func(job string) string { return keyOfJob[job] })
	s.Makespan, s.Wait, s.MaxConcurrent, s.Executions, s.Repeated = fig.makespan, fig.wait, fig.maxConcurrent, len(execs), fig.repeated
	s.PerSecond = float64(cfg.Jobs) / s.Makespan.Seconds()
	s.Ratio = s.PerSecond / s.Ideal
	s.Utilisation = fig.busy.Seconds() / (float64(s.Slots) * s.Makespan.Seconds())
	cfg.Progress.Step("%s: %.1f attempts/s (ideal %.1f, ×%.2f), utilisation %.2f, wait p50 %v p99 %v, at most %d at once", s.Name,
		s.PerSecond, s.Ideal, s.Ratio, s.Utilisation, s.Wait.P50.Round(time.Millisecond), s.Wait.P99.Round(time.Millisecond), s.MaxConcurrent)
	if sc.keys > 0 && s.MaxConcurrent > cfg.MaxRunning {
		return s, fmt.Errorf("%w: %s: %d executions of one key at once at the endpoint, max_running %d", ErrLimitExceeded, s.Name, s.MaxConcurrent, cfg.MaxRunning)
	}
	if s.Succeeded != cfg.Jobs {
		return s, fmt.Errorf("limits: %s: %d of %d runs succeeded", s.Name, s.Succeeded, cfg.Jobs)
	}
	return s, nil
}

// createJobs creates the scenario's jobs, due at due, in batches sent to
// the members in turn, and returns how many were created after due.
func (f *fleet) createJobs(ctx context.Context, sc scenario, due time.Time) (late int, err error) {
	cfg := f.cfg
	var docs []json.RawMessage
	for i := range cfg.Jobs {
		j := api.Job{ID: jobID(sc.prefix, i), RunAt: &due, Executor: api.Executor{Type: api.ExecutorHTTP, URL: f.URL},
			Retry: api.RetryPolicy{MaxAttempts: 3, InitialBackoff: api.Duration(100 * time.Millisecond)}, Timeout: api.Duration(time.Minute)}
		if k := keyOf(sc.prefix, i, sc.keys); k != "" {
			j.Limits = []string{k}
		}
		b, err := json.Marshal(j)
		if err != nil {
			return 0, err
		}
		docs = append(docs, b)
	}
	var lateJobs, created atomic.Int64
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(len(f.APIs))
	for n, from := 0, 0; from < len(docs); n, from = n+1, from+client.MaxBatchJobs {
		batch := docs[from:min(len(docs), from+client.MaxBatchJobs)]
		c := f.APIs[n%len(f.APIs)]
		g.Go(func() error {
			if _, err := c.WriteBatch(gctx, client.BatchCreate, batch); err != nil {
				return fmt.Errorf("limits: %s: create jobs: %w", sc.name, err)
			}
			if time.Now().After(due) {
				lateJobs.Add(int64(len(batch)))
			}
			cfg.Progress.Update("%s: %d/%d jobs created", sc.name, created.Add(int64(len(batch))), cfg.Jobs)
			return nil
		})
	}
	err = g.Wait()
	return int(lateJobs.Load()), err
}

// executions returns the endpoint's executions of the scenario's jobs.
func (f *fleet) executions(prefix string) []procfleet.Execution {
	var out []procfleet.Execution
	for _, e := range f.Receiver.Executions("") {
		if strings.HasPrefix(e.Job, prefix+"-") {
			out = append(out, e)
		}
	}
	return out
}

// succeeded reads every job's run and counts those that succeeded,
// waiting until each is final (their workers report after the answer).
func (f *fleet) succeeded(ctx context.Context, sc scenario) (int, error) {
	cfg := f.cfg
	var mu sync.Mutex
	ok := 0
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(2 * len(f.APIs))
	for i := range cfg.Jobs {
		c := f.APIs[i%len(f.APIs)]
		id := jobID(sc.prefix, i)
		g.Go(func() error {
			var run api.Run
			final := func() bool {
				runs, err := c.ListRuns(gctx, id, 1)
				if err != nil || len(runs) == 0 {
					return false
				}
				run = runs[0]
				return run.Status.Final()
			}
			if err := f.WaitFor(gctx, "final run of "+id, cfg.Timeout, final); err != nil {
				return err
			}
			if run.Status == api.RunSucceeded {
				mu.Lock()
				ok++
				mu.Unlock()
			}
			return nil
		})
	}
	err := g.Wait()
	return ok, err
}

// countAnswered counts the distinct jobs with an answered execution.
func countAnswered(execs []procfleet.Execution) int {
	jobs := map[string]bool{}
	for _, e := range execs {
		if !e.Aborted {
			jobs[e.Job] = true
		}
	}
	return len(jobs)
}

// figures are what summarize draws from a scenario's executions.
type figures struct {
	// makespan is from due to the last answer; busy the executions'
	// time in all.
	makespan, busy time.Duration
	// wait is the distribution of each job's first arrival after due.
	wait bench.Summary
	// maxConcurrent is the most executions of one key open at once
	// (every execution counted under one key where keyOf gives "").
	maxConcurrent int
	// repeated counts the jobs executed more than once.
	repeated int
}

// summarize sums the executions of jobs due at due; keyOf gives a job's
// key.
func summarize(execs []procfleet.Execution, due time.Time, keyOf func(job string) string) figures {
	var fig figures
	first := map[string]time.Time{}
	count := map[string]int{}
	byKey := map[string][]procfleet.Execution{}
	for _, e := range execs {
		if e.End.Sub(due) > fig.makespan {
			fig.makespan = e.End.Sub(due)
		}
		fig.busy += e.End.Sub(e.Start)
		if t, ok := first[e.Job]; !ok || e.Start.Before(t) {
			first[e.Job] = e.Start
		}
		count[e.Job]++
		k := keyOf(e.Job)
		byKey[k] = append(byKey[k], e)
	}
	waits := make([]time.Duration, 0, len(first))
	for _, t := range first {
		waits = append(waits, t.Sub(due))
	}
	fig.wait = bench.Summarize(waits)
	for _, n := range count {
		if n > 1 {
			fig.repeated++
		}
	}
	for _, es := range byKey {
		fig.maxConcurrent = max(fig.maxConcurrent, maxOverlap(es))
	}
	return fig
}

// maxOverlap returns the most intervals [Start, End) open at one
// instant: an execution that ends as another starts does not overlap it.
func maxOverlap(execs []procfleet.Execution) int {
	type edge struct {
		at    time.Time
		delta int
	}
	edges := make([]edge, 0, 2*len(execs))
	for _, e := range execs {
		edges = append(edges, edge{e.Start, 1}, edge{e.End, -1})
	}
	// Ends before starts at the same instant.
	slices.SortFunc(edges, func(a, b edge) int {
		if c := a.at.Compare(b.at); c != 0 {
			return c
		}
		return a.delta - b.delta
	})
	open, most := 0, 0
	for _, e := range edges {
		open += e.delta
		most = max(most, open)
	}
	return most
}
