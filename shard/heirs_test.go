package shard

import (
	"fmt"
	"testing"
)

// TestHeirsAreTheNextOwners: for every partition of every member X of
// rings of 1 to 8 members, exactly one other member counts it among its
// heirs, and it is the member the ring without X gives it to.
func TestHeirsAreTheNextOwners(t *testing.T) {
	cfg := DefaultRingConfig(256)
	for n := 1; n <= 8; n++ {
		var ids []string
		for i := range n {
			ids = append(ids, fmt.Sprintf("m-%d", i))
		}
		r, err := NewRing(ids, cfg)
		if err != nil {
			t.Fatal(err)
		}
		heirOf := map[int][]string{}
		for _, id := range ids {
			h, err := r.Heirs(id)
			if err != nil {
				t.Fatal(err)
			}
			for p, x := range h {
				if x != r.Target(p) || x == id {
					t.Fatalf("%d members: %s inherits partition %d from %s, whose target is %s", n, id, p, x, r.Target(p))
				}
				heirOf[p] = append(heirOf[p], id)
			}
		}
		for p := range cfg.Partitions {
			x := r.Target(p)
			if n == 1 {
				if len(heirOf[p]) != 0 {
					t.Fatalf("a lone member has heirs %v of partition %d", heirOf[p], p)
				}
				continue
			}
			var rest []string
			for _, id := range ids {
				if id != x {
					rest = append(rest, id)
				}
			}
			without, err := NewRing(rest, cfg)
			if err != nil {
				t.Fatal(err)
			}
			if want := without.Target(p); len(heirOf[p]) != 1 || heirOf[p][0] != want {
				t.Fatalf("%d members: partition %d of %s has heirs %v, want [%s]", n, p, x, heirOf[p], want)
			}
		}
	}
	if h, _ := (&Ring{}).Heirs("m-0"); len(h) != 0 {
		t.Fatalf("empty ring: heirs %v", h)
	}
}

// BenchmarkHeirs: the heirs of one member of 8 and of 64, default ring.
func BenchmarkHeirs(b *testing.B) {
	for _, n := range []int{3, 8, 64} {
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			var ids []string
			for i := range n {
				ids = append(ids, fmt.Sprintf("m-%d", i))
			}
			r, err := NewRing(ids, DefaultRingConfig(DefaultPartitions))
			if err != nil {
				b.Fatal(err)
			}
			for b.Loop() {
				if _, err := r.Heirs(ids[0]); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
