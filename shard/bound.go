package shard

import (
	"container/heap"
	"fmt"

	"github.com/cespare/xxhash/v2"
)

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
