package admin_test

import (
	"context"
	"fmt"
	"net/http"

	"github.com/jobfleet/jobfleet/api"

	"github.com/jobfleet/jobfleet/auth"
)

// staticAuth is an admin.Authenticator over fixed tokens, for the tests
// of the endpoints themselves; the security tests use the real
// credential cache over etcd.
type staticAuth map[string]auth.Principal

func (s staticAuth) Authenticate(bearer, certID string) (auth.Principal, error) {
	p, ok := s[bearer]
	if !ok || certID != "" {
		return auth.Principal{}, fmt.Errorf("%w: unknown test token", auth.ErrUnauthenticated)
	}
	return p, nil
}

func (staticAuth) WaitRevision(context.Context, int64) error { return nil }

// adminToken is testAuth's admin.
const adminToken = "test-admin-token"

var testAuth = staticAuth{adminToken: {ID: "test-admin", Role: api.RoleAdmin}}

// asAdmin makes r carry adminToken (r must be usable by a client: for
// httptest.NewRequest, clear RequestURI before sending it).
func asAdmin(r *http.Request) *http.Request {
	r.Header.Set("Authorization", "Bearer "+adminToken)
	if r.URL.IsAbs() {
		r.RequestURI = ""
	}
	return r
}
