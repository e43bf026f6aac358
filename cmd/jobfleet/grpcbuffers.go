package main

import (
	"google.golang.org/grpc/experimental"
	"google.golang.org/grpc/mem"
)

// grpcBufferExponents are the sizes, as powers of two, of the buffers
// gRPC's default pool keeps: its own (256 bytes, 4, 16 and 32 KiB, 1 MiB)
// with every power of two between 32 KiB and 1 MiB added. With gRPC's
// tiers alone every message between 32 KiB and 1 MiB is marshalled or
// read into a 1 MiB buffer, zeroed whole each time it is taken: a
// member's batched state writes, batched creates and watch responses are
// of that size, so each one in flight held 1 MiB, and the pool kept them
// until two collections had passed. bench scale saw 3–4 MiB of them live
// at the last collection of a 100 000-job bulk creation on the busiest of
// 3 members (1 MiB after 1 000 jobs), which the heap goal doubles in the
// resident set. With these a message takes at most twice its size.
var grpcBufferExponents = []uint8{8, 12, 14, 15, 16, 17, 18, 19, 20}

// init sets gRPC's default buffer pool (experimental.SetDefaultBufferPool
// must be called at initialization) before any client or server of this
// binary exists.
func init() {
	pool, err := mem.NewBinaryTieredBufferPool(grpcBufferExponents...)
	if err != nil {
		return // not on this platform (an exponent above its int): gRPC's own pool stays
	}
	experimental.SetDefaultBufferPool(pool)
}
