// Package rebalance measures how well the assignment ring spreads and
// moves partitions, and how long partitions go without an owner when
// membership changes on a real etcd.
//
// The ring part is pure and fast: for n = 1..MaxMembers members and P
// partitions, it counts the partitions whose target changes when a member
// joins (n → n+1) and when a random member leaves (n+1 → n), against the
// ideal P/(n+1) that any scheme must move, and the largest member's load
// against the average, for several ring settings (virtual nodes per
// member, load bound, ring version) next to the shipped ones
// (shard.DefaultRingConfig). It times the computations in CPU time of the
// computing thread, so a busy machine stretches the figures less than
// wall-clock time would: each join's update through a shard.Assigner (what
// a member computes on a membership change) and a fresh shard.NewRing of
// MaxMembers members (what a member computes when it starts).
//
// The measured part (Gaps) runs real orchestrators in this process on an
// embedded etcd and records, with a watch on the owner keys, the time each
// partition spends without an owner key on a graceful join, a graceful
// leave and a crash, over many repetitions.
package rebalance

import (
	"fmt"
	"math/rand/v2"
	"runtime"
	"time"

	"github.com/jobfleet/jobfleet/bench"
	"github.com/jobfleet/jobfleet/shard"
)

// Setting is one ring setting to compare.
type Setting struct {
	ReplicationFactor int     `json:"replication_factor"`
	Load              float64 `json:"load"`
	// Version is the ring version (shard.RingConfig.Version); 0 is the
	// current one.
	Version int `json:"version,omitempty"`
}

func (s Setting) String() string {
	if s.Version != 0 && s.Version != shard.RingVersion {
		return fmt.Sprintf("v%d RF %d, load %.2f", s.Version, s.ReplicationFactor, s.Load)
	}
	return fmt.Sprintf("RF %d, load %.2f", s.ReplicationFactor, s.Load)
}

// RingConfig configures the pure ring analysis.
type RingConfig struct {
	// Partitions is P.
	Partitions int `json:"partitions"`
	// MaxMembers is the largest member count analysed (joins go up to it).
	MaxMembers int `json:"max_members"`
	// Settings are compared; the shipped one is marked in the results.
	Settings []Setting `json:"settings"`
	// LeaveSamples is how many random members leave at each n (the
	// movement is averaged over them).
	LeaveSamples int `json:"leave_samples"`
	// Seed picks the leaving members.
	Seed uint64 `json:"seed"`
}

// DefaultRingConfig compares replication factors 20, 50, 100, 200 and load
// bounds 1.1, 1.25, 1.5 for the default P and 1..64 members, and the
// version 1 ring (the consistent library's own bounded loads, shipped
// with RF 50 and load 1.25 before ring version 2).
func DefaultRingConfig() RingConfig {
	ss := []Setting{{ReplicationFactor: 50, Load: 1.25, Version: 1}}
	for _, rf := range []int{20, 50, 100, 200} {
		for _, l := range []float64{1.1, 1.25, 1.5} {
			ss = append(ss, Setting{ReplicationFactor: rf, Load: l})
		}
	}
	return RingConfig{Partitions: shard.DefaultPartitions, MaxMembers: 64, Settings: ss, LeaveSamples: 3, Seed: 1}
}

// Point is one member count under one setting.
type Point struct {
	Setting Setting `json:"setting"`
	// N is the member count before a join (after a leave).
	N int `json:"n"`
	// Ideal is P/(N+1): what any assignment must move when the (N+1)th
	// member joins or leaves.
	Ideal float64 `json:"ideal"`
	// JoinMoved and LeaveMoved are the partitions whose target changed
	// (LeaveMoved averaged over the samples).
	JoinMoved  int     `json:"join_moved"`
	LeaveMoved float64 `json:"leave_moved"`
	// MaxOverAvg is the largest load / (P/(N+1)) with N+1 members.
	MaxOverAvg float64 `json:"max_over_avg"`
}

// SettingSummary sums one setting up over all member counts.
type SettingSummary struct {
	Setting   Setting `json:"setting"`
	Shipped   bool    `json:"shipped"`
	JoinMean  float64 `json:"join_moved_over_ideal_mean"`
	JoinMax   float64 `json:"join_moved_over_ideal_max"`
	LeaveMean float64 `json:"leave_moved_over_ideal_mean"`
	LeaveMax  float64 `json:"leave_moved_over_ideal_max"`
	// MaxOverAvg is the worst max/avg load over all member counts.
	MaxOverAvg float64 `json:"max_over_avg_worst"`
	// Update is the mean CPU time of one join's ring update through a
	// shard.Assigner, over joins 1 → 2 … MaxMembers-1 → MaxMembers;
	// UpdateLast the same for the last join alone (mean of repeats).
	Update     time.Duration `json:"update_cpu_ns"`
	UpdateLast time.Duration `json:"update_last_cpu_ns"`
	// Fresh is the CPU time of computing the ring of MaxMembers members
	// afresh (shard.NewRing; mean of repeats).
	Fresh time.Duration `json:"fresh_cpu_ns"`
}

