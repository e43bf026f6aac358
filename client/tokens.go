package client

import (
	"context"
	"net/http"
	"net/url"
	"strconv"

	"github.com/jobfleet/jobfleet/api"
)

// ListTokens returns every credential, without secrets, ordered by ID: it
// reads every page of GET /v1/tokens (admin role), 1000 credentials a
// request.
func (c *Client) ListTokens(ctx context.Context) ([]api.Token, error) {
	tokens := []api.Token{}
	opts := ListOptions{Limit: 1000}
	for {
		page, err := c.ListTokensPage(ctx, opts)
		if err != nil {
			return nil, err
		}
		tokens = append(tokens, page.Tokens...)
		if page.NextCursor == "" || page.NextCursor == opts.Cursor {
			return tokens, nil
		}
		opts.Cursor = page.NextCursor
	}
}

// ListTokensPage returns one page of credentials (GET /v1/tokens; admin
// role), ordered by ID: opts.Limit (1 to 1000; 0 is the server's default
// of 100) after opts.Cursor. The page's NextCursor continues it ("" on
// the last page). opts.Prefix and opts.Paused do not apply.
func (c *Client) ListTokensPage(ctx context.Context, opts ListOptions) (api.TokenList, error) {
	q := url.Values{}
	if opts.Limit > 0 {
		q.Set("limit", strconv.Itoa(opts.Limit))
	}
	if opts.Cursor != "" {
		q.Set("cursor", opts.Cursor)
	}
	var page api.TokenList
	_, err := c.do(ctx, request{method: http.MethodGet, path: "/v1/tokens", query: q, out: &page})
	return page, err
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
