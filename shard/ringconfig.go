package shard

import (
	"fmt"
	"math"
)

// RingConfig configures the assignment ring.
type RingConfig struct {
	// Partitions is P, the number of partitions; 1..MaxPartitions.
	Partitions int
	// ReplicationFactor is the number of virtual nodes per member on the
	// hash ring; more gives a more even natural placement and costs
	// computation time and memory. 1..1000, default 100.
	ReplicationFactor int
	// Load is the bounded-load factor: with n members no member is
	// assigned more than max(ceil(P/n), floor(Load × P/n)) partitions.
	// 1 balances perfectly and moves the most partitions on a membership
	// change; larger values move fewer. 1..10, default 1.25.
	Load float64
	// Version selects the assignment: 0 or RingVersion for the current
	// one (see Ring); 1 for the one of builds before version 2 (the
	// consistent library's own bounded loads), which a fleet computes
	// while any member registered without a ring version (see
	// EffectiveRingConfig), so that old and new members agree during a
	// rolling upgrade.
	Version int
}

// RingVersion is the assignment this build computes. Members advertise it
// when they register (membership.Member.Ring).
const RingVersion = 2

// legacyRingConfig is the only setting builds before ring version 2
// shipped.
func legacyRingConfig(p int) RingConfig {
	return RingConfig{Partitions: p, ReplicationFactor: 50, Load: 1.25, Version: 1}
}

// EffectiveRingConfig returns the ring settings a fleet whose members
// advertise the ring versions versions computes with: cfg while every
// member computes cfg's version or a later one, else the settings of the
// oldest version advertised (0 is a member from before ring versions,
// which computes version 1 with the settings it shipped with). Every
// member reaches the same result from the same member view.
func EffectiveRingConfig(cfg RingConfig, versions []int) RingConfig {
	want := cfg.version()
	for _, v := range versions {
		if max(v, 1) < want {
			return legacyRingConfig(cfg.Partitions)
		}
	}
	return cfg
}

func (c RingConfig) version() int {
	if c.Version == 0 {
		return RingVersion
	}
	return c.Version
}

// DefaultRingConfig returns the shipped ring settings for p partitions.
// bench/rebalance measures movement, balance and computation time for
// these and the alternatives (docs/benchmarks.md).
func DefaultRingConfig(p int) RingConfig {
	return RingConfig{Partitions: p, ReplicationFactor: 100, Load: 1.25}
}

// Validate checks the ring settings.
func (c RingConfig) Validate() error {
	switch {
	case c.Partitions < 1 || c.Partitions > MaxPartitions:
		return fmt.Errorf("%w: partitions %d outside 1..%d", ErrInvalidConfig, c.Partitions, MaxPartitions)
	case c.ReplicationFactor < 1 || c.ReplicationFactor > 1000:
		return fmt.Errorf("%w: replication factor %d outside 1..1000", ErrInvalidConfig, c.ReplicationFactor)
	case !(c.Load >= 1 && c.Load <= 10):
		return fmt.Errorf("%w: load factor %v outside [1, 10]", ErrInvalidConfig, c.Load)
	case c.Version < 0 || c.Version > RingVersion:
		return fmt.Errorf("%w: ring version %d outside 0..%d", ErrInvalidConfig, c.Version, RingVersion)
	}
	return nil
}

// limit is the most partitions one of n members may be assigned:
// max(ceil(P/n), floor(Load × P/n)). n × limit ≥ P, so every partition
// finds room. Requires 1 ≤ n ≤ P.
func (c RingConfig) limit(n int) int {
	p := c.Partitions
	return max((p+n-1)/n, int(math.Floor(c.Load*float64(p)/float64(n))))
}