// RingResult is the pure ring analysis.
type RingResult struct {
	Config   RingConfig       `json:"config"`
	Points   []Point          `json:"points"`
	Settings []SettingSummary `json:"settings"`
}

func memberIDs(n int) []string {
	ids := make([]string, n)
	for i := range ids {
		ids[i] = fmt.Sprintf("orchestrator-%d", i+1)
	}
	return ids
}

// repeats is how many times the last join's update and the fresh ring are
// timed.
const repeats = 5

// AnalyzeRings runs the pure analysis.
func AnalyzeRings(cfg RingConfig, progress *bench.Progress) (*RingResult, error) {
	if cfg.Partitions < 1 || cfg.MaxMembers < 2 || len(cfg.Settings) == 0 || cfg.LeaveSamples < 1 {
		return nil, fmt.Errorf("rebalance: need partitions ≥ 1, max members ≥ 2, a setting and a leave sample")
	}
	// The CPU clock is the thread's: keep the timed work on one thread.
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	shipped := shard.DefaultRingConfig(cfg.Partitions)
	res := &RingResult{Config: cfg}
	ids := memberIDs(cfg.MaxMembers)
	for si, s := range cfg.Settings {
		rc := shard.RingConfig{Partitions: cfg.Partitions, ReplicationFactor: s.ReplicationFactor, Load: s.Load, Version: s.Version}
		joins, err := shard.NewAssigner(rc)
		if err != nil {
			return nil, err
		}
		leaves, _ := shard.NewAssigner(rc)
		rnd := rand.New(rand.NewPCG(cfg.Seed, uint64(si)))
		sum := SettingSummary{Setting: s, Shipped: s.ReplicationFactor == shipped.ReplicationFactor && s.Load == shipped.Load && (s.Version == 0 || s.Version == shard.RingVersion)}
		var joinSum, leaveSum float64
		var count int
		var update time.Duration
		prev, err := joins.Ring(ids[:1])
		if err != nil {
			return nil, err
		}
		for n := 1; n < cfg.MaxMembers; n++ {
			progress.Update("rebalance: %v: %d/%d members", s, n+1, cfg.MaxMembers)
			t0 := threadCPU()
			next, err := joins.Ring(ids[:n+1])
			if err != nil {
				return nil, err
			}
			update += threadCPU() - t0
			pt := Point{Setting: s, N: n, Ideal: float64(cfg.Partitions) / float64(n+1), JoinMoved: shard.Moved(prev, next)}
			for range cfg.LeaveSamples {
				leaver := rnd.IntN(n + 1)
				rest := make([]string, 0, n)
				rest = append(rest, ids[:leaver]...)
				rest = append(rest, ids[leaver+1:n+1]...)
				after, err := leaves.Ring(rest)
				if err != nil {
					return nil, err
				}
				pt.LeaveMoved += float64(shard.Moved(next, after)) / float64(cfg.LeaveSamples)
			}
			maxLoad := 0
			for _, l := range next.Loads() {
				maxLoad = max(maxLoad, l)
			}
			pt.MaxOverAvg = float64(maxLoad) / pt.Ideal
			jr, lr := float64(pt.JoinMoved)/pt.Ideal, pt.LeaveMoved/pt.Ideal
			joinSum += jr
			leaveSum += lr
			count++
			sum.JoinMax = max(sum.JoinMax, jr)
			sum.LeaveMax = max(sum.LeaveMax, lr)
			sum.MaxOverAvg = max(sum.MaxOverAvg, pt.MaxOverAvg)
			res.Points = append(res.Points, pt)
			prev = next
		}
		sum.JoinMean, sum.LeaveMean = joinSum/float64(count), leaveSum/float64(count)
		sum.Update = update / time.Duration(count)
		if sum.UpdateLast, sum.Fresh, err = timeLast(ids, rc); err != nil {
			return nil, err
		}
		res.Settings = append(res.Settings, sum)
		progress.Step("rebalance: %-22v join moved/ideal mean %.2f max %.2f, leave mean %.2f max %.2f, max/avg load ≤ %.2f, update %.2f ms (last %.2f), fresh %.1f ms",
			s, sum.JoinMean, sum.JoinMax, sum.LeaveMean, sum.LeaveMax, sum.MaxOverAvg, bench.Ms(sum.Update), bench.Ms(sum.UpdateLast), bench.Ms(sum.Fresh))
	}
	return res, nil
}

// timeLast times the last join's update (from len(ids)-1 to len(ids)
// members) and the fresh ring of len(ids) members, in thread CPU time,
// each the mean of repeats.
func timeLast(ids []string, rc shard.RingConfig) (update, fresh time.Duration, err error) {
	a, err := shard.NewAssigner(rc)
	if err != nil {
		return 0, 0, err
	}
	for range repeats {
		if _, err := a.Ring(ids[:len(ids)-1]); err != nil {
			return 0, 0, err
		}
		t0 := threadCPU()
		if _, err := a.Ring(ids); err != nil {
			return 0, 0, err
		}
		update += threadCPU() - t0
		t0 = threadCPU()
		if _, err := shard.NewRing(ids, rc); err != nil {
			return 0, 0, err
		}
		fresh += threadCPU() - t0
	}
	return update / repeats, fresh / repeats, nil
}
