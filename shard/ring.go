package shard

import (
	"container/heap"
	"fmt"
	"math"
	"slices"
	"sync"

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

// mix64 is SplitMix64's finalizer: a bijection on uint64 that spreads
// every input bit over the output.
func mix64(x uint64) uint64 {
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	return x ^ (x >> 31)
}

// claim is a partition held by a member, ordered by how much the member
// wants it: natural partitions first, then by score, then by partition.
type claim struct {
	part    int32
	natural bool
	score   uint64
}

func (a claim) less(b claim) bool {
	if a.natural != b.natural {
		return !a.natural
	}
	if a.score != b.score {
		return a.score < b.score
	}
	return a.part > b.part
}

// held is a member's claims, least wanted on top.
type held []claim

func (h held) Len() int           { return len(h) }
func (h held) Less(i, j int) bool { return h[i].less(h[j]) }
func (h held) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *held) Push(x any)        { *h = append(*h, x.(claim)) }
func (h *held) Pop() any {
	old := *h
	c := old[len(old)-1]
	*h = old[:len(old)-1]
	return c
}

// bound returns the partition-optimal stable matching of partitions to
// members with at most limit partitions each. Partition p prefers its
// natural member, then the others by descending score(m, p); member m
// prefers its natural partitions, then higher scores. The matching is
// unique, so the order partitions are processed in does not change it.
// Requires len(ids) × limit ≥ len(natural).
func bound(ids []string, natural []int32, limit int) ([]int32, error) {
	n, p := len(ids), len(natural)
	seeds := make([]uint64, n)
	for i, id := range ids {
		seeds[i] = xxhash.Sum64String(id)
	}
	score := func(m int32, part int32) uint64 { return mix64(seeds[m] ^ mix64(uint64(part))) }

	// last[part] is the member part proposed to last and its score
	// there; proposals go down part's preference list from it.
	type proposal struct {
		member int32
		score  uint64
	}
	last := make([]proposal, p)
	holds := make([]held, n)
	free := make([]int32, 0, p)
	for part := p - 1; part >= 0; part-- {
		free = append(free, int32(part))
		last[part].member = -1
	}
	for len(free) > 0 {
		part := free[len(free)-1]
		free = free[:len(free)-1]
		m := natural[part]
		if prev := last[part]; prev.member >= 0 {
			// The next member after prev in descending (score, member)
			// order, natural member excluded: a scan is cheaper than
			// sorting, as few partitions are rejected more than once.
			m = -1
			var best uint64
			for i := range int32(n) {
				if i == natural[part] {
					continue
				}
				s := score(i, part)
				after := prev.member == natural[part] || s < prev.score || (s == prev.score && i > prev.member)
				if after && (m < 0 || s > best || (s == best && i < m)) {
					m, best = i, s
				}
			}
			if m < 0 { // cannot happen while n × limit ≥ p
				return nil, fmt.Errorf("shard: no member has room for partition %d (limit %d, %d members)", part, limit, n)
			}
		}
		c := claim{part: part, natural: m == natural[part], score: score(m, part)}
		last[part] = proposal{member: m, score: c.score}
		heap.Push(&holds[m], c)
		if holds[m].Len() > limit {
			free = append(free, heap.Pop(&holds[m]).(claim).part)
		}
	}
	owner := make([]int32, p)
	for m, h := range holds {
		for _, c := range h {
			owner[c.part] = int32(m)
		}
	}
	return owner, nil
}

// Assigner computes Rings for the successive member sets of one cluster.
// It keeps the previous set's hash ring and updates it with the library's
// Add and Remove, which costs a fraction of building it afresh when a few
// members join or leave (the library sorts the whole ring once per member
// added); it returns the previous Ring when the set has not changed. The
// result is always the Ring NewRing computes for the same set and config.
// Safe for concurrent use.
type Assigner struct {
	cfg RingConfig

	mu   sync.Mutex             // guards the fields below
	hr   *consistent.Consistent // hash ring of ids; nil when ids has fewer than two members
	ids  []string               // members on hr, sorted
	last *Ring                  // the ring of ids; nil before the first call
}

// NewAssigner returns an Assigner for cfg, or ErrInvalidConfig.
func NewAssigner(cfg RingConfig) (*Assigner, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return &Assigner{cfg: cfg}, nil
}

// Config returns the ring settings.
func (a *Assigner) Config() RingConfig { return a.cfg }

// Ring returns the Ring of members, as NewRing(members, a.Config()) would.
func (a *Assigner) Ring(members []string) (*Ring, error) {
	ids := participants(members, a.cfg.Partitions)
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.last != nil && slices.Equal(ids, a.ids) {
		return a.last, nil
	}
	if a.cfg.version() == 1 {
		a.ids, a.last = ids, legacyRing(ids, a.cfg)
		return a.last, nil
	}
	switch {
	case !usesHashRing(len(ids)):
		a.hr = nil
	case a.hr == nil:
		a.hr = newHashRing(ids, a.cfg)
	default:
		added, removed := diff(a.ids, ids)
		switch {
		case len(added)+len(removed) > len(ids)/2:
			// Each Add sorts the whole ring: past this point a fresh
			// build is as cheap.
			a.hr = newHashRing(ids, a.cfg)
		case len(a.ids)-len(removed) >= 2:
			// Removes first: the ring never holds more than P members
			// (the library's bound needs P/n ≥ 1) nor fewer than two
			// (it cannot place partitions on one virtual node).
			for _, id := range removed {
				a.hr.Remove(string(ringKey(id)))
			}
			for _, id := range added {
				a.hr.Add(ringKey(id))
			}
		case len(a.ids)+len(added) <= a.cfg.Partitions:
			for _, id := range added {
				a.hr.Add(ringKey(id))
			}
			for _, id := range removed {
				a.hr.Remove(string(ringKey(id)))
			}
		default:
			a.hr = newHashRing(ids, a.cfg)
		}
	}
	r, err := assign(ids, a.hr, a.cfg)
	if err != nil {
		a.hr, a.ids, a.last = nil, nil, nil
		return nil, err
	}
	a.ids, a.last = ids, r
	return r, nil
}

// diff returns the IDs in b and not in a, and in a and not in b; both
// sorted.
func diff(a, b []string) (added, removed []string) {
	i, j := 0, 0
	for i < len(a) || j < len(b) {
		switch {
		case j == len(b) || (i < len(a) && a[i] < b[j]):
			removed = append(removed, a[i])
			i++
		case i == len(a) || b[j] < a[i]:
			added = append(added, b[j])
			j++
		default:
			i++
			j++
		}
	}
	return added, removed
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
