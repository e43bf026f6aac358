// Package api holds the documents of jobfleet's HTTP API that no lower
// package defines: the partition table, the job, run and trigger replies,
// the storage report and the error document. The server (package admin),
// the Go client (package client), the CLI, the tests and the benchmarks
// all use these types, so a document is declared once.
//
// The other documents belong to the packages that define their meaning
// and are used as they are: the job and run documents are store.Job and
// store.Run, the member view is membership.View, credentials are
// auth.Token, auth.CreateRequest, auth.Created and auth.TokenList, and the
// worker protocol's requests and replies are dispatch's PollRequest,
// HeartbeatRequest, CompleteRequest and their responses.
//
// Why a package of its own rather than package admin: admin is the server
// (it links the orchestrator, the metrics registry and etcd's client
// machinery for its handlers), and a program that only talks to the API
// should not import the server to read its replies. This package imports
// only store (for store.Duration and the job and run documents), so that
// the client and any Go program can use it, and anyone can implement
// admin.Member outside this module.
//
// JSON field names are the wire contract: they do not change when a Go
// name does.
package api
