package client

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"

	"github.com/jobfleet/jobfleet/api"
)

// CancelRun asks to cancel run runID (POST /v1/runs/{run_id}/cancel): a
// pending, failed (awaiting its retry) or running run ends cancelled and
// is never retried; a running attempt's worker is told to stop. applied
// is true with the cancelled run when the run's partition's owner applied
// the request within the server's wait; false (and a run holding only
// its ID) when the request is recorded and the owner applies it later.
// A run that is final already fails with an *Error of status 409
// (ErrConflict) naming its status; ErrNotFound if there is no such run.
func (c *Client) CancelRun(ctx context.Context, runID string) (run api.Run, applied bool, err error) {
	var raw json.RawMessage
	code, err := c.do(ctx, request{method: http.MethodPost, path: "/v1/runs/" + url.PathEscape(runID) + "/cancel", out: &raw})
	if err != nil {
		return api.Run{}, false, err
	}
	if code == http.StatusAccepted {
		var req api.CancelRequested
		if err := json.Unmarshal(raw, &req); err != nil {
			return api.Run{}, false, fmt.Errorf("POST cancel: bad reply: %w", err)
		}
		return api.Run{ID: req.RunID}, false, nil
	}
	if err := json.Unmarshal(raw, &run); err != nil {
		return api.Run{}, false, fmt.Errorf("POST cancel: bad reply: %w", err)
	}
	return run, true, nil
}

// Backfill asks for a backfill of job id (POST /v1/jobs/{id}/backfill): a
// run for each scheduled time in [req.From, req.To), at most *req.Max,
// with the run IDs its fires would have had; times with a run already are
// not run again. A dry run only lists the times. The reply is done (200:
// a dry run, or nothing to create) or running (202: the partition's owner
// creates the runs, paced; GetBackfill shows its progress). ErrConflict
// while another backfill of the job runs; ErrNotFound if there is no such
// job.
func (c *Client) Backfill(ctx context.Context, id string, req api.BackfillRequest) (api.Backfill, error) {
	var b api.Backfill
	_, err := c.do(ctx, request{method: http.MethodPost, path: jobPath(id, "backfill"), body: req, out: &b})
	return b, err
}

// GetBackfill returns job id's latest backfill with its progress
// (ErrNotFound if it has none).
func (c *Client) GetBackfill(ctx context.Context, id string) (api.Backfill, error) {
	var b api.Backfill
	_, err := c.do(ctx, request{method: http.MethodGet, path: jobPath(id, "backfill"), out: &b})
	return b, err
}

// StopBackfill stops and forgets job id's backfill (the runs it created
// stay) and returns it as it was.
func (c *Client) StopBackfill(ctx context.Context, id string) (api.Backfill, error) {
	var b api.Backfill
	_, err := c.do(ctx, request{method: http.MethodDelete, path: jobPath(id, "backfill"), out: &b})
	return b, err
}

// RetryRun asks to start run runID, made of steps and ended dead or
// cancelled, again from step from (POST /v1/runs/{run_id}/retry): that
// step and every step that needs it run again, in a new round of the same
// run; the other steps keep how they ended and their results. applied is
// true with the run in its new round when the owner applied the request
// within the server's wait; false (and a run holding only its ID) when it
// is recorded and applied later. A run that has not ended, succeeded, is
// not made of steps or has no such step fails with an *Error of status
// 409 (ErrConflict) saying which; ErrNotFound if there is no such run.
func (c *Client) RetryRun(ctx context.Context, runID, from string) (run api.Run, applied bool, err error) {
	var raw json.RawMessage
	code, err := c.do(ctx, request{method: http.MethodPost, path: "/v1/runs/" + url.PathEscape(runID) + "/retry", body: api.RetryRequest{From: from}, out: &raw})
	if err != nil {
		return api.Run{}, false, err
	}
	if code == http.StatusAccepted {
		var req api.RetryRequested
		if err := json.Unmarshal(raw, &req); err != nil {
			return api.Run{}, false, fmt.Errorf("POST retry: bad reply: %w", err)
		}
		return api.Run{ID: req.RunID}, false, nil
	}
	if err := json.Unmarshal(raw, &run); err != nil {
		return api.Run{}, false, fmt.Errorf("POST retry: bad reply: %w", err)
	}
	return run, true, nil
}
