// Package limits is the benchmark of shared limit keys: how fast a fleet
// hands out attempts under a key's max_running, how busy it keeps the
// key's slots, how long runs wait for them, and whether the bound ever
// breaks, against the same jobs spread over many keys and over none.
//
// The fleet is real (bench/procfleet): an embedded etcd in this process,
// Members `jobfleet orchestrator` processes and Workers `jobfleet worker`
// processes of Concurrency slots, on loopback; every job's executor is
// an http endpoint in this process that answers after AttemptTime and
// records when each request came and when it answered.
//
// Scenarios, one after the other on the same fleet, each of Jobs one-off
// jobs due at one instant (run_at, after they are all created):
//   - one key: every job names one key of max_running MaxRunning; the
//     ideal is MaxRunning / AttemptTime attempts a second;
//   - Keys keys: job i names key i mod Keys, each of max_running
//     MaxRunning; the ideal is min(Keys × MaxRunning, slots) /
//     AttemptTime, slots being Workers × Concurrency;
//   - no limit: the jobs name no key; the ideal is slots / AttemptTime.
//
// Guarantees: every figure comes from the endpoint's records of one run
// of each scenario on the machine it ran on; the most executions of one
// key seen at once at the endpoint is reported, and a run that sees more
// than MaxRunning fails. The endpoint sees less than a slot's hold (a
// slot is held from the grant until the worker's report is written), so
// utilisation counts the executors' time only. Not guaranteed: that
// another machine, or this one under another load, gives the same
// ratios.
package limits

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jobfleet/jobfleet/bench"
)

// Config configures a run. Start from DefaultConfig.
type Config struct {
	// Binary is the jobfleet binary the orchestrators and the workers
	// run; Dir holds their logs.
	Binary string
	Dir    string
	// Members is the orchestrator processes, Workers the worker
	// processes and Concurrency the slots of each (--concurrency).
	Members     int
	Workers     int
	Concurrency int
	// Jobs is the one-off jobs of each scenario.
	Jobs int
	// AttemptTime is how long the endpoint takes to answer an attempt.
	AttemptTime time.Duration
	// Keys is the keys of the many-keys scenario; MaxRunning the
	// max_running of every key.
	Keys       int
	MaxRunning int
	// Partitions is P.
	Partitions int
	// Fsync makes etcd sync its WAL (it does in production).
	Fsync bool
	// Timeout bounds each scenario.
	Timeout time.Duration
	// NoLimitOnly measures the no-limit scenario alone: the fleet's
	// baseline, also with a Binary of an earlier build that knows no
	// limit keys (to compare the builds' throughput).
	NoLimitOnly bool
	// Progress shows progress; nil shows none.
	Progress *bench.Progress
}

// DefaultConfig returns the benchmark's defaults: 1 000 jobs of 200 ms
// in each scenario, keys of max_running 10, 100 keys in the second, over
// 8 orchestrator processes and 20 workers of 5 slots.
func DefaultConfig() Config {
	return Config{Members: 8, Workers: 20, Concurrency: 5, Jobs: 1000, AttemptTime: 200 * time.Millisecond, Keys: 100, MaxRunning: 10,
		Partitions: 64, Fsync: true, Timeout: 5 * time.Minute}
}

// Validate checks cfg.
func (c Config) Validate() error {
	switch {
	case c.Binary == "" || c.Dir == "":
		return errors.New("limits: Binary and Dir are required")
	case c.Members < 1 || c.Members > 64:
		return fmt.Errorf("limits: Members %d outside 1 to 64", c.Members)
	case c.Workers < 1 || c.Workers > 256:
		return fmt.Errorf("limits: Workers %d outside 1 to 256", c.Workers)
	case c.Concurrency < 1 || c.Concurrency > 256:
		return fmt.Errorf("limits: Concurrency %d outside 1 to 256", c.Concurrency)
	case c.Jobs < 1 || c.Jobs > 100_000:
		return fmt.Errorf("limits: Jobs %d outside 1 to 100000", c.Jobs)
	case c.Keys < 1 || c.Keys > c.Jobs || c.Keys > 1000:
		return fmt.Errorf("limits: --keys %d outside 1 to the jobs (--jobs %d) and 1000", c.Keys, c.Jobs)
	case c.MaxRunning < 1 || c.MaxRunning > 10_000:
		return fmt.Errorf("limits: MaxRunning %d outside 1 to 10000", c.MaxRunning)
	case c.AttemptTime <= 0:
		return errors.New("limits: AttemptTime must be positive")
	case c.Partitions < 1 || c.Timeout <= 0:
		return errors.New("limits: Partitions and Timeout must be positive")
	}
	return nil
}

