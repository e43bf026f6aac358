// Package workers keeps the fleet's worker registry: which workers are
// alive, what they serve, and which credential each worker ID belongs to.
//
// Every worker registers with one orchestrator at a time (POST
// /v1/worker/register, dispatch.RegisterRequest) before its first poll and
// every third of the TTL the reply names. The member writes the
// registration at store.Keys.Worker under a lease of its own (TTL) and
// renews that lease at each refresh; any member the worker moves to
// renews the same lease, so the registration and its create revision live
// on while the worker keeps registering, and the key disappears one TTL
// after its last contact (crash, cut off) or at once on a graceful stop
// (Deregister). Workers never need etcd access for this.
//
// A worker ID is bound to the credential that registered it by a second
// key, <namespace>workerids/<id>, under a lease Config.IDGrace longer than
// the registration's (renewed every quarter of the grace, at most every 5
// minutes, while it lives).
// Until that binding lapses, another credential cannot register,
// deregister or poll (dispatch.Registry.CheckID) under the ID, and is told
// so with ErrIDTaken: the ID is held by another credential, until when.
//
// A registration is rewritten only when it changes. Its identity (the
// executors, concurrency and orchestrators the worker names, the
// credential's scope) is written at once, or refused; its sample (Active,
// the member it registers with, LastContact) is stored at most every
// Config.UpdateInterval, within the credential's write rate, and not while
// the store is above its high-water mark: a sample not stored is skipped,
// the registration renewed all the same. An identical refresh writes
// nothing. Each registration is bounded by the protocol
// (api.MaxRegisterExecutors and the others: about 7 KiB at most),
// each credential's requests and writes by rate limits on each member
// (Config.RequestRate, Config.WriteRate), its live registrations by
// Config.MaxPerCredential.
//
// Every member follows the registrations and the bindings with two prefix
// watches (package mirror), so lookups (Registration, CheckID, Workers,
// WhyPending) answer from memory.
//
// # Guarantees
//
//   - A worker ID is bound to the credential that first registered it
//     from that registration until at least Config.IDGrace after its
//     registration ended, however it ended; no other credential changes
//     its registration meanwhile.
//   - A registration the worker asks to be stored (a new one, a changed
//     identity) is answered only once etcd holds it; when the store
//     refuses it (the space guard, etcd's quota) or does not answer, the
//     request fails with store.ErrHighWater, store.ErrNoSpace or
//     store.ErrUnavailable and changes nothing.
//   - A refresh of a live registration that passes the request rate
//     renews its lease before anything is written or refused, so a
//     worker refused a change (429, 507) stays registered.
//   - An identical refresh writes nothing to etcd (it renews leases).
//   - What one credential writes through one member is bounded by
//     Config.WriteBurst plus Config.WriteRate KiB a second; what it keeps
//     stored, by MaxPerCredential registrations of at most about 7 KiB
//     and four times as many bindings of a few hundred bytes at most.
//
// # Not guaranteed
//
//   - Active, the member a worker registers with, and LastContact (when
//     the registration was last written, not when the worker last
//     refreshed) are samples and may lag: a listed registration is alive,
//     its worker in contact within the last TTL.
//   - A registration outlives its worker by up to a TTL; a binding
//     outlives the registration's end by the grace and up to a quarter
//     of it (at most 5 minutes) more.
//   - The rate limits are per member: a credential spreading its requests
//     over n members gets n times the rates. The counts per credential
//     are checked against this member's copies, which may lag a write
//     made through another member.
//   - A worker that never registers (an older version) is still served;
//     only its run leases detect its loss.
package workers
