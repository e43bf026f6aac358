package steps

import (
	"context"
	"fmt"
	"time"

	"github.com/jobfleet/jobfleet/api"
	"github.com/jobfleet/jobfleet/bench/procfleet"
)

// fleet is the benchmark's etcd, orchestrator, two workers and endpoint.
type fleet struct {
	*procfleet.Fleet
	cfg Config
}

// pools are the workers' labels: worker-1 pool=a, worker-2 pool=b.
var pools = []string{"a", "b"}

func startFleet(ctx context.Context, cfg Config) (*fleet, error) {
	pf, err := procfleet.Start(ctx, procfleet.Config{Name: "steps", Binary: cfg.Binary, Dir: cfg.Dir, Fsync: cfg.Fsync,
		Orchestrators: 1, Partitions: cfg.Partitions, OrchestratorFlags: []string{"--trigger-rate=-1"},
		Workers: procfleet.Workers(len(pools), cfg.Concurrency, func(i int) string { return "pool=" + pools[i] }),
		Hold:    cfg.StepTime, Path: "/step", PollEvery: 20 * time.Millisecond})
	if err != nil {
		return nil, err
	}
	return &fleet{Fleet: pf, cfg: cfg}, nil
}

// runJob creates job j (it fires once at once), waits for its run to end
// and returns it; a run that did not succeed is an error.
func (f *fleet) runJob(ctx context.Context, j api.Job) (api.Run, error) {
	if _, err := f.API.CreateJob(ctx, benchJob(j)); err != nil {
		return api.Run{}, err
	}
	var run api.Run
	done := func() bool {
		runs, err := f.API.ListRuns(ctx, j.ID, 1)
		if err != nil || len(runs) == 0 {
			return false
		}
		run = runs[0]
		return run.Status.Final()
	}
	if err := f.WaitFor(ctx, "final run of "+j.ID, f.cfg.Timeout, done); err != nil {
		return run, err
	}
	if run.Status != api.RunSucceeded {
		return run, fmt.Errorf("steps: run %s ended %s (%s)", run.ID, run.Status, run.Reason)
	}
	return run, nil
}

// benchJob returns j with the benchmark's retry (none) and timeout.
func benchJob(j api.Job) api.Job {
	j.Retry = api.RetryPolicy{MaxAttempts: 1}
	j.Timeout = api.Duration(time.Minute)
	return j
}

// workerOf returns the worker of step id's (first) attempt in r.
func workerOf(r api.Run, id string) string {
	k := r.StepIndex(id)
	if k < 0 {
		return ""
	}
	if as := r.Items[r.Steps[k].First].Attempts; len(as) > 0 {
		return as[len(as)-1].Worker
	}
	return ""
}
