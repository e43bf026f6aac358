package auth_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jobfleet/jobfleet/api"

	"github.com/jonboulle/clockwork"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap/zaptest"

	"github.com/jobfleet/jobfleet/auth"
	"github.com/jobfleet/jobfleet/internal/testkit/authtest"
	"github.com/jobfleet/jobfleet/internal/testkit/etcdtest"
)

var etcd *etcdtest.Server

func TestMain(m *testing.M) { os.Exit(etcdtest.Main(m, &etcd)) }

// env is a credential store and a running cache over a fresh namespace.
type env struct {
	client *clientv3.Client
	ns     string
	store  *auth.Store
	cache  *auth.Cache
	clock  *clockwork.FakeClock
}

func newEnv(t *testing.T, bootstrap string) *env {
	t.Helper()
	e := &env{client: etcd.Client(t), ns: etcdtest.Namespace(t), clock: clockwork.NewFakeClockAt(time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC))}
	e.store = auth.NewStore(e.client, e.ns, e.clock.Now)
	e.cache = authtest.RunCache(t, e.client, auth.CacheConfig{Namespace: e.ns, Bootstrap: bootstrap, Clock: e.clock, Logger: zaptest.NewLogger(t)})
	return e
}

func (e *env) create(t *testing.T, req api.CreateRequest) api.Created {
	t.Helper()
	c, rev, err := e.store.Create(context.Background(), req, "tester")
	if err != nil {
		t.Fatal(err)
	}
	e.wait(t, rev)
	return c
}

// issueAdmin issues the admin credential "dev-admin" (replacing the one
// issued before, as jobfleet dev does) and waits until the cache has it.
func (e *env) issueAdmin(t *testing.T) api.Created {
	t.Helper()
	c, rev, err := e.store.Issue(context.Background(), "dev-admin", api.CreateRequest{Role: api.RoleAdmin}, "")
	if err != nil {
		t.Fatal(err)
	}
	e.wait(t, rev)
	return c
}

// revoke revokes credential id and waits until the cache has read it.
func (e *env) revoke(t *testing.T, id string) {
	t.Helper()
	rev, err := e.store.Revoke(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	e.wait(t, rev)
}

func (e *env) wait(t *testing.T, rev int64) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := e.cache.WaitRevision(ctx, rev); err != nil {
		t.Fatalf("cache did not reach revision %d: %v", rev, err)
	}
}

func wantUnauthenticated(t *testing.T, p auth.Principal, err error, msg string) {
	t.Helper()
	if !errors.Is(err, auth.ErrUnauthenticated) {
		t.Fatalf("got %+v, %v; want ErrUnauthenticated", p, err)
	}
	if !strings.Contains(err.Error(), msg) {
		t.Errorf("error %q does not say %q", err, msg)
	}
}

func TestCreateAuthenticateRevoke(t *testing.T) {
	e := newEnv(t, "")
	c := e.create(t, api.CreateRequest{Role: api.RoleOperator, Prefix: "billing/", Description: "billing team"})
	if c.CreatedBy != "tester" || c.Role != api.RoleOperator || c.Prefix != "billing/" || !c.CreatedAt.Equal(e.clock.Now().Truncate(time.Millisecond)) {
		t.Errorf("created %+v", c.Token)
	}
	p, err := e.cache.Authenticate(c.Secret, "")
	if err != nil || p != (auth.Principal{ID: c.ID, Role: api.RoleOperator, Prefix: "billing/"}) {
		t.Fatalf("Authenticate = %+v, %v", p, err)
	}

	// The secret is not stored: only its hash is.
	resp, err := e.client.Get(context.Background(), auth.TokensPrefix(e.ns)+c.ID)
	if err != nil || len(resp.Kvs) != 1 {
		t.Fatalf("stored record: %v, %v", resp, err)
	}
	_, secret, _ := auth.ParseToken(c.Secret)
	if strings.Contains(string(resp.Kvs[0].Value), secret) {
		t.Fatalf("the secret is stored in etcd: %s", resp.Kvs[0].Value)
	}

	// A wrong secret with the right ID is refused.
	forged := auth.FormatToken(c.ID, strings.Repeat("A", len(secret)))
	p, err = e.cache.Authenticate(forged, "")
	wantUnauthenticated(t, p, err, "unknown or revoked")

	e.revoke(t, c.ID)
	p, err = e.cache.Authenticate(c.Secret, "")
	wantUnauthenticated(t, p, err, "unknown or revoked")
	if _, err := e.store.Revoke(context.Background(), c.ID); !errors.Is(err, auth.ErrNotFound) {
		t.Errorf("revoking twice: %v, want ErrNotFound", err)
	}
}

