package api

import "time"

// Role is what a credential may do. Roles, least to most:
//
//	viewer    read jobs (secret values redacted), runs, cluster state, metrics
//	worker    the worker protocol only (poll, heartbeat, complete) for attempts
//	          handed to that same credential, and the member list
//	operator  what a viewer may, plus create, replace, delete, pause, resume
//	          and trigger jobs
//	admin     everything, plus draining members and managing credentials
type Role string

// The roles.
const (
	RoleViewer   Role = "viewer"
	RoleWorker   Role = "worker"
	RoleOperator Role = "operator"
	RoleAdmin    Role = "admin"
)

// Token is a credential as the API lists it (GET /v1/tokens): everything
// but its secret, which is shown once, at creation, and stored only as a
// hash.
type Token struct {
	// ID names the credential; it is public (audit lines and attempts
	// carry it) and is part of the bearer token.
	ID string `json:"id"`
	// Role is what the credential may do.
	Role Role `json:"role"`
	// Prefix, if not empty, limits the credential to jobs whose ID starts
	// with it (e.g. "billing/"). Admin credentials have none.
	Prefix string `json:"prefix,omitempty"`
	// WorkerLabels, only for worker credentials, is a label selector
	// (placement's syntax, e.g. "pool=gpu") that the labels of every
	// worker registering with the credential must satisfy: a worker
	// holding it cannot claim another pool's runs. Empty: any labels.
	WorkerLabels string `json:"worker_labels,omitempty"`
	// Description is free text for people.
	Description string `json:"description,omitempty"`
	// CreatedAt is when the credential was made.
	CreatedAt time.Time `json:"created_at"`
	// ExpiresAt is when it stops working; zero for never.
	ExpiresAt time.Time `json:"expires_at,omitzero"`
	// CreatedBy is the ID of the credential that made it ("" when made
	// directly in etcd by `jobfleet token create --etcd-endpoints`).
	CreatedBy string `json:"created_by,omitempty"`
}

// CreateRequest is the body of POST /v1/tokens.
type CreateRequest struct {
	Role   Role   `json:"role"`
	Prefix string `json:"prefix,omitempty"`
	// WorkerLabels is Token.WorkerLabels: for a worker credential only.
	WorkerLabels string `json:"worker_labels,omitempty"`
	Description  string `json:"description,omitempty"`
	// TTL is a Go duration ("720h"); empty for a credential that does not
	// expire.
	TTL string `json:"ttl,omitempty"`
}

// Created is the reply of POST /v1/tokens (201): the credential and its
// bearer token, which the server never shows again.
type Created struct {
	Token
	// Secret is the bearer token to send as "Authorization: Bearer <secret>".
	Secret string `json:"token"`
}

// TokenList is the reply of GET /v1/tokens: one page of credentials,
// ordered by ID.
type TokenList struct {
	Tokens []Token `json:"tokens"`
	// NextCursor is the ?cursor of the next page; "" on the last page.
	NextCursor string `json:"next_cursor"`
}
