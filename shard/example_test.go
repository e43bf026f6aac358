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
