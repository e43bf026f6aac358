package shard_test

import (
	"fmt"

	"github.com/jobfleet/jobfleet/shard"
)

func ExamplePartition() {
	fmt.Println(shard.Partition("nightly-report", 1024))
	// Output: 445
}

func ExampleNewRing() {
	ring, err := shard.NewRing([]string{"orchestrator-2", "orchestrator-1", "orchestrator-3"}, shard.DefaultRingConfig(16))
	if err != nil {
		panic(err)
	}
	loads := ring.Loads()
	fmt.Println(ring.Members(), loads["orchestrator-1"]+loads["orchestrator-2"]+loads["orchestrator-3"])

	// One more member: only some of the partitions move.
	bigger, _ := shard.NewRing([]string{"orchestrator-1", "orchestrator-2", "orchestrator-3", "orchestrator-4"}, shard.DefaultRingConfig(16))
	fmt.Println(shard.Moved(ring, bigger) < 16)
	// Output:
	// [orchestrator-1 orchestrator-2 orchestrator-3] 16
	// true
}

func ExampleAssigner() {
	a, err := shard.NewAssigner(shard.DefaultRingConfig(64))
	if err != nil {
		panic(err)
	}
	three, _ := a.Ring([]string{"orchestrator-1", "orchestrator-2", "orchestrator-3"})
	// A join updates the previous ring instead of building a new one; the
	// result is the ring NewRing computes for the same members.
	four, _ := a.Ring([]string{"orchestrator-1", "orchestrator-2", "orchestrator-3", "orchestrator-4"})
	fresh, _ := shard.NewRing([]string{"orchestrator-4", "orchestrator-3", "orchestrator-2", "orchestrator-1"}, shard.DefaultRingConfig(64))
	fmt.Println(shard.Moved(four, fresh), len(four.Targets("orchestrator-4")) == shard.Moved(three, four))
	// Output: 0 true
}
