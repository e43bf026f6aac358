// Package membership registers fleet members in etcd and tells every member
// who the others are.
//
// A Session owns one lease and keeps it alive with single keepalive
// requests. It guarantees that its Done channel closes, and its context is
// cancelled, before the server can expire the lease: it fences itself when
// no renewal has succeeded within RenewDeadline of the last successful
// request's send time, and the server keeps the lease at least TTL after
// that instant. Work bound to the lease runs under Session.Ctx. A holder
// that learns from elsewhere that its lease is gone (its registration,
// bound to the lease, deleted by a peer that revoked the lease) ends the
// session at once with Lost.
//
// Register records a member under members/<id> bound to a session's lease,
// only if no other registration of that ID exists; it waits for an earlier
// one to go. Deregister removes it at a graceful leave.
//
// A Watcher mirrors the members prefix (list, then watch; on compaction,
// cancellation or lost leader it lists again), so its View converges on
// etcd's state and no change is lost, though several changes may be seen
// as one. It does not promise that every member sees every intermediate
// view, nor that all members see a change at the same instant.
//
// The member view's documents, View and Member, are package api's (GET
// /v1/cluster/members serves them to clients and workers that must not
// link etcd); membership.View and membership.Member are deprecated
// aliases of them, kept for one release.
package membership
