// Package storage keeps the etcd a fleet runs on within its bounds: it
// compacts etcd's history (Compactor) and watches the database's size,
// quota and alarms (Monitor), so that the fleet refuses new work with a
// clear error before etcd's space quota is reached, and stops firing
// cleanly, instead of retrying in a loop, when it is reached anyway.
//
// # Compaction
//
// etcd keeps every revision of every key until it is compacted. Every
// member runs a Compactor; once per interval one of them compacts, chosen
// without an election by a compare-and-swap on one small key
// (<namespace>compaction), the way kube-apiserver compacts its etcd: a
// member claims the round only if the key's version is still the one it
// saw a round ago, that is, if nobody claimed meanwhile. The claimer
// compacts to the revision it observed at its previous round, at least one
// interval ago, so a watcher that is less than one interval behind never
// loses history it still needs; one that is further behind gets
// ErrCompacted and re-lists (internal/mirror and the dispatcher do).
//
// A member also starts a round early, at least MinCompactionGap after its
// previous one, when the history written since its last round passes
// CompactionBytes (by default a quarter of the room between the
// high-water mark and the quota): the Monitor measures it as the larger of
// the bytes the member's API wrote (NoteWritten) and the growth of the
// database in use, and the Compactor compacts such a round to the revision
// of the Monitor's last check once it is MinCompactionGap old (else to its
// previous round's). So a flood of writes, which the API's write budgets
// bound per credential, cannot fill the room above the high-water mark
// between two rounds of the interval.
//
// Guarantees: while the history grows by less than CompactionBytes an
// interval, at most one compaction per interval per fleet while the
// members' clocks run at the same rate and etcd accepts writes, never to
// a revision younger than one interval; when it grows faster, rounds at
// least MinCompactionGap apart per member, never to a revision younger
// than MinCompactionGap. Under etcd's
// NOSPACE alarm the claim (a write) is refused; members then compact
// without claiming, since etcd allows compaction under the alarm and
// repeating one is harmless, so the history stays bounded while an
// operator recovers. Compaction is cluster-wide in etcd: several
// fleets sharing one etcd (different namespaces) each compact, each to a
// revision at least its own interval old, so the history etcd keeps is at
// least the shortest interval among them. They never fight: compacting to
// a revision older than the current compaction point is a no-op.
//
// # Quota
//
// A Monitor reads, every CheckInterval, each etcd endpoint's database size
// (maintenance Status: the file size, which etcd's quota counts, and the
// size in use) and the cluster's alarms. Above the high-water mark
// (HighWater × quota) Admit refuses writes that grow the database; with
// the NOSPACE alarm raised WritesRefused stops the scheduler's writes and
// readiness fails with the reason. Both clear on their own once a check
// sees the database below the mark and the alarm disarmed.
//
// Not guaranteed: the monitor's view is up to CheckInterval old, so a
// burst of writes can cross the mark, or reach the quota, between two
// checks; a write refused by etcd for lack of space is reported to the
// monitor at once (NoteWriteError). Nothing here defragments or disarms
// an alarm: defragmenting blocks the etcd member it runs on, and both are
// an operator's decision (see docs/operations.md).
package storage
