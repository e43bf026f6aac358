package worker

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/jonboulle/clockwork"
	"go.uber.org/zap"

	"github.com/jobfleet/jobfleet/api"
	"github.com/jobfleet/jobfleet/internal/retry"
)

// Reply size limits: a poll reply carries up to 100 attempt grants with their
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
func (r reply) notOwner() api.NotOwner {
	var n api.NotOwner
	_ = json.Unmarshal(r.body, &n)
	return n
}

// retryable reports whether a request that got r may succeed if sent again
// later (503 and other 5xx, 408, 429).
func (r reply) retryable() bool {
	return r.status >= 500 || r.status == http.StatusRequestTimeout || r.status == http.StatusTooManyRequests
}

// refused reports whether the orchestrator refused the worker's
// credentials (401: missing or unknown token; 403: not allowed to).
func (r reply) refused() bool {
	return r.status == http.StatusUnauthorized || r.status == http.StatusForbidden
}

// CredentialError says that an orchestrator refused the worker's
// credentials (HTTP 401 or 403). It is what polls, heartbeats and
// completions fail with then.
type CredentialError struct {
	// Status is the HTTP status, 401 or 403.
	Status int
	// Message is the orchestrator's explanation.
	Message string
}

func (e *CredentialError) Error() string {
	hint := "the token is missing, unknown or revoked"
	if e.Status == http.StatusForbidden {
		hint = "the credential is not allowed to act as a worker here"
	}
	if e.Message != "" {
		return fmt.Sprintf("orchestrator refused the worker's credentials (status %d: %s): %s", e.Status, e.Message, hint)
	}
	return fmt.Sprintf("orchestrator refused the worker's credentials (status %d): %s", e.Status, hint)
}

// credentialErr returns the *CredentialError of a 401 or 403 reply.
func (r reply) credentialErr() *CredentialError {
	return &CredentialError{Status: r.status, Message: r.message()}
}

// apiClient sends the worker's requests to orchestrators, with its token.
type apiClient struct {
	hc    *http.Client
	token string
}

// newRequest returns a request carrying the worker's User-Agent and, if
// it has one, its token.
func (c *apiClient) newRequest(ctx context.Context, method, url string, body io.Reader) (*http.Request, error) {
	hr, err := http.NewRequestWithContext(ctx, method, url, body)
	if err != nil {
		return nil, err
	}
	hr.Header.Set("User-Agent", userAgent)
	if c.token != "" {
		hr.Header.Set("Authorization", "Bearer "+c.token)
	}
	return hr, nil
}

