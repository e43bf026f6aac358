// Package scaling measures how jobfleet's sharded fleet scales against the
// two designs it replaces, on one embedded etcd in one run:
//
//   - global-lock: every orchestrator takes one etcd mutex
//     (go.etcd.io/etcd/client/v3/concurrency), reads due jobs, records
//     their fires in transactions conditional on still holding the lock,
//     and releases it. Correct, and serialised.
//   - no-coordination: every orchestrator reads due jobs and fires them
//     with no ownership at all. The run key's create-if-absent check keeps
//     the store consistent; every fire that finds its run already created
//     by another orchestrator is counted as a duplicate (without that
//     check it would have run twice).
//   - sharded: jobfleet as built — real orchestrators
//     (internal/orchestrator) with the real per-partition scheduler
//     (package dispatch), jobs written through store.Etcd.
//
// Every strategy writes each run the same way: a nested transaction that
// creates the run key only if absent and puts its queue entry, up to
// FireBatch runs per outer transaction, the outer one conditional on the
// writer's fence (the owner key's epoch for sharded, the mutex key for
// global-lock, nothing for no-coordination). The baselines find due jobs
// through a time-ordered index (due/<unix ms>/<job>), the etcd equivalent
// of an indexed "WHERE next_run <= now" query, and move a job's index
// entry in the same nested transaction as its run; the sharded scheduler
// writes the job's state key there instead.
//
// Two workloads: drain (N one-off jobs all due at one instant: the time
// until every run exists) and steady (J jobs "@every 1s" for a fixed
// window: schedule lag, fired_at − scheduled_at from the run documents,
// and the time until the run is durable as an observer's watch sees it).
// The store limit — fenced batched transactions of the same shape written
// as fast as the same etcd takes them, through shard.Ownership.Commit —
// is measured in the same run, so the report can say what fraction of it
// the fleet reaches.
package scaling

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/jobfleet/jobfleet/bench"
)

// Strategies.
const (
	GlobalLock     = "global-lock"
	NoCoordination = "no-coordination"
	Sharded        = "sharded"
	// ShardedUnbatched is Sharded with every fenced write sent on its
	// own (dispatch.Config.CommitsInFlight negative): the scheduler before
	// writes were batched across partitions, for before/after figures
	// measured in the same run.
	ShardedUnbatched = "sharded-unbatched"
)

// Workloads.
const (
	Drain  = "drain"
	Steady = "steady"
)

// Config configures a scaling run. Start from DefaultConfig.
type Config struct {
	// Members are the orchestrator counts to measure each strategy with.
	Members []int `json:"members"`
	// Strategies to measure, among GlobalLock, NoCoordination, Sharded.
	Strategies []string `json:"strategies"`
	// Workloads to run, among Drain and Steady.
	Workloads []string `json:"workloads"`
	// Partitions is P of the sharded fleet.
	Partitions int `json:"partitions"`
	// DrainJobs is N, the one-off jobs of the drain workload.
	DrainJobs int `json:"drain_jobs"`
	// SteadyJobs is J, the "@every 1s" jobs of the steady workload.
	SteadyJobs int `json:"steady_jobs"`
	// SteadyWindow is how long the steady workload's fires are measured
	// (whole seconds).
	SteadyWindow time.Duration `json:"steady_window_ns"`
	// Delay is a fixed round trip added to every unary etcd call of the
	// orchestrators (and of the store-limit writers), modelling a store
	// across a network.
	Delay time.Duration `json:"delay_ns"`
	// FireBatch is the most runs per transaction, for every strategy
	// (dispatch's default is 25).
	FireBatch int `json:"fire_batch"`
	// LockBatches is how many FireBatch transactions a global-lock
	// holder writes, one after the other, per hold.
	LockBatches int `json:"lock_batches"`
	// CommitsInFlight is the sharded members' dispatch.Config
	// CommitsInFlight: 0 keeps the shipped default, −1 sends every fenced
	// write on its own (the scheduler before cross-partition batching).
	CommitsInFlight int `json:"commits_in_flight"`
	// LeaseTTL is the sharded members' lease TTL (and the global-lock
	// sessions').
	LeaseTTL time.Duration `json:"lease_ttl_ns"`
	// StoreLimitConcurrency are the writer counts of the store-limit
	// measurement; the limit is the best of them.
	StoreLimitConcurrency []int `json:"store_limit_concurrency"`
	// StoreLimitShares are the partitions per request of the store-limit
	// measurement: 1 is one fenced transaction per request
	// (Ownership.Commit); more is that many partitions' fenced
	// transactions in one request (shard.CommitBatch), the shape the
	// scheduler sends when it batches across partitions.
	StoreLimitShares []int `json:"store_limit_shares"`
	// StoreLimitDuration is how long each store-limit level runs.
	StoreLimitDuration time.Duration `json:"store_limit_duration_ns"`
	// Fsync makes the embedded etcd sync its WAL (as in production).
	Fsync bool `json:"fsync"`
	// Timeout bounds each trial's wait for its runs.
	Timeout time.Duration `json:"timeout_ns"`
	// Progress shows what is running; nil shows nothing.
	Progress *bench.Progress `json:"-"`
}

