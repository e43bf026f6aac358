package client

import (
	"context"
	"net/http"

	"github.com/jobfleet/jobfleet/dispatch"
)

// Poll asks for attempts to run (POST /v1/worker/poll; worker role). The
// orchestrator holds the request up to req.Wait when nothing is ready, so
// the client's Timeout, if any, must exceed it. It hands out only runs of
// the partitions it owns: a worker polls every member.
func (c *Client) Poll(ctx context.Context, req dispatch.PollRequest) (dispatch.PollResponse, error) {
	var resp dispatch.PollResponse
	_, err := c.do(ctx, request{method: http.MethodPost, path: dispatch.PathPoll, body: req, out: &resp})
	return resp, err
}

// Heartbeat extends an attempt's run lease (POST /v1/worker/heartbeat). It
// fails with ErrConflict if the attempt is stale (drop it) and with
// ErrNotOwner if another member owns the run's partition now (resend to
// Error.OwnerAddr).
func (c *Client) Heartbeat(ctx context.Context, req dispatch.HeartbeatRequest) (dispatch.HeartbeatResponse, error) {
	var resp dispatch.HeartbeatResponse
	_, err := c.do(ctx, request{method: http.MethodPost, path: dispatch.PathHeartbeat, body: req, out: &resp})
	return resp, err
}

// Complete reports an attempt's result (POST /v1/worker/complete) and
// returns the run's resulting status. Errors are those of Heartbeat.
func (c *Client) Complete(ctx context.Context, req dispatch.CompleteRequest) (dispatch.CompleteResponse, error) {
	var resp dispatch.CompleteResponse
	_, err := c.do(ctx, request{method: http.MethodPost, path: dispatch.PathComplete, body: req, out: &resp})
	return resp, err
}
