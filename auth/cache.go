package auth

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/json"
	"errors"
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
			rec, err := decodeRecord(key, kv)
			if err != nil {
				c.lg.Warn("ignoring a corrupt credential record", zap.String("credential", key), zap.Error(err))
				continue
			}
			creds[key] = rec
		}
		c.rev, c.creds = snap.Revision, creds
	}
	return c.creds, true
}

// decodeRecord decodes the stored credential kv of ID key.
func decodeRecord(key string, kv mirror.KV) (record, error) {
	var rec record
	if err := json.Unmarshal(kv.Value, &rec); err != nil {
		return record{}, err
	}
	if rec.ID != key || !rec.Role.Valid() || rec.Hash == "" {
		return record{}, errors.New("the record's ID, role or hash is missing or wrong")
	}
	return rec, nil
}

// Follow returns a context derived from ctx that is cancelled as soon as
// the credential of p, a principal this cache authenticated, stops being
// what it was: revoked (its record deleted), replaced (another secret,
// role, prefix or expiry under its ID), or expired by the cache's clock.
// The context's cause (context.Cause) then wraps ErrUnauthenticated and
// says which. It is for responses that outlive the authentication of
// their request: event streams and long polls run under it, so that they
// end within moments of a revocation, as every new request does.
//
// Each call starts one goroutine, woken by changes of the stored
// credentials and by the expiry, never by polling; stop cancels the
// context and returns once that goroutine has exited, and must be called
// when the response ends. The bootstrap and anonymous principals, which
// no record backs, end only with ctx.
func (c *Cache) Follow(ctx context.Context, p Principal) (_ context.Context, stop func()) {
	fctx, cancel := context.WithCancelCause(ctx)
	if p.ID == BootstrapID || p.ID == AnonymousID {
		return fctx, func() { cancel(context.Canceled) }
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := c.follow(fctx, p); err != nil {
			cancel(err)
		}
	}()
	return fctx, func() { cancel(context.Canceled); <-done }
}

// follow waits until p's credential changes, is revoked or expires, and
// returns why, or returns nil when ctx ends.
func (c *Cache) follow(ctx context.Context, p Principal) error {
	var (
		want   *record
		expiry <-chan time.Time
	)
	for {
		snap := c.m.Snapshot()
		kv, ok := snap.KVs[p.ID]
		if !ok {
			return fmt.Errorf("%w: credential %q was revoked", ErrUnauthenticated, p.ID)
		}
		rec, err := decodeRecord(p.ID, kv)
		switch {
		case err != nil:
			return fmt.Errorf("%w: credential %q was replaced by a corrupt record", ErrUnauthenticated, p.ID)
		case want == nil && (rec.Role != p.Role || rec.Prefix != p.Prefix || rec.WorkerLabels != p.WorkerLabels):
			return fmt.Errorf("%w: credential %q was replaced", ErrUnauthenticated, p.ID)
		case want == nil:
			want = &rec
			if !rec.ExpiresAt.IsZero() {
				t := c.clock.NewTimer(rec.ExpiresAt.Sub(c.clock.Now()))
				defer t.Stop()
				expiry = t.Chan()
			}
		case rec.Hash != want.Hash || rec.Role != want.Role || rec.Prefix != want.Prefix || rec.WorkerLabels != want.WorkerLabels || !rec.ExpiresAt.Equal(want.ExpiresAt):
			return fmt.Errorf("%w: credential %q was replaced", ErrUnauthenticated, p.ID)
		}
		if rec.expired(c.clock.Now()) {
			return fmt.Errorf("%w: credential %q expired at %s", ErrUnauthenticated, p.ID, rec.ExpiresAt.Format(time.RFC3339))
		}
		select {
		case <-snap.Changed():
		case <-expiry:
			return fmt.Errorf("%w: credential %q expired at %s", ErrUnauthenticated, p.ID, want.ExpiresAt.Format(time.RFC3339))
		case <-ctx.Done():
			return nil
		}
	}
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
	return Principal{ID: rec.ID, Role: rec.Role, Prefix: rec.Prefix, WorkerLabels: rec.WorkerLabels}, nil
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