// TestWorkerLabels: a worker credential limited to worker labels keeps
// them, its principal carries them, and a replacement with other labels
// ends what follows the credential.
func TestWorkerLabels(t *testing.T) {
	e := newEnv(t, "")
	c := e.create(t, api.CreateRequest{Role: api.RoleWorker, WorkerLabels: " pool=gpu,!spot "})
	if c.WorkerLabels != "pool=gpu,!spot" {
		t.Fatalf("created with worker labels %q, want them trimmed", c.WorkerLabels)
	}
	p, err := e.cache.Authenticate(c.Secret, "")
	if err != nil || p != (auth.Principal{ID: c.ID, Role: api.RoleWorker, WorkerLabels: "pool=gpu,!spot"}) {
		t.Fatalf("Authenticate = %+v, %v", p, err)
	}
	list, err := e.store.List(context.Background())
	if err != nil || len(list) != 1 || list[0].WorkerLabels != "pool=gpu,!spot" {
		t.Fatalf("List = %+v, %v", list, err)
	}
	ctx, stop := e.cache.Follow(context.Background(), p)
	defer stop()
	// The same record (same secret), with other worker labels.
	key := auth.TokensPrefix(e.ns) + c.ID
	resp, err := e.client.Get(context.Background(), key)
	if err != nil || len(resp.Kvs) != 1 {
		t.Fatalf("stored record: %v, %v", resp, err)
	}
	var rec map[string]any
	if err := json.Unmarshal(resp.Kvs[0].Value, &rec); err != nil {
		t.Fatal(err)
	}
	rec["worker_labels"] = "pool=cpu"
	b, _ := json.Marshal(rec)
	put, err := e.client.Put(context.Background(), key, string(b))
	if err != nil {
		t.Fatal(err)
	}
	e.wait(t, put.Header.Revision)
	if p, err := e.cache.Authenticate(c.Secret, ""); err != nil || p.WorkerLabels != "pool=cpu" {
		t.Fatalf("after the change, Authenticate = %+v, %v", p, err)
	}
	select {
	case <-ctx.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("following the credential did not end when its worker labels changed")
	}
}

func TestExpiry(t *testing.T) {
	e := newEnv(t, "")
	c := e.create(t, api.CreateRequest{Role: api.RoleViewer, TTL: "1h"})
	if want := e.clock.Now().Add(time.Hour).Truncate(time.Millisecond); !c.ExpiresAt.Equal(want) {
		t.Fatalf("expires at %v, want %v", c.ExpiresAt, want)
	}
	e.clock.Advance(time.Hour - time.Millisecond)
	if _, err := e.cache.Authenticate(c.Secret, ""); err != nil {
		t.Fatalf("before expiry: %v", err)
	}
	e.clock.Advance(time.Millisecond)
	p, err := e.cache.Authenticate(c.Secret, "")
	wantUnauthenticated(t, p, err, "expired")
	if _, err := e.store.Verify(context.Background(), c.Secret); !errors.Is(err, auth.ErrUnauthenticated) {
		t.Errorf("Verify of an expired credential: %v", err)
	}
}

