package auth

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/jonboulle/clockwork"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/jobfleet/jobfleet/internal/mirror"
)

// CacheConfig configures a Cache.
type CacheConfig struct {
	// Namespace is the cluster's etcd key prefix, ending in "/".
	Namespace string
	// Bootstrap, if not empty, is a secret accepted as the admin
	// credential BootstrapID (from --admin-token-file; at least
	// MinBootstrapBytes). It is kept only as a hash.
	Bootstrap string
	// Clock decides expiry; nil means the real clock.
	Clock clockwork.Clock
	// Logger receives a line per corrupt record; nil means no logs.
	Logger *zap.Logger
}

// Cache authenticates requests from an in-memory copy of the stored
// credentials, kept current by a watch of their etcd prefix
// (internal/mirror: list, then watch, listing again after compaction or a
// lost connection). A request never waits on etcd, and a credential
// created, replaced or revoked anywhere takes effect here as soon as the
// watch delivers it, normally within milliseconds. Expiry is checked at
// each request against the clock. Safe for concurrent use.
type Cache struct {
	m         *mirror.Mirror
	clock     clockwork.Clock
	lg        *zap.Logger
	bootstrap []byte // SHA-256 of the bootstrap secret; nil for none

	mu    sync.Mutex        // guards rev and creds
	rev   int64             // the mirror revision creds was decoded from
	creds map[string]record // by ID
}

// NewCache returns a cache of the credentials of namespace cfg.Namespace.
// It starts nothing: Run keeps it current.
func NewCache(client *clientv3.Client, cfg CacheConfig) (*Cache, error) {
	if cfg.Clock == nil {
		cfg.Clock = clockwork.NewRealClock()
	}
	if cfg.Logger == nil {
		cfg.Logger = zap.NewNop()
	}
	if cfg.Bootstrap != "" && len(cfg.Bootstrap) < MinBootstrapBytes {
		return nil, fmt.Errorf("auth: bootstrap secret of %d bytes; it needs at least %d", len(cfg.Bootstrap), MinBootstrapBytes)
	}
	m, err := mirror.New(client, mirror.Config{Prefix: TokensPrefix(cfg.Namespace), Clock: cfg.Clock, Logger: cfg.Logger})
	if err != nil {
		return nil, fmt.Errorf("auth: %w", err)
	}
	c := &Cache{m: m, clock: cfg.Clock, lg: cfg.Logger}
	if cfg.Bootstrap != "" {
		sum := sha256.Sum256([]byte(cfg.Bootstrap))
		c.bootstrap = sum[:]
	}
	return c, nil
}

// Run keeps the cache current until ctx is cancelled, then returns nil.
func (c *Cache) Run(ctx context.Context) error { return c.m.Run(ctx) }

// Ready reports whether the credentials have been loaded once.
func (c *Cache) Ready() bool { return c.m.Snapshot().Revision > 0 }

// WaitRevision blocks until the cache reflects etcd revision rev (a write
// of the store under this prefix), or returns ctx's error.
func (c *Cache) WaitRevision(ctx context.Context, rev int64) error {
	_, err := c.m.WaitFor(ctx, func(s mirror.Snapshot) bool { return s.Revision >= rev })
	return err
}

// current returns the decoded credentials of the latest snapshot, and
// whether there is one yet.
func (c *Cache) current() (map[string]record, bool) {
	snap := c.m.Snapshot()
	c.mu.Lock()
	defer c.mu.Unlock()
	if snap.Revision == 0 {
		return nil, false
	}
	if snap.Revision != c.rev {
		creds := make(map[string]record, len(snap.KVs))
		for key, kv := range snap.KVs {
			var rec record
			if err := json.Unmarshal(kv.Value, &rec); err != nil || rec.ID != key || !rec.Role.Valid() || rec.Hash == "" {
				c.lg.Warn("ignoring a corrupt credential record", zap.String("credential", key), zap.Error(err))
				continue
			}
			creds[key] = rec
		}
		c.rev, c.creds = snap.Revision, creds
	}
	return c.creds, true
}