// DefaultConfig returns the default sizes: a few minutes on a 2-core
// machine.
func DefaultConfig() Config {
	return Config{
		Members:               []int{1, 2, 4, 8},
		Strategies:            []string{GlobalLock, NoCoordination, Sharded},
		Workloads:             []string{Drain, Steady},
		Partitions:            1024,
		DrainJobs:             10000,
		SteadyJobs:            500,
		SteadyWindow:          8 * time.Second,
		FireBatch:             25,
		LockBatches:           4,
		LeaseTTL:              5 * time.Second,
		StoreLimitConcurrency: []int{1, 8, 32, 128},
		StoreLimitShares:      []int{1, 8},
		StoreLimitDuration:    2 * time.Second,
		Fsync:                 true,
		Timeout:               2 * time.Minute,
	}
}

// Validate checks the configuration.
func (c Config) Validate() error {
	switch {
	case len(c.Members) == 0 || slices.Min(c.Members) < 1:
		return errors.New("scaling: members must list counts ≥ 1")
	case len(c.Strategies) == 0:
		return errors.New("scaling: no strategy")
	case len(c.Workloads) == 0:
		return errors.New("scaling: no workload")
	case c.Partitions < 1:
		return errors.New("scaling: partitions must be ≥ 1")
	case slices.Contains(c.Workloads, Drain) && c.DrainJobs < 1:
		return errors.New("scaling: drain jobs must be ≥ 1")
	case slices.Contains(c.Workloads, Steady) && (c.SteadyJobs < 1 || c.SteadyWindow < time.Second):
		return errors.New("scaling: steady needs ≥ 1 job and a window of ≥ 1s")
	case c.FireBatch < 1 || c.FireBatch > 25:
		return errors.New("scaling: fire batch outside 1..25 (etcd allows 128 operations per transaction)")
	case c.LockBatches < 1:
		return errors.New("scaling: lock batches must be ≥ 1")
	case c.LeaseTTL < 2*time.Second:
		return errors.New("scaling: lease TTL below 2s")
	case c.Delay < 0:
		return errors.New("scaling: negative delay")
	case c.Timeout <= 0:
		return errors.New("scaling: timeout must be positive")
	}
	for _, s := range c.Strategies {
		if s != GlobalLock && s != NoCoordination && s != Sharded && s != ShardedUnbatched {
			return fmt.Errorf("scaling: unknown strategy %q", s)
		}
	}
	for _, w := range c.Workloads {
		if w != Drain && w != Steady {
			return fmt.Errorf("scaling: unknown workload %q", w)
		}
	}
	return nil
}

// Trial is the result of one strategy with n orchestrators on one
// workload.
type Trial struct {
	Strategy string `json:"strategy"`
	Members  int    `json:"members"`
	Workload string `json:"workload"`
	// Expected is how many runs the workload should create; Runs how many
	// distinct runs it did create (in the steady window).
	Expected int `json:"expected"`
	Runs     int `json:"runs"`
	// Misses = Expected − Runs: fires that never happened.
	Misses int `json:"misses"`
	// Duplicates are fires decided for a (job, time) whose run another
	// orchestrator had already created (refused by the run key's
	// create-if-absent check).
	Duplicates int `json:"duplicates"`
	// Elapsed is, for drain, the time from the due instant until the last
	// run existed; for steady, the window.
	Elapsed time.Duration `json:"elapsed_ns"`
	// FiresPerSec is Runs / Elapsed (drain).
	FiresPerSec float64 `json:"fires_per_sec"`
	// Lag is fired_at − scheduled_at from the run documents; Durable is
	// the time from scheduled_at until an observer saw the run created.
	Lag     bench.Summary `json:"lag"`
	Durable bench.Summary `json:"durable"`
	// Errors counts failed store calls (timeouts, refused fences).
	Errors int `json:"errors"`
	// Note says what went wrong, if anything.
	Note string `json:"note,omitempty"`
}

// StoreLevel is the store-limit throughput at one writer count.
type StoreLevel struct {
	// When is "before" or "after" the trials.
	When string `json:"when"`
	// Shares is the partitions' fenced transactions per request.
	Shares     int     `json:"shares"`
	Writers    int     `json:"writers"`
	Txns       int     `json:"txns"`
	Runs       int     `json:"runs"`
	RunsPerSec float64 `json:"runs_per_sec"`
	TxnP50Ms   float64 `json:"txn_p50_ms"`
	TxnP99Ms   float64 `json:"txn_p99_ms"`
}