func TestCreateInvalid(t *testing.T) {
	e := newEnv(t, "")
	tests := []struct {
		req   api.CreateRequest
		field string
	}{
		{api.CreateRequest{Role: "root"}, "role"},
		{api.CreateRequest{}, "role"},
		{api.CreateRequest{Role: api.RoleAdmin, Prefix: "x/"}, "prefix"},
		{api.CreateRequest{Role: api.RoleViewer, Prefix: strings.Repeat("p", auth.MaxPrefixBytes+1)}, "prefix"},
		{api.CreateRequest{Role: api.RoleOperator, Prefix: "billing\u3164/"}, "prefix"},
		{api.CreateRequest{Role: api.RoleOperator, Prefix: "\uff42illing/"}, "prefix"},
		{api.CreateRequest{Role: api.RoleOperator, Prefix: "billing\u200b/"}, "prefix"},
		{api.CreateRequest{Role: api.RoleViewer, Description: "a\x1b[31m"}, "description"},
		{api.CreateRequest{Role: api.RoleViewer, Description: "\xff"}, "description"},
		{api.CreateRequest{Role: api.RoleViewer, TTL: "soon"}, "ttl"},
		{api.CreateRequest{Role: api.RoleViewer, TTL: "-1h"}, "ttl"},
		{api.CreateRequest{Role: api.RoleViewer, TTL: "0s"}, "ttl"},
		{api.CreateRequest{Role: api.RoleViewer, TTL: "1ns"}, "ttl"},
		{api.CreateRequest{Role: api.RoleViewer, TTL: "59s"}, "ttl"},
		{api.CreateRequest{Role: api.RoleOperator, WorkerLabels: "pool=gpu"}, "worker_labels"},
		{api.CreateRequest{Role: api.RoleWorker, WorkerLabels: "pool in gpu"}, "worker_labels"},
		{api.CreateRequest{Role: api.RoleWorker, WorkerLabels: "pool=" + strings.Repeat("g", 64)}, "worker_labels"},
	}
	for _, tt := range tests {
		_, _, err := e.store.Create(context.Background(), tt.req, "")
		if !errors.Is(err, auth.ErrInvalid) || !strings.Contains(err.Error(), tt.field+":") {
			t.Errorf("Create(%+v) = %v; want ErrInvalid naming %s", tt.req, err, tt.field)
		}
	}
	resp, err := e.client.Get(context.Background(), e.ns, clientv3.WithPrefix(), clientv3.WithCountOnly())
	if err != nil || resp.Count != 0 {
		t.Fatalf("refused requests stored %d keys (%v)", resp.Count, err)
	}
}

func TestIssueReplaces(t *testing.T) {
	e := newEnv(t, "")
	ctx := context.Background()
	first := e.issueAdmin(t)
	second := e.issueAdmin(t)
	if first.Secret == second.Secret {
		t.Fatal("Issue reused the secret")
	}
	p, err := e.cache.Authenticate(first.Secret, "")
	wantUnauthenticated(t, p, err, "unknown or revoked")
	if p, err := e.cache.Authenticate(second.Secret, ""); err != nil || p.ID != "dev-admin" {
		t.Fatalf("new token: %+v, %v", p, err)
	}
	list, err := e.store.List(ctx)
	if err != nil || len(list) != 1 || list[0].ID != "dev-admin" {
		t.Fatalf("List = %+v, %v; want only dev-admin", list, err)
	}
	if tok, err := e.store.Verify(ctx, second.Secret); err != nil || tok.ID != "dev-admin" {
		t.Errorf("Verify(new) = %+v, %v", tok, err)
	}
	if _, err := e.store.Verify(ctx, first.Secret); !errors.Is(err, auth.ErrUnauthenticated) {
		t.Errorf("Verify(old) = %v, want ErrUnauthenticated", err)
	}
	if _, _, err := e.store.Issue(ctx, "Bad ID", api.CreateRequest{Role: api.RoleAdmin}, ""); !errors.Is(err, auth.ErrInvalid) {
		t.Errorf("Issue with a bad ID: %v", err)
	}
}

func TestListOrdered(t *testing.T) {
	e := newEnv(t, "")
	var ids []string
	for range 5 {
		ids = append(ids, e.create(t, api.CreateRequest{Role: api.RoleViewer}).ID)
	}
	list, err := e.store.List(context.Background())
	if err != nil || len(list) != 5 {
		t.Fatalf("List = %d, %v", len(list), err)
	}
	slices.Sort(ids)
	for i := range list {
		if list[i].ID != ids[i] {
			t.Fatalf("List's credential %d is %v, want %v: every credential created, ordered by ID", i, list[i].ID, ids[i])
		}
	}
}

func TestBootstrap(t *testing.T) {
	secret := strings.Repeat("b", 40)
	e := newEnv(t, secret)
	// The bootstrap works before the credentials are loaded (etcd may be
	// unreachable: it is the way in).
	p, err := e.cache.Authenticate(secret, "")
	if err != nil || p != (auth.Principal{ID: auth.BootstrapID, Role: api.RoleAdmin}) {
		t.Fatalf("bootstrap: %+v, %v", p, err)
	}
	p, err = e.cache.Authenticate(secret+"x", "")
	wantUnauthenticated(t, p, err, "malformed")
	p, err = e.cache.Authenticate(secret, "someone")
	wantUnauthenticated(t, p, err, "client certificate")
	// A certificate naming "bootstrap" is no bootstrap: that is no stored
	// credential.
	e.wait(t, 1)
	p, err = e.cache.Authenticate("", auth.BootstrapID)
	wantUnauthenticated(t, p, err, "unknown")

	if _, err := auth.NewCache(e.client, auth.CacheConfig{Namespace: e.ns, Bootstrap: "short"}); err == nil {
		t.Error("NewCache accepted a short bootstrap secret")
	}
}

