// Package soak runs a fleet for a long time at a steady fire rate and
// records what it leaves in etcd: the database size and the part of it in
// use, the revision and the compacted revision, and the run history, over
// time. It also measures what one job, one run, one revision and one
// member cost in etcd, for sizing a deployment.
//
// The fleet is real (internal/orchestrator members with the dispatch
// scheduler, compacting etcd as in production) on one embedded etcd; the
// executor is a no-op run in process: pollers call each member's
// dispatcher directly (poll, then complete every attempt as a success),
// so the store sees every write a run's life makes (fire, attempt,
// result) without HTTP or workers in the way.
//
// What it does not promise: sizes depend on job IDs, payloads and output
// (the soak's are small) and on bbolt's page layout; the figures are for
// this workload on this etcd version.
package soak

import (
	"context"
	"errors"
	"fmt"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"go.uber.org/zap"

	"github.com/jobfleet/jobfleet/bench"
	"github.com/jobfleet/jobfleet/internal/storage"
	"github.com/jobfleet/jobfleet/membership"
	"github.com/jobfleet/jobfleet/shard"
	"github.com/jobfleet/jobfleet/store"
)

// Config configures a soak run.
type Config struct {
	// Duration is how long the fleet fires, after set-up.
	Duration time.Duration `json:"duration_ns"`
	// FiresPerSecond is the fire rate: that many jobs, each "@every 1s".
	FiresPerSecond int `json:"fires_per_second"`
	// Members is the number of orchestrators.
	Members int `json:"members"`
	// Partitions is P.
	Partitions int `json:"partitions"`
	// CompactionInterval is the fleet's --compaction-interval: 0 the
	// default, negative none.
	CompactionInterval time.Duration `json:"compaction_interval_ns"`
	// HistoryMaxRuns is how many runs are kept per job, and HistoryBudget
	// the bytes of run documents the fleet keeps (0: the orchestrator's
	// defaults).
	HistoryMaxRuns int   `json:"history_max_runs"`
	HistoryBudget  int64 `json:"history_budget_bytes"`
	// SampleInterval is how often etcd's figures are recorded.
	SampleInterval time.Duration `json:"sample_interval_ns"`
	// Pollers is the number of no-op pollers per member.
	Pollers int `json:"pollers"`
	// Timeout bounds the set-up (the fleet settling, the jobs created).
	Timeout time.Duration `json:"timeout_ns"`
	// Progress shows what the run does; nil shows nothing.
	Progress *bench.Progress `json:"-"`
	// Logger receives the members' logs; nil means none.
	Logger *zap.Logger `json:"-"`
}

// DefaultConfig is 100 fires/s for 10 minutes on 2 members with the
// fleet's own defaults for compaction and history.
func DefaultConfig() Config {
	return Config{
		Duration:           10 * time.Minute,
		FiresPerSecond:     100,
		Members:            2,
		Partitions:         128,
		CompactionInterval: storage.DefaultCompactionInterval,
		SampleInterval:     10 * time.Second,
		Pollers:            4,
		Timeout:            2 * time.Minute,
	}
}

// Validate checks the configuration.
func (c Config) Validate() error {
	switch {
	case c.Duration <= 0:
		return errors.New("soak: duration must be positive")
	case c.FiresPerSecond < 1 || c.FiresPerSecond > 100_000:
		return fmt.Errorf("soak: fires per second %d outside 1..100000", c.FiresPerSecond)
	case c.Members < 1 || c.Members > 16:
		return fmt.Errorf("soak: members %d outside 1..16", c.Members)
	case c.Partitions < 1 || c.Partitions > shard.MaxPartitions:
		return fmt.Errorf("soak: partitions %d outside 1..%d", c.Partitions, shard.MaxPartitions)
	case c.CompactionInterval > 0 && c.CompactionInterval < time.Second:
		return fmt.Errorf("soak: compaction interval %v below 1s", c.CompactionInterval)
	case c.SampleInterval < 10*time.Millisecond:
		return fmt.Errorf("soak: sample interval %v below 10ms", c.SampleInterval)
	case c.Pollers < 1:
		return errors.New("soak: at least one poller per member")
	case c.Timeout <= 0:
		return errors.New("soak: timeout must be positive")
	}
	return nil
}

