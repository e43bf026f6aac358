// Package items is the benchmark of sharded runs: one run of many items
// over a fleet of worker processes, timed against the ideal (items ×
// item time / slots), once with every worker up and once with one worker
// killed (SIGKILL) when half the items are done.
//
// The fleet is real: an embedded etcd in this process, one `jobfleet
// orchestrator` process and Workers `jobfleet worker` processes of this
// binary, on loopback; the items' executor is an http endpoint in this
// process that answers each request after ItemTime, recording it.
//
// Guarantees: each scenario's figures come from one run of it, on the
// machine it ran on; the ideal counts no cost of scheduling, so the ratio
// says what scheduling, hand-outs, reports and (after a kill) the lost
// worker's detection add. Not guaranteed: that another machine, or this
// one under another load, gives the same ratios.
package items

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
	// Dir holds etcd's data and the processes' logs.
	Dir string
	// Items is the run's item count (shards.count).
	Items int
	// Workers is the number of worker processes, Concurrency the slots
	// of each (--concurrency).
	Workers     int
	Concurrency int
	// ItemTime is how long the endpoint takes to answer each item.
	ItemTime time.Duration
	// WorkerTTL is the orchestrator's --worker-ttl: how long a killed
	// worker's registration outlives it (0: the default, 6s).
	WorkerTTL time.Duration
	// Partitions is P.
	Partitions int
	// Fsync makes etcd sync its WAL (it does in production).
	Fsync bool
	// Timeout bounds each scenario.
	Timeout time.Duration
	// Pools, if positive, measures the grant rate instead of the
	// sharded run: worker process i gets the label pool=p<i mod Pools>,
	// and Pools sharded jobs of Items items in all run once each placed
	// on its pool and once not placed (GrantScenario).
	Pools int
	// Progress shows progress; nil shows none.
	Progress *bench.Progress
}

// DefaultConfig returns the benchmark's defaults: 1 000 items of 200 ms
// over 8 workers of 4 slots.
func DefaultConfig() Config {
	return Config{Items: 1000, Workers: 8, Concurrency: 4, ItemTime: 200 * time.Millisecond, Partitions: 16, Fsync: true, Timeout: 5 * time.Minute}
}

// Validate checks cfg.
func (c Config) Validate() error {
	switch {
	case c.Binary == "" || c.Dir == "":
		return errors.New("items: Binary and Dir are required")
	case c.Items < 2 || c.Items > 10000:
		return fmt.Errorf("items: Items %d outside 2 to 10000", c.Items)
	case c.Workers < 2 || c.Workers > 128:
		return fmt.Errorf("items: Workers %d outside 2 to 128 (one is killed)", c.Workers)
	case c.Pools < 0 || c.Pools > c.Workers || c.Pools > c.Items:
		return fmt.Errorf("items: Pools %d outside 0 to the workers (%d) and the items (%d)", c.Pools, c.Workers, c.Items)
	case c.Concurrency < 1 || c.Concurrency > 256:
		return fmt.Errorf("items: Concurrency %d outside 1 to 256", c.Concurrency)
	case c.ItemTime <= 0:
		return errors.New("items: ItemTime must be positive")
	case c.Partitions < 1 || c.Timeout <= 0:
		return errors.New("items: Partitions and Timeout must be positive")
	}
	return nil
}

// Scenario is one timed run of Items items.
type Scenario struct {
	Name string `json:"name"`
	// Ideal is Items × ItemTime / slots: the run's length if every slot
	// ran items back to back from the fire, with no cost of scheduling;
	// after a kill, the first half at every worker's slots and the rest,
	// with the killed worker's items in flight, at the others'.
	Ideal time.Duration `json:"ideal_ns"`
	// Took is from the job's creation (its run fires at once) until the
	// run is read final, at most 50 ms late.
	Took time.Duration `json:"took_ns"`
	// Ratio is Took / Ideal.
	Ratio float64 `json:"ratio"`
	// FirstStart is from the creation to the first execution's start.
	FirstStart time.Duration `json:"first_start_ns"`
	// Status is the run's final status; Succeeded its items succeeded.
	Status    string `json:"status"`
	Succeeded int    `json:"succeeded"`
	// Executions counts the endpoint's requests, Repeated the items it
	// answered more than once (at least once delivery), Retried the items
	// with more than one attempt.
	Executions int `json:"executions"`
	Repeated   int `json:"repeated"`
	Retried    int `json:"retried"`
	// KilledAt is when the worker was killed, from the creation; Lost the
	// attempts it held then (executions open at the endpoint), Redone how
	// long after the kill the last of them started again elsewhere.
	KilledAt time.Duration `json:"killed_at_ns,omitempty"`
	Lost     int           `json:"lost,omitempty"`
	Redone   time.Duration `json:"redone_ns,omitempty"`
	// MaxRunBytes is the largest stored run document seen (etcd's value).
	MaxRunBytes int `json:"max_run_bytes"`
}

// Result is a run's figures.
type Result struct {
	Config    Config     `json:"config"`
	Scenarios []Scenario `json:"scenarios,omitempty"`
	// Grants are the grant-rate scenarios (Config.Pools > 0).
	Grants []GrantScenario `json:"grants,omitempty"`
}

// Run starts the fleet, measures the steady and the killed scenarios (or,
// with Pools, the grant-rate scenarios), and stops the fleet.
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
	if cfg.Pools > 0 {
		res.Grants, err = f.runGrants(ctx)
		return res, err
	}
	for _, kill := range []bool{false, true} {
		s, err := f.measure(ctx, kill)
		if err != nil {
			return nil, err
		}
		res.Scenarios = append(res.Scenarios, s)
	}
	return res, nil
}

// ideal returns the ideal length of a run of n items at slots slots.
func ideal(n, slots int, item time.Duration) time.Duration {
	return time.Duration(int64(n) * int64(item) / int64(slots))
}