func TestClientCertificateIdentity(t *testing.T) {
	e := newEnv(t, "")
	c := e.create(t, api.CreateRequest{Role: api.RoleWorker, Prefix: "etl/"})
	other := e.create(t, api.CreateRequest{Role: api.RoleViewer})
	if p, err := e.cache.Authenticate("", c.ID); err != nil || p.ID != c.ID || p.Role != api.RoleWorker || p.Prefix != "etl/" {
		t.Fatalf("certificate alone: %+v, %v", p, err)
	}
	if p, err := e.cache.Authenticate(c.Secret, c.ID); err != nil || p.ID != c.ID {
		t.Fatalf("certificate and its token: %+v, %v", p, err)
	}
	p, err := e.cache.Authenticate(other.Secret, c.ID)
	wantUnauthenticated(t, p, err, "names credential")
	p, err = e.cache.Authenticate("", "nobody")
	wantUnauthenticated(t, p, err, "unknown")
	e.revoke(t, c.ID)
	p, err = e.cache.Authenticate("", c.ID)
	wantUnauthenticated(t, p, err, "revoked")
}

func TestNotReadyAndNoCredential(t *testing.T) {
	client := etcd.Client(t)
	c, err := auth.NewCache(client, auth.CacheConfig{Namespace: etcdtest.Namespace(t)})
	if err != nil {
		t.Fatal(err)
	}
	// Not running: nothing loaded.
	if _, err := c.Authenticate(auth.FormatToken("abc", strings.Repeat("A", 43)), ""); !errors.Is(err, auth.ErrNotReady) {
		t.Errorf("before loading: %v, want ErrNotReady", err)
	}
	if _, err := c.Authenticate("", ""); !errors.Is(err, auth.ErrUnauthenticated) {
		t.Errorf("no credential: %v, want ErrUnauthenticated", err)
	}
	if c.Ready() {
		t.Error("Ready before Run")
	}
}

func TestCorruptRecordIgnored(t *testing.T) {
	e := newEnv(t, "")
	good := e.create(t, api.CreateRequest{Role: api.RoleViewer})
	resp, err := e.client.Put(context.Background(), auth.TokensPrefix(e.ns)+"broken", `{"id":"broken","role":"admin"`)
	if err != nil {
		t.Fatal(err)
	}
	e.wait(t, resp.Header.Revision)
	resp, err = e.client.Put(context.Background(), auth.TokensPrefix(e.ns)+"nohash", `{"id":"nohash","role":"admin"}`)
	if err != nil {
		t.Fatal(err)
	}
	e.wait(t, resp.Header.Revision)
	if _, err := e.cache.Authenticate(good.Secret, ""); err != nil {
		t.Fatalf("a corrupt neighbour broke a good credential: %v", err)
	}
	p, err := e.cache.Authenticate("", "nohash")
	wantUnauthenticated(t, p, err, "unknown")
}

func TestBearerTransport(t *testing.T) {
	var got []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got = append(got, r.Header.Get("Authorization"))
	}))
	defer srv.Close()
	tr := &auth.BearerTransport{Token: "jf_x_y"}
	defer tr.CloseIdleConnections()
	req, _ := http.NewRequest("GET", srv.URL, nil)
	resp, err := (&http.Client{Transport: tr}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if len(got) != 1 || got[0] != "Bearer jf_x_y" {
		t.Fatalf("server saw %q", got)
	}
	if req.Header.Get("Authorization") != "" {
		t.Error("the caller's request was modified")
	}
}

