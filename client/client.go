package client

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/jobfleet/jobfleet/api"
)

// MaxReplyBytes caps the reply the client reads; longer replies fail.
const MaxReplyBytes = 64 << 20

// Config configures a Client.
type Config struct {
	// Server is the orchestrator's base URL: http://HOST:PORT or
	// https://HOST:PORT (a bare HOST:PORT means http). Required.
	Server string
	// Token is the bearer token sent with every request; "" sends none.
	Token string
	// CAFile names a PEM file of the CAs that verify an https server;
	// empty uses TLS.RootCAs, else the system's CAs.
	CAFile string
	// CertFile and KeyFile name a PEM client certificate and its key,
	// presented to servers that ask for one. Both or neither.
	CertFile, KeyFile string
	// TLS is the base TLS configuration (cloned, not modified); nil is a
	// default one with TLS 1.2 at least.
	TLS *tls.Config
	// Timeout bounds each request, reply included; 0 means no bound but
	// the request's context. A long poll needs more than its wait.
	Timeout time.Duration
	// Transport sends the requests; nil is a clone of
	// http.DefaultTransport with the TLS configuration above. Given, it
	// is used as is (CAFile, CertFile, KeyFile and TLS are then ignored).
	Transport http.RoundTripper
}

// Client sends requests to one orchestrator. It is safe for concurrent
// use. Close releases its idle connections.
type Client struct {
	base *url.URL
	hc   *http.Client
	tr   http.RoundTripper
}

// New returns a client of cfg.Server. It fails if the server URL is not an
// http or https URL, or a TLS file cannot be read; it does not contact the
// server.
func New(cfg Config) (*Client, error) {
	base, err := ParseServer(cfg.Server)
	if err != nil {
		return nil, err
	}
	tr := cfg.Transport
	if tr == nil {
		tc, err := tlsConfig(cfg)
		if err != nil {
			return nil, err
		}
		t := http.DefaultTransport.(*http.Transport).Clone()
		t.TLSClientConfig = tc
		tr = t
	}
	if cfg.Token != "" {
		tr = bearer{token: cfg.Token, base: tr}
	}
	return &Client{base: base, tr: tr, hc: &http.Client{Transport: tr, Timeout: cfg.Timeout}}, nil
}

// ParseServer parses an orchestrator's address as Config.Server takes it:
// an http or https URL without user, query or fragment, or a bare
// HOST:PORT for http.
func ParseServer(s string) (*url.URL, error) {
	raw := strings.TrimSpace(s)
	if !strings.Contains(raw, "://") {
		raw = "http://" + raw
	}
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.User != nil || u.RawQuery != "" || u.Fragment != "" {
		return nil, fmt.Errorf("client: server %q: want a URL such as http://127.0.0.1:8080 or https://orchestrator:8443, or HOST:PORT", s)
	}
	if err := api.CheckPort(u); err != nil {
		return nil, fmt.Errorf("client: server %q: %w", s, err)
	}
	return u, nil
}

// tlsConfig builds the TLS configuration of cfg's files.
func tlsConfig(cfg Config) (*tls.Config, error) {
	tc := &tls.Config{MinVersion: tls.VersionTLS12}
	if cfg.TLS != nil {
		tc = cfg.TLS.Clone()
	}
	if (cfg.CertFile == "") != (cfg.KeyFile == "") {
		return nil, errors.New("client: CertFile and KeyFile go together")
	}
	if cfg.CertFile != "" {
		pair, err := tls.LoadX509KeyPair(cfg.CertFile, cfg.KeyFile)
		if err != nil {
			return nil, fmt.Errorf("client: CertFile/KeyFile: %w", err)
		}
		tc.Certificates = []tls.Certificate{pair}
	}
	if cfg.CAFile != "" {
		pem, err := os.ReadFile(cfg.CAFile)
		if err != nil {
			return nil, fmt.Errorf("client: CAFile: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("client: CAFile: no certificate found in %s", cfg.CAFile)
		}
		tc.RootCAs = pool
	}
	return tc, nil
}

// bearer sends a bearer token on every request (on a copy of it).
type bearer struct {
	token string
	base  http.RoundTripper
}

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r2 := r.Clone(r.Context())
	r2.Header.Set("Authorization", "Bearer "+b.token)
	return b.base.RoundTrip(r2)
}

