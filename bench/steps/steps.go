// Package steps is the benchmark of runs made of steps: how long a run
// of steps waits between one step's end and the next step's start, and
// how long a step that needs 100 steps (a fan-in) waits after the last of
// them ended.
//
// The fleet is real: an embedded etcd in this process, one `jobfleet
// orchestrator` process and two `jobfleet worker` processes of this
// binary (labelled pool=a and pool=b), on loopback; every step's executor
// is an http endpoint in this process that answers after StepTime and
// records when each request came and when it answered.
//
// Scenarios: chains of Chain steps, each step needing the one before,
// once with every step placed on the same worker (pool=a) and once with
// the steps placed on the two workers in turn; then FanIn runs of a job
// of 100 steps with no needs and one step that needs all of them; then
// 100 runs of a job triggered at once, each handing over to a job with
// "after" on it (a job's "after" names at most 32 jobs, and fires once
// for each upstream run: a join of 100 is a step with 100 needs).
//
// Guarantees: each figure comes from the runs of this benchmark on the
// machine it ran on; a gap is measured at the endpoint, from the answer
// to one step's request to the arrival of the next step's, so it counts
// the worker's report, the owner's write of the step's end, the next
// step's grant and its delivery to a polling worker. Not guaranteed: that
// another machine, or this one under another load, gives the same gaps.
package steps

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jobfleet/jobfleet/bench"
)

// Config configures a run. Start from DefaultConfig.
type Config struct {
	// Binary is the jobfleet binary the orchestrator and the workers run.
	Binary string
	// Dir holds the processes' logs.
	Dir string
	// Chain is the number of steps of a chain (2 to api.MaxSteps); Runs
	// the chains run in each placement, one after the other.
	Chain int
	Runs  int
	// FanIn is the number of runs of the fan-in job (0: none); Upstream
	// the steps its last step needs (1 to api.MaxSteps-1).
	FanIn    int
	Upstream int
	// HandOvers adds the hand-over scenario: Upstream runs of a job
	// triggered at once, each firing a job that runs after it.
	HandOvers bool
	// StepTime is how long the endpoint takes to answer each step.
	StepTime time.Duration
	// Concurrency is the slots of each worker (--concurrency).
	Concurrency int
	// Partitions is P.
	Partitions int
	// Fsync makes etcd sync its WAL (it does in production).
	Fsync bool
	// Timeout bounds each run.
	Timeout time.Duration
	// Progress shows progress; nil shows none.
	Progress *bench.Progress
}

// DefaultConfig returns the benchmark's defaults: 20 chains of 10 steps
// of 20 ms in each placement, 10 fan-ins of 100 steps, 100 hand-overs,
// workers of 8 slots: well under a minute on 2 cores.
func DefaultConfig() Config {
	return Config{Chain: 10, Runs: 20, FanIn: 10, HandOvers: true, Upstream: 100, StepTime: 20 * time.Millisecond, Concurrency: 8, Partitions: 16, Fsync: true, Timeout: 2 * time.Minute}
}

// Validate checks cfg.
func (c Config) Validate() error {
	switch {
	case c.Binary == "" || c.Dir == "":
		return errors.New("steps: Binary and Dir are required")
	case c.Chain < 2 || c.Chain > 256:
		return fmt.Errorf("steps: Chain %d outside 2 to 256", c.Chain)
	case c.Runs < 1 || c.Runs > 1000:
		return fmt.Errorf("steps: Runs %d outside 1 to 1000", c.Runs)
	case c.FanIn < 0 || c.FanIn > 1000:
		return fmt.Errorf("steps: FanIn %d outside 0 to 1000", c.FanIn)
	case c.Upstream < 1 || c.Upstream > 255:
		return fmt.Errorf("steps: Upstream %d outside 1 to 255", c.Upstream)
	case c.Concurrency < 1 || c.Concurrency > 256:
		return fmt.Errorf("steps: Concurrency %d outside 1 to 256", c.Concurrency)
	case c.StepTime <= 0:
		return errors.New("steps: StepTime must be positive")
	case c.Partitions < 1 || c.Timeout <= 0:
		return errors.New("steps: Partitions and Timeout must be positive")
	}
	return nil
}

// Scenario is the gaps of one scenario.
type Scenario struct {
	Name string `json:"name"`
	// Runs is the runs measured, all succeeded.
	Runs int `json:"runs"`
	// Gaps is the distribution of the waits measured: from a step's end
	// (its answer) to the next step's start (its request's arrival); in
	// a fan-in, from the last upstream step's end to the fan-in step's
	// start, one a run.
	Gaps bench.Summary `json:"gaps"`
	// Spread, in a fan-in, is the distribution of the time from the
	// first upstream step's start to the last one's end.
	Spread bench.Summary `json:"spread,omitzero"`
	// Tail, for hand-overs, is from the last upstream run's end to the
	// last downstream run's start.
	Tail time.Duration `json:"tail_ns,omitempty"`
	// SameWorker counts the gaps whose two steps ran on the same worker
	// process, of Gaps.Count; -1 where it is not counted (hand-overs).
	SameWorker int `json:"same_worker"`
	// Took is the scenario's length, its runs one after the other.
	Took time.Duration `json:"took_ns"`
}

// Result is a run's figures.
type Result struct {
	Config    Config     `json:"config"`
	Scenarios []Scenario `json:"scenarios"`
}

// Run starts the fleet, measures the chains in each placement and the
// fan-in, and stops the fleet.
func Run(ctx context.Context, cfg Config) (*Result, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	f, err := startFleet(ctx, cfg)
	if err != nil {
		return nil, err
	}
	defer f.Stop()
	res := &Result{Config: cfg}
	res.Config.Progress, res.Config.Binary = nil, ""
	if err := f.WaitWorkers(ctx, time.Minute); err != nil {
		return nil, err
	}
	for _, spread := range []bool{false, true} {
		s, err := f.chains(ctx, spread)
		if err != nil {
			return nil, err
		}
		res.Scenarios = append(res.Scenarios, s)
	}
	if cfg.FanIn > 0 {
		s, err := f.fanIn(ctx)
		if err != nil {
			return nil, err
		}
		res.Scenarios = append(res.Scenarios, s)
	}
	if cfg.HandOvers {
		s, err := f.handOvers(ctx)
		if err != nil {
			return nil, err
		}
		res.Scenarios = append(res.Scenarios, s)
	}
	return res, nil
}
