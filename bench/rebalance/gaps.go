package rebalance

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jobfleet/jobfleet/bench"
	"github.com/jobfleet/jobfleet/bench/inprocfleet"
	"github.com/jobfleet/jobfleet/internal/gapwatch"
	"github.com/jobfleet/jobfleet/shard"
)

// Events measured by Gaps.
const (
	Join  = "graceful join"
	Leave = "graceful leave"
	Crash = "crash"
)

// GapConfig configures the measured part.
type GapConfig struct {
	// Partitions is P.
	Partitions int `json:"partitions"`
	// Members is the fleet's size before a member joins.
	Members int `json:"members"`
	// JoinLeaveReps is how many times a member joins and then leaves
	// gracefully.
	JoinLeaveReps int `json:"join_leave_reps"`
	// CrashReps is how many times a member joins and then crashes.
	CrashReps int `json:"crash_reps"`
	// LeaseTTL is every member's lease TTL (the orchestrator's default is
	// 5s); the crash failover is bounded by it.
	LeaseTTL time.Duration `json:"lease_ttl_ns"`
	// Timeout bounds the wait for the fleet to settle after each event.
	Timeout time.Duration `json:"timeout_ns"`
	// Progress shows what is running; nil shows nothing.
	Progress *bench.Progress `json:"-"`
}

// DefaultGapConfig: P=1024, 3 members, 20 join/leave pairs, 5 crashes,
// the orchestrator's default TTL of 5s.
func DefaultGapConfig() GapConfig {
	return GapConfig{Partitions: shard.DefaultPartitions, Members: 3, JoinLeaveReps: 20, CrashReps: 5, LeaseTTL: 5 * time.Second, Timeout: time.Minute}
}

// GapStats are the measurements of one kind of event.
type GapStats struct {
	Event string `json:"event"`
	Reps  int    `json:"reps"`
	// Gap is, over every partition that changed owner, the time from its
	// owner key's deletion (release, or lease expiry after a crash) to its
	// creation by the new owner, as an observer's watch sees them.
	Gap bench.Summary `json:"gap"`
	// Unowned is, over every partition that changed owner, the time from
	// the event (join started, leave started, crash) until it was owned by
	// its new owner: for a crash this includes the wait for the lease to
	// expire.
	Unowned bench.Summary `json:"unowned"`
	// Settle is, per repetition, the time from the event until every
	// partition was owned by its ring target.
	Settle bench.Summary `json:"settle"`
	// Moved is the mean number of partitions that changed owner per
	// repetition.
	Moved float64 `json:"moved_mean"`
}

// GapResult is the measured part.
type GapResult struct {
	Config GapConfig  `json:"config"`
	Stats  []GapStats `json:"stats"`
}

// Gaps measures ownership gaps with real orchestrators on the etcd at
// endpoints (reached directly by the observer, through a TCP bridge by
// each member so that a crash can cut one off).
func Gaps(ctx context.Context, endpoints []string, etcdAddr string, cfg GapConfig) (*GapResult, error) {
	if cfg.Partitions < 1 || cfg.Members < 1 || cfg.LeaseTTL < 2*time.Second || cfg.Timeout <= 0 {
		return nil, errors.New("rebalance: need partitions ≥ 1, members ≥ 1, a lease TTL ≥ 2s and a timeout")
	}
	obs, err := bench.NewClient(endpoints, 0)
	if err != nil {
		return nil, err
	}
	defer obs.Close()
	ns := fmt.Sprintf("/jobfleet-bench/gaps-%d/", time.Now().UnixNano())
	f, err := inprocfleet.New(obs, inprocfleet.Config{
		EtcdAddrs:     []string{etcdAddr},
		Namespace:     ns,
		Members:       cfg.Members,
		Partitions:    cfg.Partitions,
		LeaseTTL:      cfg.LeaseTTL,
		SettleTimeout: cfg.Timeout,
	})
	if err != nil {
		return nil, err
	}
	defer f.StopAll()
	if _, err := f.Settle(ctx, time.Now()); err != nil {
		return nil, err
	}
	stats := map[string]*samples{Join: {}, Leave: {}, Crash: {}}
	measure := func(event string, act func() error) error {
		rec, err := gapwatch.Start(ctx, obs, shard.OwnersPrefix(ns))
		if err != nil {
			return err
		}
		start := time.Now()
		if err := act(); err != nil {
			rec.Stop()
			return err
		}
		settle, err := f.Settle(ctx, start)
		res := rec.Stop()
		gaps, created, open := res.Gaps, res.Created, res.Open
		if err != nil {
			return fmt.Errorf("%s: %w", event, err)
		}
		if open > 0 {
			return fmt.Errorf("%s: %d partitions left without an owner", event, open)
		}
		s := stats[event]
		s.reps++
		s.settle = append(s.settle, settle)
		s.gaps = append(s.gaps, gaps...)
		for _, c := range created {
			s.unowned = append(s.unowned, c.Sub(start))
		}
		s.moved += len(created)
		cfg.Progress.Step("gaps: %-14s rep %2d: %4d partitions moved, gap max %v, settled in %v", event, s.reps, len(created), maxDur(gaps).Round(time.Millisecond), settle.Round(time.Millisecond))
		return nil
	}
	for rep := range cfg.JoinLeaveReps {
		id := fmt.Sprintf("joiner-%d", rep+1)
		if err := measure(Join, func() error { return f.Join(id) }); err != nil {
			return nil, err
		}
		if err := measure(Leave, func() error { f.Leave(id); return nil }); err != nil {
			return nil, err
		}
	}
	for rep := range cfg.CrashReps {
		id := fmt.Sprintf("crasher-%d", rep+1)
		if err := f.Join(id); err != nil {
			return nil, err
		}
		if _, err := f.Settle(ctx, time.Now()); err != nil {
			return nil, err
		}
		if err := measure(Crash, func() error { f.Crash(id); return nil }); err != nil {
			return nil, err
		}
	}
	res := &GapResult{Config: cfg}
	for _, ev := range []string{Join, Leave, Crash} {
		s := stats[ev]
		if s.reps == 0 {
			continue
		}
		res.Stats = append(res.Stats, GapStats{
			Event: ev, Reps: s.reps,
			Gap: bench.Summarize(s.gaps), Unowned: bench.Summarize(s.unowned), Settle: bench.Summarize(s.settle),
			Moved: float64(s.moved) / float64(s.reps),
		})
	}
	return res, nil
}

type samples struct {
	reps                  int
	gaps, unowned, settle []time.Duration
	moved                 int
}

func maxDur(ds []time.Duration) time.Duration {
	var m time.Duration
	for _, d := range ds {
		m = max(m, d)
	}
	return m
}