// Sample is etcd as the run saw it at one moment.
type Sample struct {
	// Elapsed is the time since the fleet started firing.
	Elapsed time.Duration `json:"elapsed_ns"`
	// DBSize is the database file size, DBInUse the part in use.
	DBSize  int64 `json:"db_size_bytes"`
	DBInUse int64 `json:"db_size_in_use_bytes"`
	// Revision is etcd's revision; Compacted the fleet's last compaction.
	Revision  int64 `json:"revision"`
	Compacted int64 `json:"compacted_revision"`
	// Runs counts the run documents kept (the history).
	Runs int64 `json:"runs"`
	// Fires counts the job's scheduled times fired (or recorded as
	// skipped) since the jobs were created.
	Fires int64 `json:"fires"`
	// Dropped counts scheduled times neither fired nor recorded: missed
	// beyond the misfire cap of one decision (schedule.Policy.MaxFires).
	Dropped int64 `json:"dropped"`
	// HighWater is whether the database was above the default high-water
	// mark (80% of the quota), where the fleet refuses new work.
	HighWater bool `json:"high_water"`
}

// Sizing is what the fleet's documents cost in etcd. Logical sizes are
// keys plus values; physical ones are growths of etcd's in-use size.
type Sizing struct {
	// JobBytes is a job's spec and scheduling state (logical).
	JobBytes float64 `json:"job_bytes"`
	// JobInUseBytes is etcd's in-use growth per job created (physical,
	// with the revisions creating them).
	JobInUseBytes float64 `json:"job_in_use_bytes"`
	// RunBytes is a kept run document (logical), finished.
	RunBytes float64 `json:"run_bytes"`
	// MemberBytes is a member's registration and its share of owner keys
	// (logical).
	MemberBytes float64 `json:"member_bytes"`
	// RevisionBytes is etcd's in-use growth per revision before the first
	// compaction (physical: a revision is one write transaction, with
	// every key it writes).
	RevisionBytes float64 `json:"revision_bytes"`
	// FireBytes is etcd's in-use growth per fire before the first
	// compaction: everything a run's life writes (fire, attempt, result,
	// state, queue), in every revision it makes.
	FireBytes float64 `json:"fire_bytes"`
	// RevisionsPerFire is how many revisions a fire costs, batching
	// included.
	RevisionsPerFire float64 `json:"revisions_per_fire"`
	// Measured says whether the per-revision figures were measured: they
	// need two samples before the first compaction between which etcd's
	// in-use size grew.
	Measured bool `json:"measured"`
}

// Result is a whole soak run.
type Result struct {
	Config Config `json:"config"`
	// Fsync tells whether etcd synced its WAL (set by the caller, which
	// started it).
	Fsync bool `json:"fsync"`
	// Quota is the space quota etcd reported.
	Quota   int64    `json:"quota_bytes"`
	Samples []Sample `json:"samples"`
	Sizing  Sizing   `json:"sizing"`
	// FiresPerSecond is the rate achieved over the run.
	FiresPerSecond float64 `json:"achieved_fires_per_second"`
	// Defrag is a defragmentation of the database at the end, the fleet
	// stopped.
	Defrag Defrag `json:"defrag"`
	// Events counts what went wrong in the fleet meanwhile, from its log.
	Events Events `json:"events"`
}

// Events are counts of the members' warnings that matter for a soak.
type Events struct {
	// SessionsLost counts members fencing themselves because their lease
	// was not renewed in time (etcd answering late): their partitions
	// stop firing until they are owned again.
	SessionsLost int64 `json:"sessions_lost"`
	// WriteFailures counts scheduler writes that failed (fires, runs).
	WriteFailures int64 `json:"write_failures"`
}

// Defrag is one defragmentation of etcd's database.
type Defrag struct {
	// Before and After are the database file sizes.
	Before int64 `json:"before_bytes"`
	After  int64 `json:"after_bytes"`
	// Took is how long etcd was busy defragmenting (it serves nothing
	// else meanwhile).
	Took time.Duration `json:"took_ns"`
}

