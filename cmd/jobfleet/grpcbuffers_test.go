package main

import (
	"testing"

	"google.golang.org/grpc/mem"
)

// A message between 32 KiB and 1 MiB takes a buffer of at most twice its
// size from gRPC's default pool, not one of 1 MiB.
func TestGRPCBufferPoolTiers(t *testing.T) {
	pool := mem.DefaultBufferPool()
	for _, tc := range []struct{ size, want int }{
		{1 << 10, 4 << 10},
		{40 << 10, 64 << 10},
		{64 << 10, 64 << 10},
		{100 << 10, 128 << 10},
		{600 << 10, 1 << 20},
	} {
		buf := pool.Get(tc.size)
		if len(*buf) != tc.size || cap(*buf) != tc.want {
			t.Errorf("Get(%d): len %d cap %d, want len %d cap %d", tc.size, len(*buf), cap(*buf), tc.size, tc.want)
		}
		pool.Put(buf)
	}
}
