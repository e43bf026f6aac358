package client

import (
	"context"
	"net/http"
	"net/url"

	"github.com/jobfleet/jobfleet/api"
)

// Members returns the live members as the answering orchestrator sees
// them (GET /v1/cluster/members).
func (c *Client) Members(ctx context.Context) (api.View, error) {
	var v api.View
	_, err := c.do(ctx, request{method: http.MethodGet, path: "/v1/cluster/members", out: &v})
	return v, err
}

// Partitions returns the partition table (GET /v1/cluster/partitions):
// each partition's owner and epoch, and its ring target.
func (c *Client) Partitions(ctx context.Context) (api.PartitionTable, error) {
	var t api.PartitionTable
	_, err := c.do(ctx, request{method: http.MethodGet, path: "/v1/cluster/partitions", out: &t})
	return t, err
}

// Storage returns etcd's storage report (GET /v1/cluster/storage).
func (c *Client) Storage(ctx context.Context) (api.StorageReport, error) {
	var r api.StorageReport
	_, err := c.do(ctx, request{method: http.MethodGet, path: "/v1/cluster/storage", out: &r})
	return r, err
}

// Drain asks the orchestrator the client talks to (not any other) to hand
// its partitions over and leave (POST /v1/cluster/drain). It returns when
// the request is accepted, not when the member has left.
func (c *Client) Drain(ctx context.Context) error {
	_, err := c.do(ctx, request{method: http.MethodPost, path: "/v1/cluster/drain"})
	return err
}

// Ready returns the orchestrator's readiness (GET /readyz): nil if ready,
// else an *Error with status 503 whose message is the reason.
func (c *Client) Ready(ctx context.Context) error {
	_, err := c.do(ctx, request{method: http.MethodGet, path: "/readyz"})
	return err
}

// Workers returns the live worker registrations (GET
// /v1/cluster/workers), by ID.
func (c *Client) Workers(ctx context.Context) (api.WorkerList, error) {
	return c.WorkersMatching(ctx, "")
}

// WorkersMatching returns the live workers whose labels selector matches
// (GET /v1/cluster/workers?selector=...; "" lists them all). A selector
// that does not parse is an *Error of status 400 naming it.
func (c *Client) WorkersMatching(ctx context.Context, selector string) (api.WorkerList, error) {
	var l api.WorkerList
	var q url.Values
	if selector != "" {
		q = url.Values{"selector": {selector}}
	}
	_, err := c.do(ctx, request{method: http.MethodGet, path: "/v1/cluster/workers", query: q, out: &l})
	return l, err
}

// Placement returns where job ID id lands and who schedules it (GET
// /v1/cluster/placement?job=id); the job need not exist.
func (c *Client) Placement(ctx context.Context, id string) (api.Placement, error) {
	var p api.Placement
	_, err := c.do(ctx, request{method: http.MethodGet, path: "/v1/cluster/placement", query: url.Values{"job": {id}}, out: &p})
	return p, err
}

// Whoami returns the credential the client uses, its role and prefix (GET
// /v1/whoami).
func (c *Client) Whoami(ctx context.Context) (api.Whoami, error) {
	var w api.Whoami
	_, err := c.do(ctx, request{method: http.MethodGet, path: "/v1/whoami", out: &w})
	return w, err
}
