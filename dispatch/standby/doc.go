// Package standby keeps a member's warm standby: copies of the partitions
// the member is the heir of (shard.Ring.Heirs: it would be given each if
// its owner went away), followed by one watch, so that when the member
// acquires one its load builds the partition's memory from the copy
// instead of reading it from etcd.
//
// A copy is one read of the partition's keys at a revision (the reads a
// load makes, Member.Read), then every change after it from the watch,
// which delivers changes in revision order: the copies are exact as of
// the last revision the watch delivered (its progress). An acquisition
// with epoch E (the owner key's creation revision) takes the copy
// (Standby.Take) once the progress reached E, asking etcd for a progress
// notification if need be: the previous owner could write nothing after
// its owner key was deleted, before E.
//
// Package dispatch consumes it: Dispatcher.NewStandby wires a Standby to
// the dispatcher's reads, load slots and spec decoding, and a
// partition's first load of an ownership takes its copy.
//
// # Guarantees
//
//   - A Snapshot taken for epoch E holds the partition's keys as a read
//     of etcd at the snapshot's revision (at least E) returns them: the
//     same values, revisions and versions (specs decoded by
//     Member.Decode, without their value).
//   - Any doubt is a nil Take, never a stale copy: no copy, a copy still
//     being read, a watch that failed (compaction, cancellation: every
//     copy is dropped and read again), a progress that does not reach E
//     within Config.CatchUp, a released acquisition.
//   - The standby never writes to etcd; it reads a copy only through
//     Member.Read, which a dispatcher serves in turn with its own loads
//     (only while none waits, holding one load slot).
//   - Run returns only after every goroutine it started has returned.
//
// # Not guaranteed
//
//   - A warm takeover: a copy still being read, a lagging watch or a
//     failed one make the acquisition read etcd (counted in
//     jobfleet_standby_loads_total{source="cold"}).
//   - Bounded memory beyond the partitions followed: a copy holds every
//     key of its partition (jobfleet_standby_bytes), and the watch
//     delivers every partition's changes to the member.
package standby
