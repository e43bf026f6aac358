package admin_test

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap/zaptest"

	"github.com/jobfleet/jobfleet/admin"
	"github.com/jobfleet/jobfleet/api"
	"github.com/jobfleet/jobfleet/auth"
	"github.com/jobfleet/jobfleet/internal/httpserver"
	"github.com/jobfleet/jobfleet/internal/testkit/admintest"
	"github.com/jobfleet/jobfleet/internal/testkit/authtest"
	"github.com/jobfleet/jobfleet/internal/testkit/etcdtest"
)

// revocationEnv is the API on a real HTTP server, authenticating from the
// credential cache over a real etcd, with a partition stream to follow
// and worker polls that block until their context ends.
type revocationEnv struct {
	url     string
	proto   *fakeProtocol
	tokens  *auth.Store
	cache   *auth.Cache
	clock   *clockwork.FakeClock
	cluster *fakeCluster
}

func newRevocationEnv(t *testing.T) *revocationEnv {
	t.Helper()
	client := etcd.Client(t)
	ns := etcdtest.Namespace(t)
	e := &revocationEnv{clock: clockwork.NewFakeClockAt(time.Date(2026, 5, 1, 0, 0, 0, 0, time.UTC)), cluster: newFakeCluster(2)}
	e.tokens = auth.NewStore(client, ns, e.clock.Now)
	e.cache = authtest.RunCache(t, client, auth.CacheConfig{Namespace: ns, Clock: e.clock, Logger: zaptest.NewLogger(t)})

	proto := &fakeProtocol{block: make(chan struct{})}
	h := admin.Handler(&fakeMember{Member: admintest.Member{Auth: e.cache, Cluster: e.cluster, Protocol: proto}, ready: true}, admin.Config{
		Gatherer: prometheus.NewRegistry(),
		Tokens:   e.tokens,
		Clock:    e.clock,
		Limits:   admin.Limits{Rate: -1},
	})
	srv, err := httpserver.Start("127.0.0.1:0", h, httpserver.DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { close(proto.block); srv.Shutdown() })
	e.url, e.proto = srv.URL(), proto
	return e
}

func (e *revocationEnv) cred(t *testing.T, req api.CreateRequest) api.Created {
	t.Helper()
	c, rev, err := e.tokens.Create(context.Background(), req, "test")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := e.cache.WaitRevision(ctx, rev); err != nil {
		t.Fatal(err)
	}
	return c
}

// open sends a long-lived request with token tok, checks that it is
// answered 200, and returns the reader of its body.
func (e *revocationEnv) open(t *testing.T, method, path, body, tok string) *bufio.Reader {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, e.url+path, rd)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+tok)
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("%s %s: status %d, want 200", method, path, resp.StatusCode)
	}
	return bufio.NewReader(resp.Body)
}

// ends reads r to its end in a goroutine and returns a channel that
// receives the error that ended it (io.EOF: the server closed the reply).
func ends(r *bufio.Reader) <-chan error {
	ch := make(chan error, 1)
	go func() {
		_, err := io.Copy(io.Discard, r)
		if err == nil {
			err = io.EOF
		}
		ch <- err
	}()
	return ch
}

