// Package scale measures what grows with the number of resident jobs: for
// each job count N and member count M it starts one etcd and M real
// `jobfleet orchestrator` processes, creates N jobs through the HTTP API,
// and measures the create rate, what a job and a run cost in etcd, the
// members' resident memory, the listing rate, a crashed member's takeover,
// a rolling restart of every member, N jobs due in the same second (the
// herd) and N jobs spread over a period. Figures against N go to tables,
// CSV and log-log charts, where a straight line of slope 1 is linear
// growth.
//
// The etcd is embedded in the bench's process (one node, fsync on unless
// told otherwise, data in a temporary directory); the members are
// separate processes of the jobfleet binary on loopback. No worker runs:
// a fire is measured until its run document is durable in etcd.
package scale

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"time"

	"github.com/jobfleet/jobfleet/bench"
	"github.com/jobfleet/jobfleet/shard"
)

// Config configures a run.
type Config struct {
	// Jobs are the job counts N measured, Members the member counts M;
	// every pair is one measurement, on a fresh etcd.
	Jobs    []int `json:"jobs"`
	Members []int `json:"members"`
	// Binary is the jobfleet binary the members run.
	Binary string `json:"-"`
	// Partitions is P (0: the orchestrator's default).
	Partitions int `json:"partitions"`
	// LeaseTTL is the members' --lease-ttl (0: their default).
	LeaseTTL time.Duration `json:"lease_ttl_ns"`
	// Fsync tells whether etcd syncs its WAL (it does in production).
	Fsync bool `json:"fsync"`
	// Quota is etcd's space quota in bytes.
	Quota int64 `json:"quota_bytes"`
	// CreateConcurrency is the requests in flight while creating
	// (batches, or single creates without the batch endpoint).
	CreateConcurrency int `json:"create_concurrency"`
	// BatchSize is the jobs per batch request.
	BatchSize int `json:"batch_size"`
	// ListMax caps the jobs listed for the listing rate (0: all).
	ListMax int `json:"list_max"`
	// Probes is the number of "@every 1s" jobs that show when partitions
	// fire again after a takeover and count misfires in a rolling
	// restart.
	Probes int `json:"probes"`
	// SpreadRate is the fire rate of the spread workload: N jobs spread
	// over N/SpreadRate seconds (at least MinSpread).
	SpreadRate float64       `json:"spread_rate"`
	MinSpread  time.Duration `json:"min_spread_ns"`
	// SpreadJobs, if positive and below N, spreads only the first
	// SpreadJobs of the N resident jobs (over SpreadJobs/SpreadRate
	// seconds), the others staying resident: a slice of a longer spread
	// of all N at the same rate, measured in minutes instead of hours.
	SpreadJobs int `json:"spread_jobs,omitempty"`
	// Jitter is the jitter of the jitter phase's hourly jobs (0: the
	// default, 1m; at most a day).
	Jitter time.Duration `json:"jitter_ns"`
	// StoreLimitDuration is how long each level of the store-limit
	// measurement runs.
	StoreLimitDuration time.Duration `json:"store_limit_duration_ns"`
	// StoreWriters are the writer counts of the store-limit measurement;
	// the limit is the best of them.
	StoreWriters []int `json:"store_writers"`
	// Phases lists the phases to run (see AllPhases); empty runs all.
	Phases []string `json:"phases"`
	// Dir holds etcd's data and the members' logs (a temporary directory
	// if empty; removed at the end unless KeepDir).
	Dir     string `json:"-"`
	KeepDir bool   `json:"-"`
	// Reuse, if set, is the directory of an earlier point kept with
	// KeepDir (the n…-m… directory under Dir), whose etcd holds the
	// point's N jobs: the fleet starts on it, with M members whatever the
	// kept point's member count, and the jobs are not created again (the
	// create and job size figures stay empty). It needs a single N and M;
	// the directory is never removed. The herd, spread and store-limit
	// phases rewrite the jobs and write runs into it: reuse a copy for
	// them (list, takeover and restart leave the jobs as they were).
	Reuse string `json:"-"`
	// PortBase, when positive, puts etcd on PortBase and PortBase+1 and
	// member i on PortBase+10+i; 0 takes free ports.
	PortBase int `json:"-"`
	// Progress shows what the run does; nil shows nothing.
	Progress *bench.Progress `json:"-"`
}

