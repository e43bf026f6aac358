package client

import (
	"context"
	"net/http"

	"github.com/jobfleet/jobfleet/api"
)

// Dependents returns the jobs that run after job id (GET
// /v1/jobs/{id}/dependents): those whose after names it, each with the
// states that fire it, as far as the caller's credential may read them.
func (c *Client) Dependents(ctx context.Context, id string) (api.Dependents, error) {
	var d api.Dependents
	_, err := c.do(ctx, request{method: http.MethodGet, path: jobPath(id, "dependents"), out: &d})
	return d, err
}