// Run runs the soak against the etcd at endpoints (which it should have to
// itself: the fleet compacts it) and returns what it recorded.
func Run(ctx context.Context, endpoints []string, cfg Config) (*Result, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	obs, err := bench.NewClient(endpoints, 0)
	if err != nil {
		return nil, err
	}
	defer obs.Close()
	ns := fmt.Sprintf("/jobfleet-soak-%d/", time.Now().UnixNano())
	f, err := startFleet(ctx, endpoints, ns, cfg)
	if err != nil {
		return nil, err
	}
	defer f.stop()
	sctx, cancel := context.WithTimeout(ctx, cfg.Timeout)
	defer cancel()
	if err := f.waitLoaded(sctx, cfg); err != nil {
		return nil, err
	}

	res := &Result{Config: cfg}
	before, err := status(sctx, obs)
	if err != nil {
		return nil, err
	}
	res.Quota = before.DbSizeQuota
	if err := createJobs(sctx, obs, ns, cfg); err != nil {
		return nil, err
	}
	if err := waitStates(sctx, obs, ns, cfg); err != nil {
		return nil, err
	}
	after, err := status(sctx, obs)
	if err != nil {
		return nil, err
	}
	keys := store.Keys{NS: ns}
	jobBytes, err := logicalBytes(sctx, obs, keys.JobsPrefix(), keys.AllStatePrefix())
	if err != nil {
		return nil, err
	}
	memberBytes, err := logicalBytes(sctx, obs, membership.Prefix(ns), shard.OwnersPrefix(ns))
	if err != nil {
		return nil, err
	}
	res.Sizing.JobBytes = float64(jobBytes) / float64(cfg.FiresPerSecond)
	res.Sizing.JobInUseBytes = float64(after.DbSizeInUse-before.DbSizeInUse) / float64(cfg.FiresPerSecond)
	res.Sizing.MemberBytes = float64(memberBytes) / float64(cfg.Members)

	stopPolling := f.poll(cfg)
	start := time.Now()
	tick := time.NewTicker(cfg.SampleInterval)
	defer tick.Stop()
	for {
		s, err := f.sample(ctx, obs, ns, start)
		if err != nil {
			stopPolling()
			return nil, err
		}
		res.Samples = append(res.Samples, s)
		cfg.Progress.Update("  soak: %v of %v, %d fires (%.0f/s), %d dropped, db %s (in use %s), revision %d, compacted %d, %d runs kept, %d sessions lost",
			s.Elapsed.Round(time.Second), cfg.Duration, s.Fires, float64(s.Fires)/max(s.Elapsed.Seconds(), 1e-9), s.Dropped,
			mib(s.DBSize), mib(s.DBInUse), s.Revision, s.Compacted, s.Runs, f.sessionsLost.Load())
		if s.Elapsed >= cfg.Duration {
			break
		}
		select {
		case <-ctx.Done():
			stopPolling()
			return nil, ctx.Err()
		case <-tick.C:
		}
	}
	stopPolling()
	res.Events = Events{SessionsLost: f.sessionsLost.Load(), WriteFailures: f.writeFailures.Load()}
	last := res.Samples[len(res.Samples)-1]
	res.FiresPerSecond = float64(last.Fires) / last.Elapsed.Seconds()
	rctx, rcancel := context.WithTimeout(ctx, cfg.Timeout)
	defer rcancel()
	if res.Sizing.RunBytes, err = meanRunBytes(rctx, obs, keys.AllRunsPrefix()); err != nil {
		return nil, err
	}
	res.Sizing.perRevision(res.Samples)
	f.stop()
	if res.Defrag, err = defragment(rctx, obs); err != nil {
		return nil, err
	}
	return res, nil
}

// defragment defragments the etcd at c's first endpoint and measures it.
func defragment(ctx context.Context, c *clientv3.Client) (Defrag, error) {
	before, err := status(ctx, c)
	if err != nil {
		return Defrag{}, err
	}
	start := time.Now()
	if _, err := c.Defragment(ctx, c.Endpoints()[0]); err != nil {
		return Defrag{}, fmt.Errorf("soak: defragment: %w", err)
	}
	took := time.Since(start)
	after, err := status(ctx, c)
	if err != nil {
		return Defrag{}, err
	}
	return Defrag{Before: before.DbSize, After: after.DbSize, Took: took}, nil
}

func mib(n int64) string { return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20)) }

// perRevision fills the per-revision and per-fire figures from the growth
// between the first sample and the last one before the first compaction.
func (s *Sizing) perRevision(samples []Sample) {
	if len(samples) < 2 {
		return
	}
	first, last := samples[0], samples[0]
	for _, x := range samples[1:] {
		if x.Compacted != 0 {
			break
		}
		last = x
	}
	dRev, dFires := last.Revision-first.Revision, last.Fires-first.Fires
	if dRev <= 0 || dFires <= 0 {
		return
	}
	grown := float64(last.DBInUse - first.DBInUse)
	if grown <= 0 {
		// bbolt reused pages freed before the first sample: etcd's
		// in-use size did not grow over so short a window, and its
		// growth per revision cannot be told.
		return
	}
	s.RevisionBytes = grown / float64(dRev)
	s.FireBytes = grown / float64(dFires)
	s.RevisionsPerFire = float64(dRev) / float64(dFires)
	s.Measured = true
}
