// Package cursor makes the cursors of the API's listings (GET /v1/jobs,
// GET /v1/runs, GET /v1/tokens) self-describing and authenticated: a
// cursor holds its version, the digest of its listing (the kind and
// every parameter that selects what is listed), and its position in the
// listing's order, and ends with an HMAC-SHA256 over them with the
// fleet's cursor key. A listing takes back only the cursors it issued.
//
// Guarantees:
//   - Open returns the position Seal was given, for the same key, kind
//     and parameters; anything else is refused with an error matching
//     ErrInvalid: a malformed string (ErrMalformed), one sealed with
//     another key or changed (ErrForeign), one of another listing or
//     with other parameters (ErrOtherListing).
//   - A cursor depends only on the key, the listing and the position: it
//     stays valid as long as the key does, across members, restarts,
//     compaction and handoffs (positions are keys of the listing's
//     order, not revisions).
//
// Not guaranteed:
//   - Secrecy of the position: a cursor is signed, not encrypted; what it
//     points at (a job ID, a run ID, a credential ID) is readable by
//     whoever holds it, who was shown the page before it anyway.
//   - Freshness: a cursor does not expire.
package cursor
