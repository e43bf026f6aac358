package items

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/jobfleet/jobfleet/api"
)

// GrantScenario is one measurement of the grant rate: Jobs sharded jobs
// of Items items in all, created at once and run by every worker, with
// each job placed on one pool of workers or not placed at all. Items take
// the endpoint ItemTime (short), so the fleet's rate of handing out
// attempts and recording their results is what is measured.
type GrantScenario struct {
	Name   string `json:"name"`
	Placed bool   `json:"placed"`
	Jobs   int    `json:"jobs"`
	Items  int    `json:"items"`
	// Took is from the first job's creation until every run is read
	// final, at most 50 ms late.
	Took time.Duration `json:"took_ns"`
	// PerSecond is Items / Took: attempts granted, executed and recorded
	// a second.
	PerSecond float64 `json:"per_second"`
	// Succeeded counts the items that succeeded, Misplaced those whose
	// succeeding attempt ran on a worker outside the job's pool.
	Succeeded int `json:"succeeded"`
	Misplaced int `json:"misplaced"`
	// Workers counts the distinct workers that ran an item.
	Workers int `json:"workers"`
}

// poolOf is the pool label value of worker process i (0-based).
func poolOf(i, pools int) string { return "p" + strconv.Itoa(i%pools) }

// runGrants measures the grant rate with every job placed on its pool,
// then with the same jobs unplaced, on the same workers.
func (f *fleet) runGrants(ctx context.Context) ([]GrantScenario, error) {
	var out []GrantScenario
	for _, placed := range []bool{true, false} {
		s, err := f.measureGrants(ctx, placed)
		if err != nil {
			return nil, err
		}
		out = append(out, s)
	}
	return out, nil
}

func (f *fleet) measureGrants(ctx context.Context, placed bool) (GrantScenario, error) {
	cfg := f.cfg
	s := GrantScenario{Name: fmt.Sprintf("%d jobs, each placed on one of %d pools", cfg.Pools, cfg.Pools), Placed: placed, Jobs: cfg.Pools, Items: cfg.Items}
	tag := "placed"
	if !placed {
		s.Name, tag = fmt.Sprintf("%d jobs, not placed", cfg.Pools), "unplaced"
	}
	if err := f.WaitWorkers(ctx, 2*time.Minute); err != nil {
		return s, err
	}
	cfg.Progress.Step("%s: %d items of %v over %d workers × %d slots", s.Name, cfg.Items, cfg.ItemTime, cfg.Workers, cfg.Concurrency)
	ids := make([]string, cfg.Pools)
	jobs := make([]api.Job, cfg.Pools)
	for k := range cfg.Pools {
		ids[k] = fmt.Sprintf("grants-%s-%02d", tag, k)
		n := cfg.Items / cfg.Pools
		if k < cfg.Items%cfg.Pools {
			n++
		}
		jobs[k] = api.Job{ID: ids[k], Executor: api.Executor{Type: api.ExecutorHTTP, URL: f.URL}, Shards: &api.Shards{Count: n},
			Retry: api.RetryPolicy{MaxAttempts: 3, InitialBackoff: api.Duration(100 * time.Millisecond)}, Timeout: api.Duration(time.Minute)}
		if placed {
			jobs[k].Placement = &api.PlacementPolicy{Selector: "pool=" + poolOf(k, cfg.Pools)}
		}
	}
	start := time.Now()
	for _, j := range jobs {
		if _, err := f.API.CreateJob(ctx, j); err != nil {
			return s, err
		}
	}
	runs := make([]api.Run, len(ids))
	done := func() bool {
		final, succeeded := 0, 0
		for k, id := range ids {
			if runs[k].Status.Final() {
				final++
				succeeded += runs[k].Count().Succeeded
				continue
			}
			l, err := f.API.ListRuns(ctx, id, 1)
			if err != nil || len(l) == 0 {
				continue
			}
			runs[k] = l[0]
			succeeded += runs[k].Count().Succeeded
			if runs[k].Status.Final() {
				final++
			}
		}
		cfg.Progress.Update("%s: %d/%d items succeeded, %d/%d runs final", s.Name, succeeded, cfg.Items, final, len(ids))
		return final == len(ids)
	}
	if err := f.WaitFor(ctx, "final runs", cfg.Timeout, done); err != nil {
		return s, err
	}
	s.Took = time.Since(start)
	s.PerSecond = float64(cfg.Items) / s.Took.Seconds()
	ran := map[string]bool{}
	for k, r := range runs {
		for _, it := range r.Items {
			if it.Status != api.RunSucceeded || len(it.Attempts) == 0 {
				continue
			}
			s.Succeeded++
			w := it.Attempts[len(it.Attempts)-1].Worker
			ran[w] = true
			if placed && poolOfWorker(w, cfg.Pools) != poolOf(k, cfg.Pools) {
				s.Misplaced++
			}
		}
	}
	s.Workers = len(ran)
	cfg.Progress.Step("%s: %v, %.0f items/s, %d misplaced", s.Name, s.Took.Round(time.Millisecond), s.PerSecond, s.Misplaced)
	if s.Misplaced > 0 || s.Succeeded != cfg.Items {
		return s, fmt.Errorf("items: %s: %d of %d items succeeded, %d of them on a worker outside their job's pool", s.Name, s.Succeeded, cfg.Items, s.Misplaced)
	}
	return s, nil
}

// poolOfWorker is the pool of the worker process named "worker-N".
func poolOfWorker(name string, pools int) string {
	n, err := strconv.Atoi(strings.TrimPrefix(name, "worker-"))
	if err != nil {
		return ""
	}
	return poolOf(n-1, pools)
}
