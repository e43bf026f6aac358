package worker

import (
	"fmt"
	"net/http"
)

// PolicyTransport is an http.RoundTripper that connects only where an
// HTTPPolicy permits, exactly as the "http" executor does: each URL's
// host is checked as written, each connection on the address it is made
// to, and the fleet's endpoints (HTTPPolicy.Fleet, and the orchestrators
// set with SetOrchestrators) are always refused. Connections are not kept
// alive. Orchestrators deliver run notifications through it. Safe for
// concurrent use.
type PolicyTransport struct {
	policy *destPolicy
	tr     *http.Transport
}

// NewPolicyTransport returns a transport enforcing p; an error names a
// bad entry of its lists.
func NewPolicyTransport(p HTTPPolicy) (*PolicyTransport, error) {
	d, err := newDestPolicy(p)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalidConfig, err)
	}
	return &PolicyTransport{policy: d, tr: newExecTransport(d, p.ProxyFromEnvironment)}, nil
}

// SetOrchestrators replaces the orchestrators' base URLs the transport
// refuses (the fleet's current members).
func (t *PolicyTransport) SetOrchestrators(addrs []string) {
	t.policy.setOrchestrators(normalizeAddrs(addrs))
}

// RoundTrip sends r if its URL passes the policy; a refusal is a
// *DestinationError (errors.Is ErrDestinationDenied) or names the problem.
func (t *PolicyTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	if err := t.policy.checkURL(r.URL); err != nil {
		if r.Body != nil {
			r.Body.Close()
		}
		return nil, err
	}
	return t.tr.RoundTrip(r)
}

// CloseIdleConnections closes the transport's idle connections.
func (t *PolicyTransport) CloseIdleConnections() { t.tr.CloseIdleConnections() }
