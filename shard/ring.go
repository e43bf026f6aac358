package shard

import (
	"fmt"
	"slices"

	"github.com/buraksezer/consistent"
	"github.com/cespare/xxhash/v2"
)

// Ring is the partition → member assignment for one member set. It is a
// pure function of the member set and the RingConfig: every member
// computes the same Ring from the same set, whatever the order it learns of
// them in, and whether it computes it afresh (NewRing) or from the
// previous set (Assigner). A Ring is immutable and safe for concurrent use.
//
// The assignment is consistent hashing with bounded loads in two steps.
// First the hash ring (github.com/buraksezer/consistent, ReplicationFactor
// virtual nodes per member, no load bound) gives each partition its natural
// member, the one whose virtual node follows the partition's hash; a
// membership change moves only the partitions whose natural member
// changes. Then the bound is applied as a stable matching (deferred
// acceptance, which has one result whatever order it runs in): each
// member keeps at most limit partitions, preferring its natural ones and
// among them those with the highest score xxhash(member, partition), so
// a member over the bound sheds the same partitions each time; a shed
// partition goes to the member with the highest score for it that has
// room, displacing a lower-scored shed partition if need be. Nothing moves
// that the natural placement and the bound do not force.
//
// If there are more members than partitions, only the first P member IDs in
// sorted order take part; the others stand by with no partitions.
type Ring struct {
	cfg     RingConfig
	members []string // sorted, the ones that take part
	target  []string // target[p] is partition p's member; "" with no members
}

// ringMember is a member on the consistent library's ring. The library
// names virtual node i of a member String()+decimal(i), so the ID carries
// a '/' terminator (member IDs hold none) to keep every virtual node name
// unique: without it "m-1" + "10" and "m-11" + "0" are the same node, and
// which member holds it would depend on the order they were added in.
type ringMember string

func (m ringMember) String() string { return string(m) }

func ringKey(id string) ringMember { return ringMember(id + "/") }

type hasher struct{}

func (hasher) Sum64(b []byte) uint64 { return xxhash.Sum64(b) }

// participants returns the sorted, de-duplicated, non-empty IDs that take
// part: at most p of them.
func participants(members []string, p int) []string {
	ids := slices.Clone(members)
	slices.Sort(ids)
	ids = slices.Compact(ids)
	if len(ids) > 0 && ids[0] == "" {
		ids = ids[1:]
	}
	if len(ids) > p {
		ids = ids[:p]
	}
	return ids
}

// newHashRing builds the library's ring of ids with no load bound: Load P
// makes the library's cap ceil(floor(P/n) × P) ≥ P, so every partition
// stays with its natural member. Requires 2 ≤ len(ids) ≤ P (the library
// panics on a ring of one virtual node, and on P/n < 1).
func newHashRing(ids []string, cfg RingConfig) *consistent.Consistent {
	cms := make([]consistent.Member, len(ids))
	for i, id := range ids {
		cms[i] = ringKey(id)
	}
	return consistent.New(cms, consistent.Config{
		Hasher:            hasher{},
		PartitionCount:    cfg.Partitions,
		ReplicationFactor: cfg.ReplicationFactor,
		Load:              float64(cfg.Partitions),
	})
}

// usesHashRing reports whether n members need the library's ring: a
// single member owns everything, and the library cannot hold a ring of
// one virtual node.
func usesHashRing(n int) bool { return n >= 2 }

// NewRing computes the assignment of cfg.Partitions partitions to members
// afresh. Duplicate and empty IDs are ignored. It returns ErrInvalidConfig
// for bad settings. An Assigner computes the same Ring faster when the
// member set changes by a few members at a time.
func NewRing(members []string, cfg RingConfig) (*Ring, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	ids := participants(members, cfg.Partitions)
	if cfg.version() == 1 {
		return legacyRing(ids, cfg), nil
	}
	var hr *consistent.Consistent
	if usesHashRing(len(ids)) {
		hr = newHashRing(ids, cfg)
	}
	return assign(ids, hr, cfg)
}

// assign applies the load bound to the natural placement of hr (nil for
// fewer than two members).
func assign(ids []string, hr *consistent.Consistent, cfg RingConfig) (*Ring, error) {
	p := cfg.Partitions
	r := &Ring{cfg: cfg, members: ids, target: make([]string, p)}
	switch len(ids) {
	case 0:
		return r, nil
	case 1:
		for i := range r.target {
			r.target[i] = ids[0]
		}
		return r, nil
	}
	index := make(map[string]int32, len(ids))
	for i, id := range ids {
		index[string(ringKey(id))] = int32(i)
	}
	natural := make([]int32, p)
	for i := range natural {
		m := hr.GetPartitionOwner(i)
		if m == nil {
			return nil, fmt.Errorf("shard: ring has no member for partition %d", i)
		}
		idx, ok := index[m.String()]
		if !ok {
			return nil, fmt.Errorf("shard: ring member %q is not in the member set", m.String())
		}
		natural[i] = idx
	}
	owner, err := bound(ids, natural, cfg.limit(len(ids)))
	if err != nil {
		return nil, err
	}
	for i, m := range owner {
		r.target[i] = ids[m]
	}
	return r, nil
}

// legacyRing is ring version 1: the consistent library's own bounded
// loads, with virtual nodes named by the bare ID.
func legacyRing(ids []string, cfg RingConfig) *Ring {
	r := &Ring{cfg: cfg, members: ids, target: make([]string, cfg.Partitions)}
	if len(ids) == 0 {
		return r
	}
	cms := make([]consistent.Member, len(ids))
	for i, id := range ids {
		cms[i] = ringMember(id)
	}
	c := consistent.New(cms, consistent.Config{
		Hasher:            hasher{},
		PartitionCount:    cfg.Partitions,
		ReplicationFactor: cfg.ReplicationFactor,
		Load:              legacyLoad(cfg.Partitions, len(ids), cfg.Load),
	})
	for p := range r.target {
		r.target[p] = c.GetPartitionOwner(p).String()
	}
	return r
}

// legacyLoad converts the bound into the consistent library's load factor.
// The library caps each member at ceil(floor(P/n) × load); the cap wanted
// is limit(n). Solving for load with a half-unit margin against rounding
// gives (limit - 0.5) / floor(P/n). Requires 1 ≤ n ≤ P.
func legacyLoad(p, n int, bound float64) float64 {
	limit := RingConfig{Partitions: p, Load: bound}.limit(n)
	return (float64(limit) - 0.5) / float64(p/n)
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
