package shard_test

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"pgregory.net/rapid"

	"github.com/jobfleet/jobfleet/shard"
)

func memberIDs(n int) []string {
	ids := make([]string, n)
	for i := range ids {
		ids[i] = fmt.Sprintf("orchestrator-%d", i+1)
	}
	return ids
}

func TestPartitionIsStableAndInRange(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		id := rapid.String().Draw(t, "job_id")
		p := rapid.IntRange(1, shard.MaxPartitions).Draw(t, "partitions")
		got := shard.Partition(id, p)
		if got < 0 || got >= p {
			t.Fatalf("Partition(%q, %d) = %d, want in [0, %d)", id, p, got, p)
		}
		if again := shard.Partition(id, p); again != got {
			t.Fatalf("Partition(%q, %d) = %d then %d", id, p, got, again)
		}
	})
}

func TestPartitionKnownValues(t *testing.T) {
	// xxhash64("") = 0xef46db3751d8e999; pin the formula so a change of
	// hash or reduction (which would move every job) cannot go unnoticed.
	tests := []struct {
		id   string
		p    int
		want int
	}{
		{"", 256, 0x99},
		{"", 1, 0},
	}
	for _, tt := range tests {
		if got := shard.Partition(tt.id, tt.p); got != tt.want {
			t.Errorf("Partition(%q, %d) = %d, want %d", tt.id, tt.p, got, tt.want)
		}
	}
}

func TestRingIsIndependentOfMemberOrder(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		n := rapid.IntRange(1, 40).Draw(t, "members")
		p := rapid.SampledFrom([]int{16, 64, 256, 271, 1024}).Draw(t, "partitions")
		ids := memberIDs(n)
		shuffled := append([]string(nil), ids...)
		seed := rapid.Uint64().Draw(t, "seed")
		rand.New(rand.NewPCG(seed, seed)).Shuffle(len(shuffled), func(i, j int) { shuffled[i], shuffled[j] = shuffled[j], shuffled[i] })
		a, err := shard.NewRing(ids, shard.DefaultRingConfig(p))
		if err != nil {
			t.Fatal(err)
		}
		b, err := shard.NewRing(shuffled, shard.DefaultRingConfig(p))
		if err != nil {
			t.Fatal(err)
		}
		if moved := shard.Moved(a, b); moved != 0 {
			t.Fatalf("same members in another order: %d partitions differ, want 0", moved)
		}
	})
}

func TestRingBoundsLoad(t *testing.T) {
	for _, p := range []int{64, 256, 1024} {
		for n := 1; n <= 64 && n <= p; n++ {
			r, err := shard.NewRing(memberIDs(n), shard.DefaultRingConfig(p))
			if err != nil {
				t.Fatal(err)
			}
			total, maxLoad := 0, 0
			for _, l := range r.Loads() {
				total += l
				maxLoad = max(maxLoad, l)
			}
			if total != p {
				t.Fatalf("P=%d n=%d: loads sum to %d, want %d", p, n, total, p)
			}
			avg := float64(p) / float64(n)
			// Integer loads cannot meet 1.25×avg when avg is small; the
			// bound then is ceil(avg).
			bound := math.Max(1.25*avg, math.Ceil(avg))
			if float64(maxLoad) > bound {
				t.Errorf("P=%d n=%d: max load %d > bound %.2f (avg %.2f)", p, n, maxLoad, bound, avg)
			}
		}
	}
}

func TestRingMovementOnJoin(t *testing.T) {
	p := shard.DefaultPartitions
	var sum float64
	const maxN = 64
	for n := 1; n < maxN; n++ {
		before, _ := shard.NewRing(memberIDs(n), shard.DefaultRingConfig(p))
		after, _ := shard.NewRing(memberIDs(n+1), shard.DefaultRingConfig(p))
		moved := shard.Moved(before, after)
		ideal := float64(p) / float64(n+1)
		ratio := float64(moved) / ideal
		sum += ratio
		// A join must move at least the newcomer's share to it, and
		// bounded loads keep the rest within a small factor of the ideal.
		newcomer := after.Loads()[memberIDs(n + 1)[n]]
		if moved < newcomer {
			t.Errorf("join %d→%d: moved %d < newcomer's load %d", n, n+1, moved, newcomer)
		}
		if ratio > 3 {
			t.Errorf("join %d→%d: moved %d partitions, %.2f× the ideal %.1f", n, n+1, moved, ratio, ideal)
		}
	}
	t.Logf("P=%d: mean movement %.2f× the ideal P/(n+1) over joins 1→2 … %d→%d", p, sum/float64(maxN-1), maxN-1, maxN)
	if mean := sum / float64(maxN-1); mean > 2 {
		t.Errorf("mean movement %.2f× the ideal, want ≤ 2", mean)
	}
}

func TestRingMoreMembersThanPartitions(t *testing.T) {
	r, err := shard.NewRing(memberIDs(10), shard.DefaultRingConfig(4))
	if err != nil {
		t.Fatal(err)
	}
	if got := len(r.Members()); got != 4 {
		t.Fatalf("members taking part = %d, want 4", got)
	}
	for p := range 4 {
		if r.Target(p) == "" {
			t.Errorf("partition %d has no target", p)
		}
	}
}

func TestRingConfigValidate(t *testing.T) {
	tests := []struct {
		name string
		cfg  shard.RingConfig
		ok   bool
	}{
		{"default", shard.DefaultRingConfig(256), true},
		{"zero partitions", shard.RingConfig{Partitions: 0, ReplicationFactor: 20, Load: 1.2}, false},
		{"too many partitions", shard.RingConfig{Partitions: shard.MaxPartitions + 1, ReplicationFactor: 20, Load: 1.2}, false},
		{"perfect balance", shard.RingConfig{Partitions: 256, ReplicationFactor: 20, Load: 1}, true},
		{"load below 1", shard.RingConfig{Partitions: 256, ReplicationFactor: 20, Load: 0.9}, false},
		{"no replicas", shard.RingConfig{Partitions: 256, ReplicationFactor: 0, Load: 1.2}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.cfg.Validate()
			if (err == nil) != tt.ok {
				t.Fatalf("Validate() = %v, want ok=%v", err, tt.ok)
			}
			if _, err := shard.NewRing(memberIDs(3), tt.cfg); (err == nil) != tt.ok {
				t.Fatalf("NewRing() = %v, want ok=%v", err, tt.ok)
			}
		})
	}
}
