package items

import (
	"context"
	"fmt"
	"syscall"
	"time"

	"github.com/jobfleet/jobfleet/api"
	"github.com/jobfleet/jobfleet/bench/procfleet"
	"github.com/jobfleet/jobfleet/shard"
	"github.com/jobfleet/jobfleet/store"
)

// fleet is the benchmark's etcd, orchestrator, workers and endpoint.
type fleet struct {
	*procfleet.Fleet
	cfg Config
}

func startFleet(ctx context.Context, cfg Config) (*fleet, error) {
	pc := procfleet.Config{Name: "items", Binary: cfg.Binary, Dir: cfg.Dir, Fsync: cfg.Fsync, Orchestrators: 1, Partitions: cfg.Partitions,
		Hold: cfg.ItemTime, Path: "/item"}
	if cfg.WorkerTTL > 0 {
		pc.OrchestratorFlags = []string{"--worker-ttl=" + cfg.WorkerTTL.String()}
	}
	var labels func(int) string
	if cfg.Pools > 0 {
		labels = func(i int) string { return "pool=" + poolOf(i, cfg.Pools) }
	}
	pc.Workers = procfleet.Workers(cfg.Workers, cfg.Concurrency, labels)
	pf, err := procfleet.Start(ctx, pc)
	if err != nil {
		return nil, err
	}
	return &fleet{Fleet: pf, cfg: cfg}, nil
}

// measure runs one scenario: a sharded job created, its run timed until
// final; with kill, one worker killed once half the items succeeded.
func (f *fleet) measure(ctx context.Context, kill bool) (Scenario, error) {
	cfg := f.cfg
	s := Scenario{Name: "all workers"}
	if kill {
		s.Name = "one worker killed halfway"
	}
	if err := f.WaitWorkers(ctx, time.Minute); err != nil {
		return s, err
	}
	id := "items-" + map[bool]string{false: "steady", true: "kill"}[kill]
	j := api.Job{ID: id, Executor: api.Executor{Type: api.ExecutorHTTP, URL: f.URL}, Shards: &api.Shards{Count: cfg.Items},
		Retry: api.RetryPolicy{MaxAttempts: 3, InitialBackoff: api.Duration(100 * time.Millisecond)}, Timeout: api.Duration(time.Minute)}
	cfg.Progress.Step("%s: %d items of %v over %d workers × %d slots", s.Name, cfg.Items, cfg.ItemTime, cfg.Workers, cfg.Concurrency)
	start := time.Now()
	if _, err := f.API.CreateJob(ctx, j); err != nil {
		return s, err
	}
	var killedAt time.Time
	if kill {
		select {
		case <-f.Receiver.Answered(id, cfg.Items/2):
		case <-time.After(cfg.Timeout):
			return s, fmt.Errorf("items: half the items not done within %v", cfg.Timeout)
		}
		killedAt = f.Workers[0].Signal(syscall.SIGKILL, 10*time.Second)
		s.KilledAt = killedAt.Sub(start)
	}
	var run api.Run
	done := func() bool {
		runs, err := f.API.ListRuns(ctx, id, 1)
		if err != nil || len(runs) == 0 {
			return false
		}
		run = runs[0]
		c := run.Count()
		cfg.Progress.Update("%s: %d/%d items succeeded, %d running", s.Name, c.Succeeded, len(run.Items), c.Running)
		return run.Status.Final()
	}
	if err := f.WaitFor(ctx, "final run", cfg.Timeout, done); err != nil {
		return s, err
	}
	s.Took = time.Since(start)
	slots := cfg.Workers * cfg.Concurrency
	s.Ideal = ideal(cfg.Items, slots, cfg.ItemTime)
	st := statsOf(f.Receiver.Executions(id))
	if kill {
		first := cfg.Items / 2
		s.Lost, s.Redone = lostItems(run, f.Workers[0].Name, killedAt)
		s.Ideal = ideal(first, slots, cfg.ItemTime) + ideal(cfg.Items-first+s.Lost, slots-cfg.Concurrency, cfg.ItemTime)
	}
	s.Ratio = float64(s.Took) / float64(s.Ideal)
	s.FirstStart = st.first.Sub(start)
	s.Status, s.Succeeded = string(run.Status), run.Count().Succeeded
	s.Executions, s.Repeated = st.executions, st.repeated
	for _, it := range run.Items {
		if len(it.Attempts) > 1 {
			s.Retried++
		}
	}
	if kv, err := f.Client.Get(ctx, store.Keys{NS: f.Namespace}.Run(shard.Partition(id, cfg.Partitions), id, run.ScheduledAt)); err == nil && len(kv.Kvs) == 1 {
		s.MaxRunBytes = len(kv.Kvs[0].Value)
	}
	cfg.Progress.Step("%s: %v (ideal %v, ×%.2f), %s", s.Name, s.Took.Round(time.Millisecond), s.Ideal.Round(time.Millisecond), s.Ratio, s.Status)
	return s, nil
}

// execStats sums a job's executions at the endpoint.
type execStats struct {
	first      time.Time
	executions int
	repeated   int // items answered more than once
}

func statsOf(execs []procfleet.Execution) execStats {
	var st execStats
	answered := map[int]int{}
	for _, e := range execs {
		if st.first.IsZero() || e.Start.Before(st.first) {
			st.first = e.Start
		}
		if !e.Aborted {
			answered[e.Item]++
		}
	}
	st.executions = len(execs)
	for _, n := range answered {
		if n > 1 {
			st.repeated++
		}
	}
	return st
}

// lostItems counts the items of run r whose attempt by worker (killed at
// killed) did not succeed, and returns how long after the kill the last of
// them started again.
func lostItems(r api.Run, worker string, killed time.Time) (lost int, redone time.Duration) {
	for _, it := range r.Items {
		for k, a := range it.Attempts {
			if a.Worker != worker || a.Error == "" {
				continue
			}
			lost++
			if k+1 < len(it.Attempts) {
				redone = max(redone, it.Attempts[k+1].StartedAt.Sub(killed))
			}
			break
		}
	}
	return lost, redone
}
