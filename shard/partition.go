package shard

import "github.com/cespare/xxhash/v2"

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
