// Package client is the Go client of jobfleet's HTTP API: jobs (create,
// replace at a revision, get, list by pages, delete, pause, resume,
// trigger), runs, the cluster (members, partition table, storage, drain),
// credentials, and the worker protocol (poll, heartbeat, complete). The
// jobfleet CLI sends every request through it.
//
// A Client talks to one orchestrator (any member serves the whole API;
// the worker protocol's heartbeats and completions go to the member that
// handed the attempt out, so a worker makes one Client per member). It
// authenticates with a bearer token and, for https, verifies the server
// with the system's or the given CAs and may present a client
// certificate. A Client is safe for concurrent use.
//
// Documents are package api's: api.Job and api.Run, api.View, api.Token
// and its requests, the worker protocol's requests and replies, the
// lists, the partition table and the storage report. The package imports
// nothing else of the module and links neither etcd nor gRPC.
//
// Errors: a reply other than 2xx is an *Error carrying the status code,
// the server's message and, with 429, the Retry-After delay; errors.Is
// matches it against ErrBadRequest, ErrUnauthorized, ErrForbidden,
// ErrNotFound, ErrConflict, ErrTooManyRequests, ErrNotOwner,
// ErrUnavailable and ErrInsufficientStorage by status code. Other errors
// (the request could not be sent, the context ended, a 2xx reply that is
// not the document expected) are returned as they are, wrapped with the
// request's method and path.
//
// Not guaranteed: retries. A request is sent once; whether a failed write
// applied is for the caller to find out (a create answered by a lost
// connection may have created the job: read it, or create with PutJob at
// revision 0, which fails with ErrConflict if it exists).
package client