// waitEnd waits for a long-lived reply to end. The bound is for a broken
// server (the reply would then never end), not a timing: the reply ends
// as soon as the member's credential watch delivers the change.
func waitEnd(t *testing.T, what string, ended <-chan error) {
	t.Helper()
	select {
	case err := <-ended:
		if !errors.Is(err, io.EOF) {
			t.Errorf("%s ended with %v, want a clean end of the reply", what, err)
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("%s did not end", what)
	}
}

// TestStreamsEndWhenTheirCredentialIsRevoked: a partition stream and a
// worker long poll of a credential end as soon as it is revoked; another
// credential's stream goes on, and the revoked token cannot open a new
// one.
func TestStreamsEndWhenTheirCredentialIsRevoked(t *testing.T) {
	e := newRevocationEnv(t)
	viewer := e.cred(t, api.CreateRequest{Role: api.RoleViewer, Prefix: "team-a/"})
	other := e.cred(t, api.CreateRequest{Role: api.RoleViewer})
	worker := e.cred(t, api.CreateRequest{Role: api.RoleWorker})

	vs := e.open(t, "GET", "/v1/cluster/partitions/watch", "", viewer.Secret)
	if ev := readEvent(t, vs); ev.name != "snapshot" {
		t.Fatalf("first event %+v, want snapshot", ev)
	}
	others := e.open(t, "GET", "/v1/cluster/partitions/watch", "", other.Secret)
	if ev := readEvent(t, others); ev.name != "snapshot" {
		t.Fatalf("first event of the other stream %+v, want snapshot", ev)
	}
	// A poll's reply starts when the poll ends: wait until the member
	// holds it.
	polled := make(chan int, 1)
	go func() {
		req, _ := http.NewRequest("POST", e.url+api.PathPoll, strings.NewReader(`{"worker":"w1","executors":["http"],"max":1,"wait":"30s"}`))
		req.Header.Set("Authorization", "Bearer "+worker.Secret)
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			polled <- 0
			return
		}
		resp.Body.Close()
		polled <- resp.StatusCode
	}()
	for deadline := time.Now().Add(30 * time.Second); e.proto.count() == 0; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the poll never reached the worker protocol")
		}
	}
	viewerEnded := ends(vs)

	if _, err := e.tokens.Revoke(context.Background(), viewer.ID); err != nil {
		t.Fatal(err)
	}
	waitEnd(t, "the revoked viewer's partition stream", viewerEnded)
	if _, err := e.tokens.Revoke(context.Background(), worker.ID); err != nil {
		t.Fatal(err)
	}
	select {
	case code := <-polled:
		if code != http.StatusOK {
			t.Errorf("the revoked worker's long poll: status %d, want 200 (an empty answer)", code)
		}
	case <-time.After(30 * time.Second): // it would otherwise last its 30s wait, and the fake blocks longer
		t.Fatal("the revoked worker's long poll did not end")
	}

	// The other stream still follows the partitions.
	e.cluster.set(func(rows []api.PartitionStreamChange) { rows[1].Owner = "m2" }, "")
	if ev := readEvent(t, others); ev.name != "change" || !strings.Contains(ev.data, `"m2"`) {
		t.Errorf("the other credential's stream after the revocations: %+v, want the change", ev)
	}
	req, _ := http.NewRequest("GET", e.url+"/v1/cluster/partitions/watch", nil)
	req.Header.Set("Authorization", "Bearer "+viewer.Secret)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("a new stream with the revoked token: %d, want 401", resp.StatusCode)
	}
}

// TestStreamEndsWhenItsCredentialExpires: under a fake clock, a stream
// opened with a credential of one hour ends when the hour is over, not
// before.
func TestStreamEndsWhenItsCredentialExpires(t *testing.T) {
	e := newRevocationEnv(t)
	short := e.cred(t, api.CreateRequest{Role: api.RoleViewer, TTL: "1h"})
	s := e.open(t, "GET", "/v1/cluster/partitions/watch", "", short.Secret)
	if ev := readEvent(t, s); ev.name != "snapshot" {
		t.Fatalf("first event %+v, want snapshot", ev)
	}
	// The handler's ping ticker and the follower's expiry timer.
	if err := e.clock.BlockUntilContext(context.Background(), 2); err != nil {
		t.Fatal(err)
	}
	e.clock.Advance(time.Hour - time.Second)
	e.cluster.set(func(rows []api.PartitionStreamChange) { rows[0].Epoch++ }, "")
	for {
		// Pings of the hour, then the change: the stream is still open.
		ev := readEvent(t, s)
		if ev.name == "change" {
			break
		}
		if !ev.comment {
			t.Fatalf("event %+v before the expiry, want pings and the change", ev)
		}
	}
	ended := ends(s)
	e.clock.Advance(time.Second)
	waitEnd(t, "the expired credential's stream", ended)
}