// BenchmarkAuthenticate measures what authentication adds to a request:
// a map lookup and a SHA-256 of the secret, from memory.
func BenchmarkAuthenticate(b *testing.B) {
	client := etcd.Client(b)
	ns := etcdtest.Namespace(b)
	c := authtest.RunCache(b, client, auth.CacheConfig{Namespace: ns})
	s := auth.NewStore(client, ns, nil)
	var tok string
	for i := range 1000 { // among a thousand credentials
		cr, rev, err := s.Create(context.Background(), api.CreateRequest{Role: api.RoleViewer}, "")
		if err != nil {
			b.Fatal(err)
		}
		if i == 0 {
			tok = cr.Secret
		}
		if i == 999 {
			wctx, wcancel := context.WithTimeout(context.Background(), 10*time.Second)
			err = c.WaitRevision(wctx, rev)
			wcancel()
			if err != nil {
				b.Fatal(err)
			}
		}
	}
	b.ResetTimer()
	for b.Loop() {
		if _, err := c.Authenticate(tok, ""); err != nil {
			b.Fatal(err)
		}
	}
}

// followed authenticates token and follows its principal until the test
// ends.
func (e *env) followed(t *testing.T, token string) context.Context {
	t.Helper()
	p, err := e.cache.Authenticate(token, "")
	if err != nil {
		t.Fatal(err)
	}
	ctx, stop := e.cache.Follow(context.Background(), p)
	t.Cleanup(stop)
	return ctx
}

// ended waits for ctx to end (within the bound of a broken cache, not a
// timing) and checks that its cause wraps ErrUnauthenticated and says
// msg.
func ended(t *testing.T, ctx context.Context, msg string) {
	t.Helper()
	select {
	case <-ctx.Done():
	case <-time.After(10 * time.Second):
		t.Fatalf("the followed context did not end (want %q)", msg)
	}
	if cause := context.Cause(ctx); !errors.Is(cause, auth.ErrUnauthenticated) || !strings.Contains(cause.Error(), msg) {
		t.Errorf("cause %v; want ErrUnauthenticated saying %q", cause, msg)
	}
}

func TestFollowEndsOnRevocation(t *testing.T) {
	e := newEnv(t, "")
	victim := e.create(t, api.CreateRequest{Role: api.RoleViewer})
	other := e.create(t, api.CreateRequest{Role: api.RoleViewer})
	vctx, octx := e.followed(t, victim.Secret), e.followed(t, other.Secret)

	// Changes of other credentials wake the follower but do not end it.
	e.create(t, api.CreateRequest{Role: api.RoleOperator})
	rev, err := e.store.Revoke(context.Background(), victim.ID)
	if err != nil {
		t.Fatal(err)
	}
	ended(t, vctx, "revoked")
	e.wait(t, rev)
	if octx.Err() != nil {
		t.Errorf("revoking %s ended the follower of %s: %v", victim.ID, other.ID, context.Cause(octx))
	}
}

func TestFollowEndsOnReplacement(t *testing.T) {
	e := newEnv(t, "")
	ctx := context.Background()
	first := e.issueAdmin(t)
	fctx := e.followed(t, first.Secret)
	if _, _, err := e.store.Issue(ctx, "dev-admin", api.CreateRequest{Role: api.RoleAdmin}, ""); err != nil {
		t.Fatal(err)
	}
	ended(t, fctx, "replaced")
}

func TestFollowEndsAtExpiry(t *testing.T) {
	e := newEnv(t, "")
	c := e.create(t, api.CreateRequest{Role: api.RoleViewer, TTL: "1h"})
	fctx := e.followed(t, c.Secret)
	e.clock.BlockUntilContext(context.Background(), 1) // the follower's expiry timer
	e.clock.Advance(time.Hour - time.Millisecond)
	if fctx.Err() != nil {
		t.Fatalf("ended before the expiry: %v", context.Cause(fctx))
	}
	e.clock.Advance(time.Millisecond)
	ended(t, fctx, "expired")
}

func TestFollowOfTheBootstrapEndsWithItsContext(t *testing.T) {
	e := newEnv(t, strings.Repeat("b", auth.MinBootstrapBytes))
	p, err := e.cache.Authenticate(strings.Repeat("b", auth.MinBootstrapBytes), "")
	if err != nil {
		t.Fatal(err)
	}
	parent, cancel := context.WithCancel(context.Background())
	fctx, stop := e.cache.Follow(parent, p)
	defer stop()
	e.create(t, api.CreateRequest{Role: api.RoleViewer})
	if fctx.Err() != nil {
		t.Fatalf("the bootstrap's follower ended: %v", context.Cause(fctx))
	}
	cancel()
	<-fctx.Done()
}