// Result is a whole scaling run.
type Result struct {
	Config     Config        `json:"config"`
	Started    time.Time     `json:"started"`
	Took       time.Duration `json:"took_ns"`
	Trials     []Trial       `json:"trials"`
	StoreLimit []StoreLevel  `json:"store_limit"`
	// Limit is the best store-limit level's runs/s.
	Limit float64 `json:"limit_runs_per_sec"`
	// Ratios are sharded / global-lock drain throughput per member count.
	Ratios map[int]float64 `json:"sharded_over_global_lock"`
	// SpecWritesPerSec is how fast the job specs were written (setup).
	SpecWritesPerSec float64 `json:"spec_writes_per_sec"`
}

// Run measures cfg on a fresh embedded etcd.
func Run(ctx context.Context, cfg Config) (*Result, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	etcd, err := bench.StartEtcd(cfg.Fsync)
	if err != nil {
		return nil, err
	}
	defer etcd.Close()
	return RunOn(ctx, etcd.Endpoints(), cfg)
}

// RunOn measures cfg against the etcd at endpoints, in namespaces under
// /jobfleet-bench/ of its own.
func RunOn(ctx context.Context, endpoints []string, cfg Config) (*Result, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	env, err := newEnv(endpoints, cfg)
	if err != nil {
		return nil, err
	}
	defer env.close()
	res := &Result{Config: cfg, Started: time.Now(), Ratios: map[int]float64{}}
	if err := env.calibrate(ctx); err != nil {
		return nil, fmt.Errorf("calibrate spec writes: %w", err)
	}
	if res.StoreLimit, err = env.storeLimit(ctx, "before"); err != nil {
		return nil, fmt.Errorf("store limit: %w", err)
	}
	// Strategies alternate at each n so that whatever else the machine
	// does at the time weighs on them alike.
	for _, w := range cfg.Workloads {
		for _, n := range cfg.Members {
			for _, s := range cfg.Strategies {
				if err := ctx.Err(); err != nil {
					return nil, err
				}
				t, err := env.trial(ctx, s, n, w)
				for retry := 0; errors.Is(err, errOverran) && retry < 3; retry++ {
					cfg.Progress.Step("scaling: %s n=%d %s: %v; again with a later due time", s, n, w, err)
					t, err = env.trial(ctx, s, n, w)
				}
				if err != nil {
					return nil, fmt.Errorf("%s n=%d %s: %w", s, n, w, err)
				}
				cfg.Progress.Step("scaling: %-15s n=%d %-6s %s", s, n, w, t.summary())
				res.Trials = append(res.Trials, t)
			}
		}
	}
	// The store limit is measured again after the trials: the best of
	// both is the limit, so a moment of other load on the machine during
	// one of them does not make the fleet look better than it is.
	after, err := env.storeLimit(ctx, "after")
	if err != nil {
		return nil, fmt.Errorf("store limit: %w", err)
	}
	res.StoreLimit = append(res.StoreLimit, after...)
	for _, l := range res.StoreLimit {
		res.Limit = max(res.Limit, l.RunsPerSec)
	}
	res.SpecWritesPerSec = env.specRate()
	res.Ratios = ratios(res.Trials)
	res.Took = time.Since(res.Started)
	return res, nil
}

func (t Trial) summary() string {
	s := fmt.Sprintf("runs %d/%d dup %d", t.Runs, t.Expected, t.Duplicates)
	if t.Workload == Drain {
		s += fmt.Sprintf(" %.0f fires/s in %v", t.FiresPerSec, t.Elapsed.Round(time.Millisecond))
	} else {
		s += fmt.Sprintf(" lag p50 %v p99 %v max %v", t.Lag.P50.Round(time.Millisecond/10), t.Lag.P99.Round(time.Millisecond/10), t.Lag.Max.Round(time.Millisecond/10))
	}
	if t.Note != "" {
		s += " (" + t.Note + ")"
	}
	return s
}

// ratios returns sharded / global-lock drain throughput per member count.
func ratios(trials []Trial) map[int]float64 {
	sh, gl := map[int]float64{}, map[int]float64{}
	for _, t := range trials {
		if t.Workload != Drain {
			continue
		}
		switch t.Strategy {
		case Sharded:
			sh[t.Members] = t.FiresPerSec
		case GlobalLock:
			gl[t.Members] = t.FiresPerSec
		}
	}
	r := map[int]float64{}
	for n, s := range sh {
		if g := gl[n]; g > 0 {
			r[n] = s / g
		}
	}
	return r
}

// Find returns the trial of strategy s with n members on workload w.
func (r *Result) Find(s string, n int, w string) (Trial, bool) {
	for _, t := range r.Trials {
		if t.Strategy == s && t.Members == n && t.Workload == w {
			return t, true
		}
	}
	return Trial{}, false
}
