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
