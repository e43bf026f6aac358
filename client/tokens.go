package client

import (
	"context"
	"net/http"
	"net/url"

	"github.com/jobfleet/jobfleet/api"
)

// ListTokens returns every credential, without secrets (GET /v1/tokens;
// admin role).
func (c *Client) ListTokens(ctx context.Context) ([]api.Token, error) {
	var l api.TokenList
	_, err := c.do(ctx, request{method: http.MethodGet, path: "/v1/tokens", out: &l})
	return l.Tokens, err
}

// CreateToken makes a credential (POST /v1/tokens; admin role) and returns
// it with its bearer token, which the server never shows again.
func (c *Client) CreateToken(ctx context.Context, req api.CreateRequest) (api.Created, error) {
	var created api.Created
	_, err := c.do(ctx, request{method: http.MethodPost, path: "/v1/tokens", body: req, out: &created})
	return created, err
}

// DeleteToken revokes credential id (DELETE /v1/tokens/{id}; admin role).
func (c *Client) DeleteToken(ctx context.Context, id string) error {
	_, err := c.do(ctx, request{method: http.MethodDelete, path: "/v1/tokens/" + url.PathEscape(id)})
	return err
}
