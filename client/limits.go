package client

import (
	"context"
	"net/http"
	"net/url"

	"github.com/jobfleet/jobfleet/api"
)

func limitPath(key string) string { return "/v1/limits/" + url.PathEscape(key) }

// PutLimit creates or replaces limit l (PUT /v1/limits/{key}) and returns
// it as stored; created says which. Invalid documents fail with an
// *Error of status 400 naming the field.
func (c *Client) PutLimit(ctx context.Context, l api.Limit) (stored api.Limit, created bool, err error) {
	code, err := c.do(ctx, request{method: http.MethodPut, path: limitPath(l.Key), body: l, out: &stored})
	return stored, code == http.StatusCreated, err
}

// PutLimitJSON is PutLimit with the document as JSON text, sent as it is
// (the server decodes it strictly), for key.
func (c *Client) PutLimitJSON(ctx context.Context, key string, doc []byte) (stored api.Limit, created bool, err error) {
	code, err := c.do(ctx, request{method: http.MethodPut, path: limitPath(key), body: doc, out: &stored})
	return stored, code == http.StatusCreated, err
}

// GetLimit returns limit key with its status as the answering member
// sees it; ErrNotFound if there is none.
func (c *Client) GetLimit(ctx context.Context, key string) (api.Limit, error) {
	var l api.Limit
	_, err := c.do(ctx, request{method: http.MethodGet, path: limitPath(key), out: &l})
	return l, err
}

// DeleteLimit deletes limit key; ErrNotFound if there is none.
func (c *Client) DeleteLimit(ctx context.Context, key string) error {
	_, err := c.do(ctx, request{method: http.MethodDelete, path: limitPath(key)})
	return err
}

// ListLimits returns one page of limits (GET /v1/limits) in key order,
// within opts.Prefix (and the credential's); the page's NextCursor
// continues it ("" on the last page). Paused is ignored.
func (c *Client) ListLimits(ctx context.Context, opts ListOptions) (api.LimitList, error) {
	q := opts.pageQuery()
	var page api.LimitList
	_, err := c.do(ctx, request{method: http.MethodGet, path: "/v1/limits", query: q, out: &page})
	return page, err
}
