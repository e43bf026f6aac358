// Package rebalance measures how well the assignment ring spreads and
// moves partitions, and how long partitions go without an owner when
// membership changes on a real etcd.
//
// The ring part is pure and fast: for n = 1..MaxMembers members and P
// partitions, it counts the partitions whose target changes when a member
// joins (n → n+1) and when a random member leaves (n+1 → n), against the
// ideal P/(n+1) that any scheme must move, and the largest member's load
// against the average, for several ring settings (virtual nodes per
// member, load bound) next to the shipped ones (shard.DefaultRingConfig).
//
// The measured part (Gaps) runs real orchestrators in this process on an
// embedded etcd and records, with a watch on the owner keys, the time each
// partition spends without an owner key on a graceful join, a graceful
// leave and a crash, over many repetitions.
package rebalance

import (
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/jobfleet/jobfleet/bench"
	"github.com/jobfleet/jobfleet/shard"
)

// Setting is one ring setting to compare.
type Setting struct {
	ReplicationFactor int     `json:"replication_factor"`
	Load              float64 `json:"load"`
}

func (s Setting) String() string { return fmt.Sprintf("RF %d, load %.2f", s.ReplicationFactor, s.Load) }

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

// DefaultRingConfig compares replication factors 20, 50, 100 and load
// bounds 1.1, 1.25, 1.5 for the default P and 1..64 members.
func DefaultRingConfig() RingConfig {
	var ss []Setting
	for _, rf := range []int{20, 50, 100} {
		for _, l := range []float64{1.1, 1.25, 1.5} {
			ss = append(ss, Setting{rf, l})
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
	// RingTime is the mean time to compute one ring, over 2..MaxMembers
	// members.
	RingTime time.Duration `json:"ring_time_ns"`
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

// AnalyzeRings runs the pure analysis.
func AnalyzeRings(cfg RingConfig, progress *bench.Progress) (*RingResult, error) {
	if cfg.Partitions < 1 || cfg.MaxMembers < 2 || len(cfg.Settings) == 0 || cfg.LeaveSamples < 1 {
		return nil, fmt.Errorf("rebalance: need partitions ≥ 1, max members ≥ 2, a setting and a leave sample")
	}
	shipped := shard.DefaultRingConfig(cfg.Partitions)
	res := &RingResult{Config: cfg}
	ids := memberIDs(cfg.MaxMembers)
	for si, s := range cfg.Settings {
		rc := shard.RingConfig{Partitions: cfg.Partitions, ReplicationFactor: s.ReplicationFactor, Load: s.Load}
		rnd := rand.New(rand.NewPCG(cfg.Seed, uint64(si)))
		sum := SettingSummary{Setting: s, Shipped: s.ReplicationFactor == shipped.ReplicationFactor && s.Load == shipped.Load}
		var joinSum, leaveSum float64
		var count int
		var ringTime time.Duration
		var rings int
		prev, err := shard.NewRing(ids[:1], rc)
		if err != nil {
			return nil, err
		}
		for n := 1; n < cfg.MaxMembers; n++ {
			progress.Update("rebalance: %v: %d/%d members", s, n+1, cfg.MaxMembers)
			t0 := time.Now()
			next, err := shard.NewRing(ids[:n+1], rc)
			if err != nil {
				return nil, err
			}
			ringTime += time.Since(t0)
			rings++
			pt := Point{Setting: s, N: n, Ideal: float64(cfg.Partitions) / float64(n+1), JoinMoved: shard.Moved(prev, next)}
			for range cfg.LeaveSamples {
				leaver := rnd.IntN(n + 1)
				rest := make([]string, 0, n)
				rest = append(rest, ids[:leaver]...)
				rest = append(rest, ids[leaver+1:n+1]...)
				after, err := shard.NewRing(rest, rc)
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
		sum.RingTime = ringTime / time.Duration(rings)
		res.Settings = append(res.Settings, sum)
		progress.Step("rebalance: %-18v join moved/ideal mean %.2f max %.2f, leave mean %.2f max %.2f, max/avg load ≤ %.2f",
			s, sum.JoinMean, sum.JoinMax, sum.LeaveMean, sum.LeaveMax, sum.MaxOverAvg)
	}
	return res, nil
}
