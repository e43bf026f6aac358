package shard

import (
	"fmt"
	"math"
	"slices"

	"github.com/buraksezer/consistent"
	"github.com/cespare/xxhash/v2"
)

// MaxPartitions is the largest partition count a cluster may be created
// with.
const MaxPartitions = 65536

// DefaultPartitions is the partition count of a new cluster when none is
// given.
const DefaultPartitions = 1024

// Partition returns the partition of jobID among p partitions:
// Hash(jobID) mod p. p must be positive.
func Partition(jobID string, p int) int {
	return int(Hash(jobID) % uint64(p))
}

// Hash returns the hash that places jobID in a partition: xxhash64 of its
// bytes.
func Hash(jobID string) uint64 { return xxhash.Sum64String(jobID) }

// RingConfig configures the assignment ring.
type RingConfig struct {
	// Partitions is P, the number of partitions; 1..MaxPartitions.
	Partitions int
	// ReplicationFactor is the number of virtual nodes per member on the
	// hash ring; more gives smoother placement and costs memory. Default 50.
	ReplicationFactor int
	// Load is the bounded-load factor: with n members no member is
	// assigned more than max(ceil(P/n), floor(Load × P/n)) partitions.
	// 1 balances perfectly and moves the most partitions on a membership
	// change; larger values move fewer. 1..10, default 1.25.
	Load float64
}

// DefaultRingConfig returns the shipped ring settings for p partitions.
// bench/ measures movement and balance for these and the alternatives.
func DefaultRingConfig(p int) RingConfig {
	return RingConfig{Partitions: p, ReplicationFactor: 50, Load: 1.25}
}

// Validate checks the ring settings. Bad settings would make the consistent
// library panic, so they are refused here.
func (c RingConfig) Validate() error {
	switch {
	case c.Partitions < 1 || c.Partitions > MaxPartitions:
		return fmt.Errorf("%w: partitions %d outside 1..%d", ErrInvalidConfig, c.Partitions, MaxPartitions)
	case c.ReplicationFactor < 1 || c.ReplicationFactor > 1000:
		return fmt.Errorf("%w: replication factor %d outside 1..1000", ErrInvalidConfig, c.ReplicationFactor)
	case !(c.Load >= 1 && c.Load <= 10):
		return fmt.Errorf("%w: load factor %v outside [1, 10]", ErrInvalidConfig, c.Load)
	}
	return nil
}

// Ring is the partition → member assignment for one member set, computed
// with consistent hashing with bounded loads (Mirrokni, Thorup and
// Zadimoghaddam, "Consistent Hashing with Bounded Loads", 2016, as
// implemented by github.com/buraksezer/consistent). Every member computes
// the same Ring from the same member set, whatever the order it learns of
// them in. A Ring is immutable and safe for concurrent use.
//
// If there are more members than partitions, only the first P member IDs in
// sorted order take part; the others stand by with no partitions.
type Ring struct {
	cfg     RingConfig
	members []string // sorted, the ones that take part
	target  []string // target[p] is partition p's member; "" with no members
}

type ringMember string

func (m ringMember) String() string { return string(m) }

type hasher struct{}

func (hasher) Sum64(b []byte) uint64 { return xxhash.Sum64(b) }

// NewRing computes the assignment of cfg.Partitions partitions to members.
// Duplicate and empty IDs are ignored. It returns ErrInvalidConfig for bad
// settings.
func NewRing(members []string, cfg RingConfig) (*Ring, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	ids := slices.Clone(members)
	slices.Sort(ids)
	ids = slices.Compact(ids)
	if len(ids) > 0 && ids[0] == "" {
		ids = ids[1:]
	}
	if len(ids) > cfg.Partitions {
		ids = ids[:cfg.Partitions]
	}
	r := &Ring{cfg: cfg, members: ids, target: make([]string, cfg.Partitions)}
	if len(ids) == 0 {
		return r, nil
	}
	cms := make([]consistent.Member, len(ids))
	for i, id := range ids {
		cms[i] = ringMember(id)
	}
	c := consistent.New(cms, consistent.Config{
		Hasher:            hasher{},
		PartitionCount:    cfg.Partitions,
		ReplicationFactor: cfg.ReplicationFactor,
		Load:              libraryLoad(cfg.Partitions, len(ids), cfg.Load),
	})
	for p := range r.target {
		r.target[p] = c.GetPartitionOwner(p).String()
	}
	return r, nil
}

// libraryLoad converts our bound into the consistent library's load factor.
// The library caps each member at ceil(floor(P/n) × load); we want the cap
// to be exactly max(ceil(P/n), floor(bound × P/n)). Solving for load with a
// half-unit margin against rounding gives (cap - 0.5) / floor(P/n). The
// total cap n × cap is never below P, so the library cannot run out of room
// (it panics if it does). Requires 1 ≤ n ≤ P.
func libraryLoad(p, n int, bound float64) float64 {
	k := p / n
	limit := max((p+n-1)/n, int(math.Floor(bound*float64(p)/float64(n))))
	return (float64(limit) - 0.5) / float64(k)
}

// Partitions returns P.
func (r *Ring) Partitions() int { return r.cfg.Partitions }

// Members returns the member IDs that take part, sorted.
func (r *Ring) Members() []string { return slices.Clone(r.members) }

// Target returns the member that should own partition p, or "" if the ring
// has no members.
func (r *Ring) Target(p int) string { return r.target[p] }

// Targets returns the partitions member id should own, ascending.
func (r *Ring) Targets(id string) []int {
	var ps []int
	for p, m := range r.target {
		if m == id {
			ps = append(ps, p)
		}
	}
	return ps
}

// Loads returns the number of partitions per member.
func (r *Ring) Loads() map[string]int {
	loads := make(map[string]int, len(r.members))
	for _, m := range r.members {
		loads[m] = 0
	}
	for _, m := range r.target {
		if m != "" {
			loads[m]++
		}
	}
	return loads
}

// Moved returns how many partitions have a different target in b than in a.
// Both rings must have the same partition count.
func Moved(a, b *Ring) int {
	n := 0
	for p := range a.target {
		if a.target[p] != b.target[p] {
			n++
		}
	}
	return n
}
