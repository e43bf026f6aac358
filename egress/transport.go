package egress

import (
	"net/http"
	"net/url"
)

// Transport is an http.RoundTripper that connects only where a Policy
// permits, exactly as the worker's "http" executor does: each URL's host
// is checked as written, each connection on the address it is made to,
// and the fleet's endpoints (Policy.Fleet, and the orchestrators set with
// SetOrchestrators) are always refused. Connections are not kept
// alive. Orchestrators deliver run notifications through it. Safe for
// concurrent use.
type Transport struct {
	policy *Guard
	tr     *http.Transport
}

// NewTransport returns a transport enforcing p; an error names a
// bad entry of its lists and wraps ErrInvalidPolicy.
func NewTransport(p Policy) (*Transport, error) {
	d, err := NewGuard(p)
	if err != nil {
		return nil, err
	}
	return &Transport{policy: d, tr: d.HTTPTransport(p.ProxyFromEnvironment)}, nil
}

// SetOrchestrators replaces the orchestrators' base URLs the transport
// refuses (the fleet's current members).
func (t *Transport) SetOrchestrators(addrs []string) {
	t.policy.SetOrchestrators(addrs)
}

// CheckURL checks u as RoundTrip checks a request's URL before sending
// it (Guard.CheckURL): its host as written, without resolving a name (a
// name's addresses are checked when a connection is made). A refusal is
// a *DestinationError naming the rule, and the allow setting for a
// default denial.
func (t *Transport) CheckURL(u *url.URL) error { return t.policy.CheckURL(u) }

// RoundTrip sends r if its URL passes the policy; a refusal is a
// *DestinationError (errors.Is ErrDestinationDenied) or names the problem.
func (t *Transport) RoundTrip(r *http.Request) (*http.Response, error) {
	if err := t.policy.CheckURL(r.URL); err != nil {
		if r.Body != nil {
			r.Body.Close()
		}
		return nil, err
	}
	return t.tr.RoundTrip(r)
}

// CloseIdleConnections closes the transport's idle connections.
func (t *Transport) CloseIdleConnections() { t.tr.CloseIdleConnections() }

// HTTPTransport returns a transport whose every connection is dialed
// through d (DialContext) and none kept alive, so that each request is
// checked against the fleet's current endpoints; with proxyFromEnv it
// uses the proxy of HTTP_PROXY, HTTPS_PROXY and NO_PROXY. The requests'
// URLs are not checked: call CheckURL before sending (Transport does).
func (d *Guard) HTTPTransport(proxyFromEnv bool) *http.Transport {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.DialContext = d.DialContext
	tr.Proxy = nil
	if proxyFromEnv {
		tr.Proxy = http.ProxyFromEnvironment
	}
	tr.DisableKeepAlives = true
	return tr
}
