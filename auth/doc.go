// Package auth holds jobfleet's credentials: bearer tokens with a role and
// an optional job-ID prefix scope, stored in etcd as hashes, and the
// decision of what a credential may do.
//
// This file set is being built; see the documents in api.go for the wire
// contract shared by the server and the client.
package auth
