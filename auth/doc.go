// Package auth holds jobfleet's credentials and the decision of what each
// may do.
//
// A credential has a public ID, a role (viewer, worker, operator, admin)
// and, for roles other than admin, an optional job-ID prefix that limits
// it to one team's jobs. Its bearer token, "jf_<id>_<secret>", is shown
// once when it is made; etcd keeps only the SHA-256 of the 256-bit
// secret, under <namespace>auth/tokens/<id>.
//
//   - Store creates, lists, verifies and revokes credentials in etcd.
//   - Cache authenticates requests from an in-memory copy kept current by
//     a watch, so a request never waits on etcd and a revocation reaches
//     every member within a second. It also accepts an orchestrator's
//     bootstrap secret (--admin-token-file) as the admin "bootstrap", and
//     maps a verified TLS client certificate to the stored credential its
//     Subject CommonName names.
//   - Authorize is the pure decision: a principal's role against a
//     route's Access, and its prefix against a job ID.
//
// The credential documents (Token, CreateRequest, Created, TokenList),
// the roles (Role and its constants) and the access levels (Access) are
// package api's, which the Go client shares without linking etcd; the
// names of this package are deprecated aliases of them, kept for one
// release (aliases.go).
//
// Guarantees: a secret is never stored, logged or put in an error
// message; hashes are compared in constant time; an unknown, revoked or
// expired credential is refused with ErrUnauthenticated, and a valid one
// without the role or scope with ErrForbidden; a job outside a
// credential's scope is refused whether it exists or not; one creator
// holds at most StoreConfig.MaxPerCreator unexpired credentials, even
// under concurrent creates on several members; expired credentials are
// deleted by the Create or List that meets them (bounded per call, each
// conditional on its revision).
//
// Cache.Follow gives long-lived responses (event streams, long polls) a
// context that ends as soon as their credential is revoked, replaced or
// expires, woken by the same watch.
//
// Not guaranteed: a revocation does not end ordinary requests already
// in progress, nor responses that do not run under Follow; the cache
// refuses stored tokens (ErrNotReady) until its first list from etcd
// succeeds; roles are fixed (no custom roles), and a prefix is a plain
// string prefix of the job ID.
package auth