// Phases of a measurement, in the order they run. create always runs.
const (
	PhaseList     = "list"
	PhaseTakeover = "takeover"
	PhaseRestart  = "restart"
	PhaseHerd     = "herd"
	PhaseSpread   = "spread"
	// PhaseJitter rewrites the N jobs to one hourly schedule (the same
	// minute and second of every hour) with Config.Jitter, and measures
	// how their fires spread over the jitter's window.
	PhaseJitter = "jitter"
	// PhaseStoreLimit stops the members and measures the store's limit
	// on the filled etcd; it runs last.
	PhaseStoreLimit = "storelimit"
)

// AllPhases are the optional phases.
var AllPhases = []string{PhaseList, PhaseTakeover, PhaseRestart, PhaseHerd, PhaseJitter, PhaseSpread, PhaseStoreLimit}

// DefaultConfig measures 10k and 100k jobs on 3 members with fsync.
func DefaultConfig() Config {
	return Config{
		Jobs:               []int{10_000, 100_000},
		Members:            []int{3},
		Fsync:              true,
		Quota:              8 << 30,
		CreateConcurrency:  32,
		BatchSize:          100,
		ListMax:            200_000,
		Probes:             64,
		SpreadRate:         5_000,
		MinSpread:          20 * time.Second,
		Jitter:             DefaultJitter,
		StoreLimitDuration: 3 * time.Second,
		StoreWriters:       []int{8, 32, 128},
	}
}

// Validate checks the configuration.
func (c Config) Validate() error {
	if len(c.Jobs) == 0 || len(c.Members) == 0 {
		return errors.New("scale: at least one job count and one member count")
	}
	for _, n := range c.Jobs {
		if n < 1 || n > 10_000_000 {
			return fmt.Errorf("scale: jobs %d outside 1..10000000", n)
		}
	}
	for _, m := range c.Members {
		if m < 2 || m > 16 {
			return fmt.Errorf("scale: members %d outside 2..16 (a takeover needs a survivor)", m)
		}
	}
	for _, p := range c.Phases {
		if !c.known(p) {
			return fmt.Errorf("scale: unknown phase %q (want some of %v)", p, AllPhases)
		}
	}
	switch {
	case c.Binary == "":
		return errors.New("scale: no jobfleet binary")
	case c.Partitions < 0 || c.Partitions > shard.MaxPartitions:
		return fmt.Errorf("scale: partitions %d outside 0..%d", c.Partitions, shard.MaxPartitions)
	case c.LeaseTTL < 0 || c.LeaseTTL%time.Second != 0:
		return fmt.Errorf("scale: lease TTL %v: want whole seconds", c.LeaseTTL)
	case c.CreateConcurrency < 1 || c.CreateConcurrency > 1024:
		return fmt.Errorf("scale: create concurrency %d outside 1..1024", c.CreateConcurrency)
	case c.BatchSize < 1 || c.BatchSize > 10_000:
		return fmt.Errorf("scale: batch size %d outside 1..10000", c.BatchSize)
	case c.ListMax < 0:
		return errors.New("scale: list max must not be negative")
	case c.Probes < 1 || c.Probes > 10_000:
		return fmt.Errorf("scale: probes %d outside 1..10000", c.Probes)
	case c.SpreadRate <= 0:
		return errors.New("scale: spread rate must be positive")
	case c.Jitter < 0 || c.Jitter > 24*time.Hour || c.Jitter%time.Millisecond != 0:
		return fmt.Errorf("scale: jitter %v: want whole milliseconds up to 24h (0: the default, %v)", c.Jitter, DefaultJitter)
	case c.SpreadJobs < 0:
		return fmt.Errorf("scale: spread jobs %d below 0", c.SpreadJobs)
	case c.runs(PhaseStoreLimit) && (len(c.StoreWriters) == 0 || slices.Min(c.StoreWriters) < 1):
		return errors.New("scale: store writers must list counts ≥ 1")
	case c.Reuse != "" && (len(c.Jobs) != 1 || len(c.Members) != 1):
		return errors.New("scale: reusing a directory measures one job count on one member count")
	case c.StoreLimitDuration < 100*time.Millisecond:
		return fmt.Errorf("scale: store-limit duration %v below 100ms", c.StoreLimitDuration)
	case c.MinSpread < time.Second:
		return fmt.Errorf("scale: minimum spread %v below 1s", c.MinSpread)
	case c.PortBase < 0 || c.PortBase > 65_000:
		return fmt.Errorf("scale: port base %d outside 0..65000", c.PortBase)
	}
	return nil
}

