package shard_test

import (
	"fmt"
	"maps"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/cespare/xxhash/v2"
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
	skipUnderRace(t)
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
	skipUnderRace(t)
	for _, p := range []int{64, 256, 1024} {
		for n := 1; n <= 64 && n <= p; n++ {
			r, err := shard.NewRing(memberIDs(n), shard.DefaultRingConfig(p))
			if err != nil {
				t.Fatal(err)
			}
			checkRing(t, r, memberIDs(n), shard.DefaultRingConfig(p))
			maxLoad := 0
			for _, l := range r.Loads() {
				maxLoad = max(maxLoad, l)
			}
			// Integer loads cannot meet 1.25×avg when avg is small; the
			// bound then is ceil(avg).
			avg := float64(p) / float64(n)
			if bound := math.Max(1.25*avg, math.Ceil(avg)); float64(maxLoad) > bound {
				t.Errorf("P=%d n=%d: max load %d > bound %.2f (avg %.2f)", p, n, maxLoad, bound, avg)
			}
		}
	}
}

// checkRing checks what every ring of members must satisfy: every
// partition has a target among the members taking part (none if there are
// no members), and no member is above the load bound.
func checkRing(t interface {
	Helper()
	Fatalf(string, ...any)
}, r *shard.Ring, members []string, cfg shard.RingConfig) {
	t.Helper()
	in := map[string]bool{}
	for _, m := range members {
		if m != "" {
			in[m] = true
		}
	}
	n := min(len(in), cfg.Partitions)
	if got := len(r.Members()); got != n {
		t.Fatalf("%d members take part, want %d", got, n)
	}
	total := 0
	for p := range cfg.Partitions {
		m := r.Target(p)
		if n == 0 {
			if m != "" {
				t.Fatalf("partition %d targets %q with no members", p, m)
			}
			continue
		}
		if !in[m] {
			t.Fatalf("partition %d targets %q, not a member", p, m)
		}
		total++
	}
	if n == 0 {
		return
	}
	limit := max((cfg.Partitions+n-1)/n, int(math.Floor(cfg.Load*float64(cfg.Partitions)/float64(n))))
	sum := 0
	for m, l := range r.Loads() {
		sum += l
		if l > limit {
			t.Fatalf("member %s has %d partitions, above the bound %d (P=%d, n=%d, load %v)", m, l, limit, cfg.Partitions, n, cfg.Load)
		}
	}
	if sum != cfg.Partitions || total != cfg.Partitions {
		t.Fatalf("loads sum to %d, want %d", sum, cfg.Partitions)
	}
}

