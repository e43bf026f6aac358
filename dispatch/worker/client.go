package worker

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/cenkalti/backoff/v5"
	"github.com/jonboulle/clockwork"

	"github.com/jobfleet/jobfleet/dispatch"
)

// Reply size limits: a poll reply carries up to 100 assignments with their
// payloads; the other replies are small.
const (
	maxPollReplyBytes  = 64 << 20
	maxOtherReplyBytes = 1 << 20
)

// reply is an orchestrator's answer to one protocol request.
type reply struct {
	status int
	body   []byte
}

// message returns the "error" field of an error reply, or the start of the
// body.
func (r reply) message() string {
	var e struct {
		Error string `json:"error"`
	}
	if json.Unmarshal(r.body, &e) == nil && e.Error != "" {
		return e.Error
	}
	s := strings.TrimSpace(string(r.body))
	if len(s) > 200 {
		s = s[:200] + "…"
	}
	return s
}

// err describes an unexpected reply.
func (r reply) err() error {
	if m := r.message(); m != "" {
		return fmt.Errorf("status %d: %s", r.status, m)
	}
	return fmt.Errorf("status %d", r.status)
}

// notOwner decodes a 421 reply.
func (r reply) notOwner() dispatch.NotOwner {
	var n dispatch.NotOwner
	_ = json.Unmarshal(r.body, &n)
	return n
}

// retryable reports whether a request that got r may succeed if sent again
// later (503 and other 5xx, 408, 429).
func (r reply) retryable() bool {
	return r.status >= 500 || r.status == http.StatusRequestTimeout || r.status == http.StatusTooManyRequests
}

// post sends req as JSON to base+path, bounded by timeout, and returns the
// reply. An error means no reply was received (network error, timeout, ctx
// cancelled).
func post(ctx context.Context, c *http.Client, base, path string, req any, timeout time.Duration, limit int64) (reply, error) {
	body, err := json.Marshal(req)
	if err != nil {
		return reply{}, fmt.Errorf("encode request: %w", err)
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	hr, err := http.NewRequestWithContext(ctx, http.MethodPost, strings.TrimRight(base, "/")+path, bytes.NewReader(body))
	if err != nil {
		return reply{}, err
	}
	hr.Header.Set("Content-Type", "application/json")
	hr.Header.Set("User-Agent", userAgent)
	resp, err := c.Do(hr)
	if err != nil {
		return reply{}, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, limit+1))
	if err != nil {
		return reply{}, fmt.Errorf("read reply: %w", err)
	}
	if int64(len(b)) > limit {
		return reply{}, fmt.Errorf("reply larger than %d bytes", limit)
	}
	return reply{status: resp.StatusCode, body: b}, nil
}

const userAgent = "jobfleet-worker"

// newBackOff returns the exponential back-off (with jitter) used between
// retries. It only computes intervals; waits use the worker's clock.
func newBackOff(initial, maxInterval time.Duration) *backoff.ExponentialBackOff {
	bo := backoff.NewExponentialBackOff()
	bo.InitialInterval = initial
	bo.MaxInterval = maxInterval
	bo.Reset()
	return bo
}

// sleep waits d on clock; it returns false if ctx ends first.
func sleep(ctx context.Context, clock clockwork.Clock, d time.Duration) bool {
	if d <= 0 {
		return ctx.Err() == nil
	}
	t := clock.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.Chan():
		return true
	case <-ctx.Done():
		return false
	}
}

// defaultHTTPClient returns a client with its own transport, so that the
// worker can close its idle connections without touching anyone else's.
func defaultHTTPClient(maxIdlePerHost int) *http.Client {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConnsPerHost = maxIdlePerHost
	return &http.Client{Transport: tr}
}