func (c Config) known(p string) bool {
	for _, q := range AllPhases {
		if p == q {
			return true
		}
	}
	return false
}

// runs reports whether phase p is to run.
func (c Config) runs(p string) bool {
	if len(c.Phases) == 0 {
		return true
	}
	for _, q := range c.Phases {
		if p == q {
			return true
		}
	}
	return false
}

// Result is a whole run: one point per (N, M).
type Result struct {
	Config Config        `json:"config"`
	Points []*Point      `json:"points"`
	Took   time.Duration `json:"took_ns"`
}

// Run measures every (N, M) of cfg in turn and returns the points. A
// point whose fleet could not start, or whose jobs could not be created,
// or one of whose phases failed, is kept with its Errors and the next
// points run; Run returns an error only for a bad configuration or ctx
// ending (with the points so far). Failed reports whether any point has
// errors.
func Run(ctx context.Context, cfg Config) (*Result, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	start := time.Now()
	res := &Result{Config: cfg}
	for _, n := range cfg.Jobs {
		for _, m := range cfg.Members {
			cfg.Progress.Step("scale: %d jobs on %d members", n, m)
			p, err := measure(ctx, cfg, n, m)
			if ctx.Err() != nil {
				// Interrupted: the point is kept with what it measured.
				p.Errors = append(p.Errors, "interrupted: "+ctx.Err().Error())
				res.Points = append(res.Points, p)
				res.Took = time.Since(start)
				return res, ctx.Err()
			}
			if err != nil {
				// The point is kept with its error; the next ones run.
				p.Errors = append(p.Errors, err.Error())
				cfg.Progress.Step("scale: %d jobs on %d members failed: %v", n, m, err)
			}
			res.Points = append(res.Points, p)
		}
	}
	res.Took = time.Since(start)
	return res, nil
}

// Failed reports whether any point has errors.
func (r *Result) Failed() bool {
	for _, p := range r.Points {
		if len(p.Errors) > 0 {
			return true
		}
	}
	return false
}

// measure is one point: a fresh etcd and fleet, the phases, and the fleet
// stopped.
func measure(ctx context.Context, cfg Config, n, members int) (*Point, error) {
	dir := cfg.Dir
	if cfg.Reuse != "" {
		p := &Point{Jobs: n, Members: members}
		f, err := startFleet(ctx, cfg, cfg.Reuse, members)
		if err != nil {
			return p, fmt.Errorf("%w (logs in %s)", err, cfg.Reuse)
		}
		err = p.run(ctx, f)
		f.stop()
		return p, err
	}
	if dir == "" {
		d, err := os.MkdirTemp("", "jobfleet-bench-scale-")
		if err != nil {
			return nil, err
		}
		dir = d
	} else {
		dir = fmt.Sprintf("%s/n%d-m%d-%d", dir, n, members, time.Now().Unix())
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return nil, err
		}
	}
	p := &Point{Jobs: n, Members: members}
	f, err := startFleet(ctx, cfg, dir, members)
	if err != nil {
		return p, fmt.Errorf("%w (logs in %s)", err, dir)
	}
	err = p.run(ctx, f)
	f.stop()
	if err != nil || len(p.Errors) > 0 {
		// Keep the logs of a failed point.
		p.Errors = append(p.Errors, "logs in "+dir)
		return p, err
	}
	if !cfg.KeepDir {
		os.RemoveAll(dir)
		return p, nil
	}
	cfg.Progress.Step("scale: %d jobs on %d members kept in %s (start a fleet on a copy of it with --reuse)", n, members, dir)
	return p, nil
}