func TestRingMovementOnJoin(t *testing.T) {
	skipUnderRace(t)
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
		if ratio > 2.25 {
			t.Errorf("join %d→%d: moved %d partitions, %.2f× the ideal %.1f", n, n+1, moved, ratio, ideal)
		}
	}
	t.Logf("P=%d: mean movement %.2f× the ideal P/(n+1) over joins 1→2 … %d→%d", p, sum/float64(maxN-1), maxN-1, maxN)
	if mean := sum / float64(maxN-1); mean > 1.15 {
		t.Errorf("mean movement %.2f× the ideal, want ≤ 1.15", mean)
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

// TestAssignerMatchesNewRing drives an Assigner through random joins,
// leaves and replacements of the whole set and checks that each ring it
// returns is the one NewRing computes afresh for the same set. The ID pool
// holds names whose virtual node names would collide if the library's
// naming (ID followed by the node's number) were used as is: "m-1" node 10
// and "m-11" node 0.
func TestAssignerMatchesNewRing(t *testing.T) {
	pool := []string{"m-1", "m-11", "m-111", "m-2", "m-21", "m-3", "orchestrator-1", "orchestrator-10", "orchestrator-2", "a", "a1", "b:2", "c.3_x", ""}
	rapid.Check(t, func(t *rapid.T) {
		cfg := shard.RingConfig{
			Partitions:        rapid.SampledFrom([]int{1, 2, 3, 7, 16, 64, 257, 1024}).Draw(t, "partitions"),
			ReplicationFactor: rapid.IntRange(1, 60).Draw(t, "replication_factor"),
			Load:              rapid.Float64Range(1, 2).Draw(t, "load"),
		}
		a, err := shard.NewAssigner(cfg)
		if err != nil {
			t.Fatal(err)
		}
		set := map[string]bool{}
		steps := rapid.IntRange(1, 25).Draw(t, "steps")
		for range steps {
			switch rapid.IntRange(0, 9).Draw(t, "op") {
			case 0: // replace the whole set
				set = map[string]bool{}
				for _, id := range rapid.SliceOfDistinct(rapid.SampledFrom(pool), rapid.ID).Draw(t, "set") {
					set[id] = true
				}
			case 1, 2, 3, 4, 5: // join
				set[rapid.SampledFrom(pool).Draw(t, "join")] = true
			default: // leave
				if len(set) > 0 {
					ids := slices.Sorted(maps.Keys(set))
					delete(set, rapid.SampledFrom(ids).Draw(t, "leave"))
				}
			}
			members := slices.Collect(maps.Keys(set))
			got, err := a.Ring(members)
			if err != nil {
				t.Fatalf("Assigner.Ring(%v): %v", members, err)
			}
			want, err := shard.NewRing(members, cfg)
			if err != nil {
				t.Fatalf("NewRing(%v): %v", members, err)
			}
			if !slices.Equal(got.Members(), want.Members()) {
				t.Fatalf("members %v: Assigner has %v, NewRing %v", members, got.Members(), want.Members())
			}
			if moved := shard.Moved(got, want); moved != 0 {
				t.Fatalf("members %v: Assigner and NewRing differ on %d of %d partitions", want.Members(), moved, cfg.Partitions)
			}
			checkRing(t, got, members, cfg)
		}
	})
}

func TestAssignerLeaveOfPrefixNamedMember(t *testing.T) {
	// "m-1" node 10 and "m-11" node 0 have the same name under the
	// library's naming; removing one of them then dropped the other's node
	// from the ring's index and the next computation dereferenced nil.
	cfg := shard.RingConfig{Partitions: 64, ReplicationFactor: 20, Load: 1.25}
	a, err := shard.NewAssigner(cfg)
	if err != nil {
		t.Fatal(err)
	}
	for _, set := range [][]string{{"m-1", "m-11", "m-2"}, {"m-1", "m-2"}, {"m-1", "m-11", "m-2"}, {"m-11", "m-2"}} {
		got, err := a.Ring(set)
		if err != nil {
			t.Fatal(err)
		}
		want, _ := shard.NewRing(set, cfg)
		if moved := shard.Moved(got, want); moved != 0 {
			t.Fatalf("%v: %d partitions differ from a fresh ring", set, moved)
		}
	}
}

func TestEffectiveRingConfig(t *testing.T) {
	cur := shard.DefaultRingConfig(1024)
	tests := []struct {
		name     string
		versions []int
		legacy   bool
	}{
		{"no members", nil, false},
		{"all current", []int{shard.RingVersion, shard.RingVersion}, false},
		{"one member from before ring versions", []int{shard.RingVersion, 0, shard.RingVersion}, true},
		{"one member of version 1", []int{1, shard.RingVersion}, true},
		{"a newer member", []int{shard.RingVersion, shard.RingVersion + 1}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := shard.EffectiveRingConfig(cur, tt.versions)
			if legacy := got != cur; legacy != tt.legacy {
				t.Fatalf("EffectiveRingConfig(%v) = %+v, want legacy=%v", tt.versions, got, tt.legacy)
			}
			if err := got.Validate(); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// TestRingVersion1IsThePreviousAssignment pins ring version 1 to what
// builds before ring versions computed (sums of their tables), so that
// old and new members agree while a fleet is upgraded.
func TestRingVersion1IsThePreviousAssignment(t *testing.T) {
	tests := []struct {
		p, n int
		sum  uint64
	}{
		{256, 17, 0xc1b5b10dc9748fdb},
		{1024, 3, 0xeed42ae4603c2fb0},
	}
	for _, tt := range tests {
		cfg := shard.EffectiveRingConfig(shard.DefaultRingConfig(tt.p), []int{0})
		r, err := shard.NewRing(memberIDs(tt.n), cfg)
		if err != nil {
			t.Fatal(err)
		}
		targets := make([]string, tt.p)
		for p := range targets {
			targets[p] = r.Target(p)
		}
		if got := xxhash.Sum64String(strings.Join(targets, ",")); got != tt.sum {
			t.Errorf("P=%d n=%d: version 1 table sums to %x, want %x", tt.p, tt.n, got, tt.sum)
		}
	}
}

// skipUnderRace skips an exhaustive test of the ring's arithmetic under the
// race detector: it runs on one goroutine, so the detector has nothing to
// find, and its instrumentation makes the test some twenty times slower.
// test.sh runs these tests without it.
func skipUnderRace(t *testing.T) {
	t.Helper()
	if raceEnabled {
		t.Skip("one goroutine of arithmetic: run without -race (test.sh does)")
	}
}
