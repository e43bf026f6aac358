// Package liveoutput holds the output of running attempts in memory, on
// the member that owns their runs' partitions: a ring of the last bytes
// of each attempt (Table), read whole (Snapshot) or followed as it grows
// (Follow).
//
// # Guarantees
//
//   - Bounded memory: each attempt keeps at most Config.AttemptBytes, the
//     table at most Config.Attempts attempts; past them the oldest bytes,
//     then the attempts that ended longest ago, are dropped. A reader is
//     told how many bytes it missed.
//   - Writers never wait for readers: an append wakes every follower by
//     closing one channel (and making the next), whatever their number;
//     a follower reads what it has not seen from the ring, and one that
//     falls more than a ring behind skips ahead to the ring's start,
//     counting the bytes it skipped.
//   - Bytes are placed at the offset their writer gives: a chunk sent
//     again is not kept twice, and a gap (a chunk that never arrived) is
//     counted as skipped bytes.
//
// # Not guaranteed
//
//   - Nothing is durable: the table is memory only (never etcd), lost
//     when the member stops or the partition moves. The output a run
//     keeps is what its worker reports when the attempt ends.
//   - Bytes are not checked for text: a chunk may end inside a UTF-8
//     sequence.
package liveoutput