// Slots is the workers' slots in all.
func (c Config) Slots() int { return c.Workers * c.Concurrency }

// Scenario is one scenario's figures.
type Scenario struct {
	Name string `json:"name"`
	// Keys is the keys its jobs name (0: none), each of max_running
	// MaxRunning (0 without keys).
	Keys       int `json:"keys"`
	MaxRunning int `json:"max_running,omitempty"`
	// Slots is what bounds the attempts running at once: the keys'
	// max_running in all or the workers' slots, the smaller.
	Slots int `json:"slots"`
	// Jobs is the jobs, Succeeded their runs that succeeded.
	Jobs      int `json:"jobs"`
	Succeeded int `json:"succeeded"`
	// CreatedIn is how long creating the jobs took; they were due
	// Lead after the first was sent, and Late counts those created
	// after that instant.
	CreatedIn time.Duration `json:"created_in_ns"`
	Lead      time.Duration `json:"lead_ns"`
	Late      int           `json:"late"`
	// Makespan is from the instant the jobs were due to the last
	// answer at the endpoint.
	Makespan time.Duration `json:"makespan_ns"`
	// PerSecond is the attempts answered a second (Jobs / Makespan);
	// Ideal what Slots allow (Slots / AttemptTime); Ratio the first over
	// the second.
	PerSecond float64 `json:"per_second"`
	Ideal     float64 `json:"ideal_per_second"`
	Ratio     float64 `json:"ratio"`
	// Utilisation is the endpoint's busy time over Slots × Makespan.
	Utilisation float64 `json:"utilisation"`
	// Wait is the distribution of the time from the jobs' due instant to
	// each attempt's arrival at the endpoint.
	Wait bench.Summary `json:"wait"`
	// MaxConcurrent is the most executions of one key open at the
	// endpoint at once (of all jobs, without keys).
	MaxConcurrent int `json:"max_concurrent"`
	// Executions counts the endpoint's requests, Repeated the jobs
	// executed more than once.
	Executions int `json:"executions"`
	Repeated   int `json:"repeated"`
}

// Result is a run's figures.
type Result struct {
	Config    Config     `json:"config"`
	Scenarios []Scenario `json:"scenarios"`
}

// ErrLimitExceeded is matched by the error of a run that saw more
// executions of one key at once than its max_running.
var ErrLimitExceeded = errors.New("limits: max_running exceeded")

// Run starts the fleet, measures the one-key, the many-keys and the
// no-limit scenarios, and stops the fleet. A scenario that saw more
// executions of a key at once than its max_running fails the run with
// ErrLimitExceeded, its figures returned with it.
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
	for _, sc := range cfg.scenarios() {
		s, err := f.measure(ctx, sc)
		if err != nil && !errors.Is(err, ErrLimitExceeded) {
			return nil, err
		}
		res.Scenarios = append(res.Scenarios, s)
		if err != nil {
			return res, err
		}
	}
	return res, nil
}

// scenario is what a scenario runs: its name, the jobs' ID prefix and
// the keys they name (0: none).
type scenario struct {
	name, prefix string
	keys         int
}

func (c Config) scenarios() []scenario {
	if c.NoLimitOnly {
		return []scenario{{name: "no limit", prefix: "none"}}
	}
	return []scenario{
		{name: "one key", prefix: "one", keys: 1},
		{name: keysName(c.Keys), prefix: "many", keys: c.Keys},
		{name: "no limit", prefix: "none"},
	}
}

// keysName names the many-keys scenario.
func keysName(n int) string {
	if n == 1 {
		return "1 key"
	}
	return fmt.Sprintf("%d keys", n)
}