// Authenticate returns the principal of a request that carried bearer
// token bearer ("" for none) and, over TLS, a verified client certificate
// whose Subject CommonName is certID ("" for none).
//
// The bootstrap secret is the admin BootstrapID. A stored credential is
// found by the ID in its token (or the certificate's CommonName) and its
// secret's hash compared in constant time; it must not have expired. With
// both a token and a certificate, they must name the same credential.
//
// Errors: ErrUnauthenticated (no credential, or a malformed, unknown,
// revoked or expired one; the message says which without quoting the
// token), ErrNotReady before the credentials are first loaded.
func (c *Cache) Authenticate(bearer, certID string) (Principal, error) {
	if bearer == "" && certID == "" {
		return Principal{}, fmt.Errorf("%w: no credential: send \"Authorization: Bearer <token>\"", ErrUnauthenticated)
	}
	if bearer != "" && c.bootstrap != nil {
		sum := sha256.Sum256([]byte(bearer))
		if subtle.ConstantTimeCompare(sum[:], c.bootstrap) == 1 {
			if certID != "" {
				return Principal{}, fmt.Errorf("%w: the bootstrap token cannot be combined with a client certificate", ErrUnauthenticated)
			}
			return Principal{ID: BootstrapID, Role: RoleAdmin}, nil
		}
	}
	id, secret := certID, ""
	if bearer != "" {
		tid, sec, err := ParseToken(bearer)
		if err != nil {
			return Principal{}, err
		}
		if certID != "" && tid != certID {
			return Principal{}, fmt.Errorf("%w: the bearer token names credential %q but the client certificate names %q", ErrUnauthenticated, tid, certID)
		}
		id, secret = tid, sec
	}
	creds, ok := c.current()
	if !ok {
		return Principal{}, ErrNotReady
	}
	rec, ok := creds[id]
	if !ok || (bearer != "" && !hashMatches(secret, rec.Hash)) {
		return Principal{}, fmt.Errorf("%w: unknown or revoked credential", ErrUnauthenticated)
	}
	if rec.expired(c.clock.Now()) {
		return Principal{}, fmt.Errorf("%w: credential %q expired at %s", ErrUnauthenticated, id, rec.ExpiresAt.Format(time.RFC3339))
	}
	return Principal{ID: rec.ID, Role: rec.Role, Prefix: rec.Prefix}, nil
}

// BearerToken returns the token of an "Authorization: Bearer <token>"
// header of r, "" if it has none. Another scheme is an error wrapping
// ErrUnauthenticated.
func BearerToken(r *http.Request) (string, error) {
	h := r.Header.Get("Authorization")
	if h == "" {
		return "", nil
	}
	scheme, tok, ok := strings.Cut(h, " ")
	tok = strings.TrimLeft(tok, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") || tok == "" {
		return "", fmt.Errorf("%w: the Authorization header must be \"Bearer <token>\"", ErrUnauthenticated)
	}
	return tok, nil
}

// BearerTransport is an http.RoundTripper that sends Token as a bearer
// token on every request (on a copy: the caller's request is not
// modified). It is how in-process workers and tools authenticate.
type BearerTransport struct {
	// Token is the bearer token.
	Token string
	// Base sends the requests; nil means http.DefaultTransport.
	Base http.RoundTripper
}

// RoundTrip implements http.RoundTripper.
func (t *BearerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	base := t.Base
	if base == nil {
		base = http.DefaultTransport
	}
	if t.Token == "" {
		return base.RoundTrip(r)
	}
	r2 := r.Clone(r.Context())
	r2.Header.Set("Authorization", "Bearer "+t.Token)
	return base.RoundTrip(r2)
}

// CloseIdleConnections closes the base transport's idle connections.
func (t *BearerTransport) CloseIdleConnections() {
	type closer interface{ CloseIdleConnections() }
	base := t.Base
	if base == nil {
		base = http.DefaultTransport
	}
	if c, ok := base.(closer); ok {
		c.CloseIdleConnections()
	}
}
