package auth

import (
	"context"
	"errors"
	"fmt"
	"strings"
)

// Errors of this package. Callers compare with errors.Is; messages add
// what was wrong (never a secret).
var (
	// ErrUnauthenticated: no credential, or one that is malformed,
	// unknown, revoked or expired. HTTP 401.
	ErrUnauthenticated = errors.New("not authenticated")
	// ErrForbidden: a valid credential whose role or job-ID prefix does
	// not allow the request. HTTP 403.
	ErrForbidden = errors.New("forbidden")
	// ErrNotReady: the credential cache has not loaded the credentials
	// from etcd yet, so a token cannot be checked. HTTP 503.
	ErrNotReady = errors.New("credentials not loaded yet")
	// ErrInvalid: a credential request or ID is malformed; the message
	// names the field. HTTP 400.
	ErrInvalid = errors.New("invalid credential request")
	// ErrNotFound: no credential has the ID. HTTP 404.
	ErrNotFound = errors.New("no such credential")
)

// Principal is an authenticated caller: the credential a request carried
// and what it may do.
type Principal struct {
	// ID is the credential's ID (BootstrapID for the bootstrap secret,
	// AnonymousID when authentication is off).
	ID string
	// Role is the credential's role.
	Role Role
	// Prefix, if not empty, limits the caller to jobs whose ID starts
	// with it.
	Prefix string
	// WorkerLabels, if not empty, is the label selector the labels of a
	// worker registering with this (worker) credential must satisfy.
	WorkerLabels string
}

// IDs of principals that are not stored credentials.
const (
	// BootstrapID is the principal of the secret in the orchestrator's
	// --admin-token-file.
	BootstrapID = "bootstrap"
	// AnonymousID is the principal of every request when authentication
	// is turned off (--insecure-no-auth): an admin.
	AnonymousID = "anonymous"
)

// InScope reports whether job jobID is within p's prefix scope (every job
// is, without a prefix).
func (p Principal) InScope(jobID string) bool { return strings.HasPrefix(jobID, p.Prefix) }

// Authorize decides whether p may make a request that needs access a on
// job jobID (hasJob false for requests about no single job: lists,
// cluster state). It returns nil or an error wrapping ErrForbidden whose
// message says what is missing. A job outside p's scope is refused
// whether it exists or not, so the refusal tells nothing about it.
func Authorize(p Principal, a Access, jobID string, hasJob bool) error {
	if !p.Role.Allows(a) {
		return fmt.Errorf("%w: credential %q (role %s) may not do this (needs %s)", ErrForbidden, p.ID, p.Role, needs(a))
	}
	if hasJob && !p.InScope(jobID) {
		return fmt.Errorf("%w: credential %q is limited to jobs whose ID starts with %q", ErrForbidden, p.ID, p.Prefix)
	}
	return nil
}

// needs describes the roles that have access a.
func needs(a Access) string {
	var rs []string
	for _, r := range Roles() {
		if r.Allows(a) {
			rs = append(rs, string(r))
		}
	}
	return "role " + strings.Join(rs, " or ")
}

type principalKey struct{}

// NewContext returns ctx carrying p.
func NewContext(ctx context.Context, p Principal) context.Context {
	return context.WithValue(ctx, principalKey{}, p)
}

// FromContext returns the principal ctx carries, if any.
func FromContext(ctx context.Context) (Principal, bool) {
	p, ok := ctx.Value(principalKey{}).(Principal)
	return p, ok
}