func (b bearer) CloseIdleConnections() { closeIdle(b.base) }

func closeIdle(rt http.RoundTripper) {
	if c, ok := rt.(interface{ CloseIdleConnections() }); ok {
		c.CloseIdleConnections()
	}
}

// Server returns the base URL the client sends to.
func (c *Client) Server() string { return c.base.String() }

// Close closes the client's idle connections. The client stays usable.
func (c *Client) Close() { closeIdle(c.tr) }

// request describes one API call.
type request struct {
	method string
	path   string     // escaped API path, e.g. "/v1/jobs/a%2Fb"
	query  url.Values // nil for none
	body   any        // encoded as JSON; []byte is sent as is; nil for none
	out    any        // decoded from a 2xx reply; nil ignores the body
	errOut any        // if set, decoded (best effort) from a non-2xx reply too
}

// do sends r and decodes its reply; it returns the status code (0 if no
// reply came).
func (c *Client) do(ctx context.Context, r request) (int, error) {
	u := *c.base
	escaped := strings.TrimRight(c.base.EscapedPath(), "/") + r.path
	p, err := url.PathUnescape(escaped)
	if err != nil {
		return 0, fmt.Errorf("%s %s: %w", r.method, r.path, err)
	}
	u.Path, u.RawPath = p, escaped
	if len(r.query) > 0 {
		u.RawQuery = r.query.Encode()
	}
	var body io.Reader
	switch b := r.body.(type) {
	case nil:
	case []byte:
		body = bytes.NewReader(b)
	default:
		data, err := json.Marshal(b)
		if err != nil {
			return 0, fmt.Errorf("%s %s: encode the request: %w", r.method, r.path, err)
		}
		body = bytes.NewReader(data)
	}
	req, err := http.NewRequestWithContext(ctx, r.method, u.String(), body)
	if err != nil {
		return 0, fmt.Errorf("%s %s: %w", r.method, r.path, err)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		return 0, err // *url.Error names the method and URL
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, MaxReplyBytes+1))
	if err != nil {
		return resp.StatusCode, fmt.Errorf("%s %s: read the reply: %w", r.method, r.path, err)
	}
	if len(data) > MaxReplyBytes {
		return resp.StatusCode, fmt.Errorf("%s %s: the reply is over %d bytes", r.method, r.path, MaxReplyBytes)
	}
	if resp.StatusCode/100 != 2 {
		if r.errOut != nil {
			_ = json.Unmarshal(data, r.errOut) // the error reply is what callers act on
		}
		return resp.StatusCode, replyError(resp, data)
	}
	if r.out == nil {
		return resp.StatusCode, nil
	}
	// An empty body is not an empty document: a server that failed after
	// its status line would otherwise pass for one with nothing to show.
	if err := json.Unmarshal(data, r.out); err != nil {
		return resp.StatusCode, fmt.Errorf("%s %s: bad reply: %w", r.method, r.path, err)
	}
	return resp.StatusCode, nil
}

// replyError makes the *Error of a non-2xx reply.
func replyError(resp *http.Response, data []byte) *Error {
	e := &Error{StatusCode: resp.StatusCode, Status: resp.Status}
	var doc struct {
		api.Error
		Reason    string `json:"reason"`
		Owner     string `json:"owner"`
		OwnerAddr string `json:"owner_addr"`
	}
	if json.Unmarshal(data, &doc) == nil && (doc.Message != "" || doc.Reason != "") {
		e.Message = doc.Message + doc.Reason
		e.Owner, e.OwnerAddr = doc.Owner, doc.OwnerAddr
	} else {
		e.Message = strings.TrimSpace(string(data))
	}
	if s := resp.Header.Get("Retry-After"); s != "" {
		if secs, err := time.ParseDuration(s + "s"); err == nil && secs >= 0 {
			e.RetryAfter = secs
		} else if t, err := http.ParseTime(s); err == nil {
			e.RetryAfter = max(time.Until(t), 0)
		}
	}
	return e
}
