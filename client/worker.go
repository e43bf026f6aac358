package client

import (
	"context"
	"net/http"

	"github.com/jobfleet/jobfleet/api"
)

// Poll asks for attempts to run (POST /v1/worker/poll; worker role). The
// orchestrator holds the request up to req.Wait when nothing is ready, so
// the client's Timeout, if any, must exceed it. It hands out only runs of
// the partitions it owns: a worker polls every member.
func (c *Client) Poll(ctx context.Context, req api.PollRequest) (api.PollResponse, error) {
	var resp api.PollResponse
	_, err := c.do(ctx, request{method: http.MethodPost, path: api.PathPoll, body: req, out: &resp})
	return resp, err
}

// EndPolls ends the worker's polls waiting at this orchestrator (POST
// /v1/worker/poll:end; worker role): they answer at once, with what they
// were handed, and later polls of the worker answer at once with nothing
// until it registers anew or api.EndPollsHold passes. A stopping worker
// calls it and then reads its polls' replies to the end instead of
// cancelling them (see api.EndPollsRequest). An orchestrator of an
// earlier version fails it with an *Error of status 404.
func (c *Client) EndPolls(ctx context.Context, req api.EndPollsRequest) error {
	_, err := c.do(ctx, request{method: http.MethodPost, path: api.PathEndPolls, body: req, out: &struct{}{}})
	return err
}

// Heartbeat extends an attempt's run lease (POST /v1/worker/heartbeat). It
// fails with ErrConflict if the attempt is stale (drop it) and with
// ErrNotOwner if another member owns the run's partition now (resend to
// Error.OwnerAddr).
func (c *Client) Heartbeat(ctx context.Context, req api.HeartbeatRequest) (api.HeartbeatResponse, error) {
	var resp api.HeartbeatResponse
	_, err := c.do(ctx, request{method: http.MethodPost, path: api.PathHeartbeat, body: req, out: &resp})
	return resp, err
}

// Complete reports an attempt's result (POST /v1/worker/complete) and
// returns the run's resulting status. Errors are those of Heartbeat.
func (c *Client) Complete(ctx context.Context, req api.CompleteRequest) (api.CompleteResponse, error) {
	var resp api.CompleteResponse
	_, err := c.do(ctx, request{method: http.MethodPost, path: api.PathComplete, body: req, out: &resp})
	return resp, err
}