// post sends req as JSON to base+path, bounded by timeout, and returns the
// reply. An error means no reply was received (network error, timeout, ctx
// cancelled).
func (c *apiClient) post(ctx context.Context, base, path string, req any, timeout time.Duration, limit int64) (reply, error) {
	body, err := json.Marshal(req)
	if err != nil {
		return reply{}, fmt.Errorf("encode request: %w", err)
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	hr, err := c.newRequest(ctx, http.MethodPost, strings.TrimRight(base, "/")+path, bytes.NewReader(body))
	if err != nil {
		return reply{}, err
	}
	hr.Header.Set("Content-Type", "application/json")
	resp, err := c.hc.Do(hr)
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

// credentialStartGrace is how long the orchestrators may refuse a worker
// whose credential none has accepted yet before Run gives up with
// ErrCredentialRefused: long enough for a credential created a moment
// before the worker started to reach every orchestrator's cache (within
// a second), short enough that a worker started without a valid
// credential stops at once, saying why.
const credentialStartGrace = 5 * time.Second

// credentialFix is what a refusal's log line and Run's error say to do.
const credentialFix = "give the worker a credential of role worker (Config.Token; jobfleet worker: --token, --token-file or JOBFLEET_TOKEN)"

// credentialLog logs refusals of the worker's credentials once per
// change, across all the worker's requests, instead of once per request,
// always with the worker's logger (whichever request was refused: a
// members-list read logs there too); and, while no orchestrator has ever
// accepted the credential, ends Run (through fatal) once refusals have
// lasted credentialStartGrace. Only an accepted registration or poll
// counts as accepting the credential: a viewer's or operator's may read
// the members list, yet no worker can run with it. Safe for concurrent
// use.
type credentialLog struct {
	clock clockwork.Clock
	lg    *zap.Logger // the worker's
	fatal chan error  // buffer 1: the error that ends Run; sent at most once

	mu          sync.Mutex // guards the fields below
	last        string     // the refusal logged last; "" after an accepted request
	wasAccepted bool       // an orchestrator accepted the credential once
	since       time.Time  // the first refusal, while none was accepted
	ended       bool       // fatal was sent
}

func newCredentialLog(clock clockwork.Clock, lg *zap.Logger) *credentialLog {
	return &credentialLog{clock: clock, lg: lg, fatal: make(chan error, 1)}
}

// refused logs err at error level unless it is the refusal logged last.
// Before any orchestrator accepted the credential, it also ends Run with
// ErrCredentialRefused once refusals have lasted credentialStartGrace.
func (c *credentialLog) refused(orchestrator string, err *CredentialError) {
	lg := c.lg
	msg := err.Error()
	now := c.clock.Now()
	c.mu.Lock()
	changed := c.last != msg
	c.last = msg
	var fatal error
	if !c.wasAccepted && !c.ended {
		if c.since.IsZero() {
			c.since = now
		}
		if now.Sub(c.since) >= credentialStartGrace {
			c.ended = true
			fatal = fmt.Errorf("%w: orchestrator %s: %w; %s", ErrCredentialRefused, orchestrator, err, credentialFix)
		}
	}
	accepted := c.wasAccepted
	c.mu.Unlock()
	switch {
	case fatal != nil:
		lg.Error("no orchestrator accepts the worker's credentials; stopping: "+credentialFix,
			zap.String("orchestrator", orchestrator), zap.Int("status", err.Status), zap.String("reason", err.Message),
			zap.Duration("refused_for", credentialStartGrace))
		c.fatal <- fatal // buffer 1, sent once
	case changed && !accepted:
		lg.Error("orchestrator refused the worker's credentials; the worker stops if no orchestrator accepts them within "+credentialStartGrace.String()+": "+credentialFix,
			zap.String("orchestrator", orchestrator), zap.Int("status", err.Status), zap.String("reason", err.Message))
	case changed:
		lg.Error("orchestrator refused the worker's credentials; backing off: "+credentialFix,
			zap.String("orchestrator", orchestrator), zap.Int("status", err.Status), zap.String("reason", err.Message))
	default:
		lg.Debug("credentials refused again", zap.String("orchestrator", orchestrator), zap.Int("status", err.Status))
	}
}

// stop ends Run with err, once, whatever was accepted before.
func (c *credentialLog) stop(err error) {
	c.mu.Lock()
	ended := c.ended
	c.ended = true
	c.mu.Unlock()
	if !ended {
		c.fatal <- err // buffer 1, sent once
	}
}

// accepted notes a registration or poll the orchestrator accepted (not a
// members-list read, which a credential of any role may make): from now
// on, refusals are logged and backed off, never fatal.
func (c *credentialLog) accepted() {
	c.mu.Lock()
	was := c.last
	c.last = ""
	c.wasAccepted = true
	c.mu.Unlock()
	if was != "" {
		c.lg.Info("orchestrator accepts the worker's credentials again")
	}
}

const userAgent = "jobfleet-worker"

// newBackOff returns the exponential back-off (with jitter) used between
// retries. It only computes intervals; waits use the worker's clock.
func newBackOff(initial, maxInterval time.Duration) *retry.Backoff {
	return retry.New(retry.Policy{Initial: initial, Max: maxInterval})
}

// defaultHTTPClient returns a client with its own transport, so that the
// worker can close its idle connections without touching anyone else's,
// using tc (if not nil) for HTTPS.
func defaultHTTPClient(maxIdlePerHost int, tc *tls.Config) *http.Client {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConnsPerHost = maxIdlePerHost
	if tc != nil {
		tr.TLSClientConfig = tc.Clone()
	}
	return &http.Client{Transport: tr}
}
