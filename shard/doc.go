// Package shard divides job partitions among fleet members and keeps at
// most one owner per partition, without any global lock.
//
// Partition maps a job ID to one of P partitions (xxhash64 mod P). P is
// fixed when the cluster is created (EnsurePartitions). A Ring computes,
// from a member set, which member should own each partition (consistent
// hashing with bounded loads); every member computes the same Ring from the
// same set. An Assigner computes the Rings of successive member sets by
// updating the previous one, with the same result. Members register the
// ring version they compute and the fleet computes the oldest registered
// (EffectiveRingConfig), so members of two builds agree during an upgrade.
// Ring.Heirs names, for each partition, the one other member the ring
// without its target would give it to (a warm standby keeps a copy there).
//
// A Controller, one per member, acquires the partitions the ring assigns to
// it and releases the others, running a Work function per owned partition.
// Ownership is an owner key per partition, created only if absent and bound
// to the member's lease; its create revision is the epoch, the fencing
// token every owner write carries (Ownership.Commit).
//
// Guarantees:
//   - At most one member holds a partition's owner key at any revision.
//   - A partition's Work starts after its key is created and the key is
//     deleted only after Work returned (or the release timeout passed), so
//     the next owner starts after the previous one stopped.
//   - Work runs under the member's lease session and is cancelled when the
//     session can no longer be sure of its lease, before the server can
//     expire it.
//   - Every write through Ownership.Commit applies only while the owner key
//     has the ownership's epoch.
//
// Not guaranteed: that a partition always has an owner (there are gaps
// during handoffs and after crashes, measured in docs/benchmarks.md), that
// the ring is optimal in movement (it is within a small factor of the ideal
// P/(n+1)), or that Work never runs after ownership ended if the process
// is paused longer than the session's safety margin (its writes are fenced
// regardless). See docs/ownership.md.
package shard
