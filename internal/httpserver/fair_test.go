package httpserver

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/jobfleet/jobfleet/internal/testkit/tlstest"
)

// The fairness tests hold nothing by time: the idle and header timeouts
// are an hour, so whatever lets a new connection in is the fairness rules,
// never a flood connection timing out.
const never = time.Hour

// fairConfig is DefaultConfig without timeouts that could end a test's
// connections, with metrics in reg.
func fairConfig(reg *prometheus.Registry) Config {
	cfg := DefaultConfig()
	cfg.ReadHeaderTimeout, cfg.ReadTimeout, cfg.WriteTimeout, cfg.IdleTimeout = never, never, never, never
	cfg.Name = "api"
	cfg.Registry = reg
	cfg.AnonymousRate = -1
	cfg.anonHold = -1 // TestRefusalsAreHeld holds them
	return cfg
}

// authHandler serves GET /healthz to anyone without looking at
// credentials (as the API's anonymous routes do), and every other path
// to "Bearer good" only, which it marks authenticated, answering 401 to
// any other credential or none.
var authHandler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
	switch {
	case r.URL.Path == "/healthz":
		fmt.Fprintln(w, "ok")
	case r.Header.Get("Authorization") == "Bearer good":
		MarkAuthenticated(r.Context())
		fmt.Fprintln(w, "ok")
	default:
		w.Header().Set("WWW-Authenticate", `Bearer realm="test"`)
		http.Error(w, "bad credential", http.StatusUnauthorized)
	}
})

// dialFrom opens a TCP connection to s from the loopback address from
// (127.0.0.1, 127.0.0.2, …: Linux routes all of 127/8 to lo), closed when
// the test ends.
func dialFrom(t *testing.T, s *Server, from string) net.Conn {
	t.Helper()
	d := net.Dialer{Timeout: 5 * time.Second, LocalAddr: &net.TCPAddr{IP: net.ParseIP(from)}}
	c, err := d.Dial("tcp", s.Addr())
	if err != nil {
		t.Fatalf("dial from %s: %v", from, err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// conn is a client connection sending requests one at a time.
type conn struct {
	net.Conn
	br *bufio.Reader
}

func newConn(c net.Conn) *conn { return &conn{Conn: c, br: bufio.NewReader(c)} }

// get sends GET path with credential bearer ("" for none) and returns the
// reply's status and body, or the error that ended the connection. It
// waits for the reply as long as it takes (at most a minute, which no
// passing test comes near): the tests wait on events, not on time.
func (c *conn) get(path, bearer string) (int, string, error) {
	req := "GET " + path + " HTTP/1.1\r\nHost: test\r\n"
	if bearer != "" {
		req += "Authorization: Bearer " + bearer + "\r\n"
	}
	if _, err := io.WriteString(c, req+"\r\n"); err != nil {
		return 0, "", err
	}
	_ = c.SetReadDeadline(time.Now().Add(time.Minute))
	resp, err := http.ReadResponse(c.br, nil)
	if err != nil {
		return 0, "", err
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	return resp.StatusCode, string(body), err
}

// closedByServer reports whether the server has closed c: a read ends
// with EOF or a reset instead of data.
func closedByServer(c *conn) error {
	_ = c.SetReadDeadline(time.Now().Add(time.Minute))
	_, err := c.br.ReadByte()
	switch {
	case err == nil:
		return errors.New("the server sent data")
	case errors.Is(err, io.EOF), errors.Is(err, net.ErrClosed), strings.Contains(err.Error(), "reset"):
		return nil
	default:
		return fmt.Errorf("read: %v", err)
	}
}

// waitIdle waits until s holds n idle connections. The server marks a
// connection idle just after writing its reply, so a client that has read
// the reply may be a moment ahead of it.
func waitIdle(t *testing.T, s *Server, n int) {
	t.Helper()
	deadline := time.Now().Add(time.Minute) // a bound on a broken server, not a timing
	for {
		s.conns.mu.Lock()
		got := s.conns.idle.Len()
		s.conns.mu.Unlock()
		if got == n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d idle connections, want %d", got, n)
		}
		runtime.Gosched()
		time.Sleep(time.Millisecond)
	}
}

func closedTotal(t *testing.T, reg *prometheus.Registry, reason string) int {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "jobfleet_http_connections_closed_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "reason" && l.GetValue() == reason {
					return int(m.GetCounter().GetValue())
				}
			}
		}
	}
	t.Fatalf("no jobfleet_http_connections_closed_total{reason=%q}", reason)
	return 0
}

// TestFloodFromOneAddressIsHeldToItsLimit: a flood of idle keep-alive
// connections from 127.0.0.1, each having made one GET /healthz (the
// reported outage), gets the per-address limit and no more: the excess is
// closed at accept, the connections it holds stay served, and a caller
// from 127.0.0.2 is admitted at once.
func TestFloodFromOneAddressIsHeldToItsLimit(t *testing.T) {
	const (
		perAddr = 8
		flood   = 30
	)
	reg := prometheus.NewRegistry()
	cfg := fairConfig(reg)
	cfg.MaxConnections = 64
	cfg.MaxConnectionsPerAddress = perAddr
	s := start(t, authHandler, cfg)

	var held []*conn
	for i := range flood {
		c := newConn(dialFrom(t, s, "127.0.0.1"))
		code, _, err := c.get("/healthz", "")
		switch {
		case i < perAddr && (err != nil || code != http.StatusOK):
			t.Fatalf("flood connection %d (under the limit %d): %d %v, want 200", i, perAddr, code, err)
		case i < perAddr:
			held = append(held, c)
		case err == nil:
			t.Fatalf("flood connection %d (above the limit %d) was answered %d, want it closed", i, perAddr, code)
		}
	}
	if got, want := closedTotal(t, reg, ReasonPerAddress), flood-perAddr; got != want {
		t.Errorf("closed_total{reason=per_address} = %d, want %d", got, want)
	}

	caller := newConn(dialFrom(t, s, "127.0.0.2"))
	if code, body, err := caller.get("/v1/jobs", "good"); err != nil || code != http.StatusOK {
		t.Fatalf("caller from 127.0.0.2 during the flood: %d %q %v, want 200", code, body, err)
	}
	for i, c := range held {
		if code, _, err := c.get("/healthz", ""); err != nil || code != http.StatusOK {
			t.Errorf("held flood connection %d: %d %v, want 200 (the limit refuses new connections, it does not cut held ones)", i, code, err)
		}
	}
	if got := closedTotal(t, reg, ReasonIdleEvicted); got != 0 {
		t.Errorf("closed_total{reason=idle_evicted} = %d below the cap, want 0", got)
	}

	// Closing held connections gives the address its room back.
	held[0].Close()
	held[1].Close()
	again := newConn(dialFrom(t, s, "127.0.0.1"))
	for {
		code, _, err := again.get("/healthz", "")
		if err == nil && code == http.StatusOK {
			break
		}
		// The server may not have seen the closes yet: that connection
		// was refused; try a new one.
		again = newConn(dialFrom(t, s, "127.0.0.1"))
	}
}

// TestIdleConnectionsAreClosedFirstAtTheCap: with the cap reached by idle
// keep-alive connections of one address (no per-address limit), a new
// connection from another address is admitted at once, and the connection
// closed for it is the one idle the longest.
func TestIdleConnectionsAreClosedFirstAtTheCap(t *testing.T) {
	const limit = 4
	reg := prometheus.NewRegistry()
	cfg := fairConfig(reg)
	cfg.MaxConnections = limit
	cfg.MaxConnectionsPerAddress = -1
	s := start(t, authHandler, cfg)

	flood := make([]*conn, limit)
	for i := range flood {
		flood[i] = newConn(dialFrom(t, s, "127.0.0.1"))
		if code, _, err := flood[i].get("/healthz", ""); err != nil || code != http.StatusOK {
			t.Fatalf("flood connection %d: %d %v", i, code, err)
		}
		waitIdle(t, s, i+1)
	}
	// Connection 0 makes another request: it is now the one idle the
	// shortest, and connection 1 the longest.
	if code, _, err := flood[0].get("/healthz", ""); err != nil || code != http.StatusOK {
		t.Fatalf("flood connection 0 again: %d %v", code, err)
	}
	waitIdle(t, s, limit)

	for round, victim := range []int{1, 2} {
		caller := newConn(dialFrom(t, s, "127.0.0.2"))
		if code, body, err := caller.get("/v1/jobs", "good"); err != nil || code != http.StatusOK {
			t.Fatalf("round %d: caller at the cap: %d %q %v, want 200", round, code, body, err)
		}
		if err := closedByServer(flood[victim]); err != nil {
			t.Errorf("round %d: flood connection %d (idle the longest) was not closed: %v", round, victim, err)
		}
		// The caller stays open (idle, the newest): closing it would free
		// a slot the next round could take without closing anyone.
	}
	for _, i := range []int{0, 3} {
		if code, _, err := flood[i].get("/healthz", ""); err != nil || code != http.StatusOK {
			t.Errorf("flood connection %d, idle for less time than the closed ones, was cut: %d %v", i, code, err)
		}
	}
	if got := closedTotal(t, reg, ReasonIdleEvicted); got != 2 {
		t.Errorf("closed_total{reason=idle_evicted} = %d, want 2", got)
	}
	if got := testutil.ToFloat64(s.conns.metrics.open); got > limit {
		t.Errorf("connections_open = %v, above the cap %d", got, limit)
	}
}

// TestWaitingConnectionTakesTheFirstToTurnIdle: at the cap with every
// connection busy, a new connection waits (no request is ever cut); when
// one of the busy ones finishes its reply and turns idle, that one is
// closed and the waiting connection is served.
func TestWaitingConnectionTakesTheFirstToTurnIdle(t *testing.T) {
	reg := prometheus.NewRegistry()
	cfg := fairConfig(reg)
	cfg.MaxConnections = 2
	cfg.MaxConnectionsPerAddress = -1
	release := map[string]chan struct{}{"/a": make(chan struct{}), "/b": make(chan struct{})}
	entered := make(chan string, 3)
	s := start(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		entered <- r.URL.Path
		if ch := release[r.URL.Path]; ch != nil {
			<-ch
		}
		fmt.Fprintln(w, "ok")
	}), cfg)

	a, b := newConn(dialFrom(t, s, "127.0.0.1")), newConn(dialFrom(t, s, "127.0.0.1"))
	replies := make(chan error, 2)
	for _, c := range []struct {
		c    *conn
		path string
	}{{a, "/a"}, {b, "/b"}} {
		go func() {
			code, _, err := c.c.get(c.path, "")
			if err == nil && code != http.StatusOK {
				err = fmt.Errorf("%s: status %d", c.path, code)
			}
			replies <- err
		}()
		<-entered
	}
	waiting := newConn(dialFrom(t, s, "127.0.0.2"))
	waited := make(chan error, 1)
	go func() {
		code, _, err := waiting.get("/c", "good")
		if err == nil && code != http.StatusOK {
			err = fmt.Errorf("status %d", code)
		}
		waited <- err
	}()

	close(release["/b"]) // b replies, turns idle, and is closed for the waiting one
	if err := <-replies; err != nil {
		t.Fatalf("the busy connection that finished: %v (a request in progress must never be cut)", err)
	}
	if got := <-entered; got != "/c" {
		t.Fatalf("served %s, want the waiting connection's /c", got)
	}
	if err := <-waited; err != nil {
		t.Fatalf("the waiting connection: %v", err)
	}
	if err := closedByServer(b); err != nil {
		t.Errorf("connection b, idle when a connection waited: %v", err)
	}
	close(release["/a"])
	if err := <-replies; err != nil {
		t.Errorf("connection a, busy throughout: %v", err)
	}
	if got := closedTotal(t, reg, ReasonIdleEvicted); got != 1 {
		t.Errorf("closed_total{reason=idle_evicted} = %d, want 1", got)
	}
}

// TestIdleTLSConnectionsAreClosedFirst: the state of a TLS connection is
// followed through its *tls.Conn.
func TestIdleTLSConnectionsAreClosedFirst(t *testing.T) {
	dir := t.TempDir()
	ca := tlstest.NewCA(t, "test CA")
	certFile, keyFile := filepath.Join(dir, "server.crt"), filepath.Join(dir, "server.key")
	ca.Server(t, "127.0.0.1").Write(t, certFile, keyFile)
	tc, err := TLSFiles{CertFile: certFile, KeyFile: keyFile}.Config()
	if err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	cfg := fairConfig(reg)
	cfg.MaxConnections = 1
	cfg.TLS = tc
	s := start(t, authHandler, cfg)

	roots := x509.NewCertPool()
	roots.AddCert(ca.Cert)
	dialTLS := func(from string) *conn {
		c := tls.Client(dialFrom(t, s, from), &tls.Config{RootCAs: roots, ServerName: "127.0.0.1"})
		return newConn(c)
	}
	first := dialTLS("127.0.0.1")
	if code, _, err := first.get("/healthz", ""); err != nil || code != http.StatusOK {
		t.Fatalf("first: %d %v", code, err)
	}
	waitIdle(t, s, 1)
	second := dialTLS("127.0.0.2")
	if code, _, err := second.get("/v1/jobs", "good"); err != nil || code != http.StatusOK {
		t.Fatalf("second, at the cap of 1: %d %v, want 200", code, err)
	}
	if err := closedByServer(first); err != nil {
		t.Errorf("first, idle: %v", err)
	}
}

// TestAnonymousRequestsAreRateLimitedPerAddress: requests without a
// credential, those whose credential is refused and those whose
// credential the handler never checked share a budget per address; a
// valid credential is served from the same address whatever the budget
// says.
func TestAnonymousRequestsAreRateLimitedPerAddress(t *testing.T) {
	clock := clockwork.NewFakeClock()
	reg := prometheus.NewRegistry()
	cfg := fairConfig(reg)
	cfg.AnonymousRate, cfg.AnonymousBurst, cfg.Clock = 1, 3, clock
	s := start(t, authHandler, cfg)
	flood := newConn(dialFrom(t, s, "127.0.0.1"))
	other := newConn(dialFrom(t, s, "127.0.0.2"))

	want := func(c *conn, step, path, bearer string, code int) {
		t.Helper()
		got, body, err := c.get(path, bearer)
		if err != nil || got != code {
			t.Fatalf("%s: %d %q %v, want %d", step, got, body, err, code)
		}
	}
	want(flood, "anonymous probe", "/healthz", "", http.StatusOK)
	want(flood, "bad credential (takes a token)", "/v1/jobs", "bad", http.StatusUnauthorized)
	want(flood, "probe with a made-up token (not authenticated: takes a token)", "/healthz", "made-up", http.StatusOK)
	want(flood, "anonymous probe, the burst spent", "/healthz", "", http.StatusTooManyRequests)
	want(flood, "bad credential, the burst spent", "/v1/jobs", "bad", http.StatusTooManyRequests)
	want(flood, "probe with a made-up token, the burst spent", "/healthz", "made-up", http.StatusTooManyRequests)
	for i := range 5 {
		want(flood, fmt.Sprintf("valid credential %d from the flooding address", i), "/v1/jobs", "good", http.StatusOK)
	}
	want(other, "anonymous probe from another address", "/healthz", "", http.StatusOK)

	// The 429 says when to come back and why, as JSON.
	if _, err := io.WriteString(flood, "GET /v1/jobs HTTP/1.1\r\nHost: test\r\nAuthorization: Bearer bad\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(flood.br, nil)
	if err != nil {
		t.Fatal(err)
	}
	var doc struct{ Error string }
	err = json.NewDecoder(resp.Body).Decode(&doc)
	resp.Body.Close()
	if err != nil || resp.StatusCode != http.StatusTooManyRequests || resp.Header.Get("Retry-After") != "1" ||
		resp.Header.Get("WWW-Authenticate") != "" || resp.Header.Get("Content-Type") != "application/json" || !strings.Contains(doc.Error, "127.0.0.1") {
		t.Errorf("refusal of a bad credential: %d Retry-After=%q WWW-Authenticate=%q %+v %v; want 429, Retry-After 1, none of the handler's headers, a JSON error naming the address",
			resp.StatusCode, resp.Header.Get("Retry-After"), resp.Header.Get("WWW-Authenticate"), doc, err)
	}

	clock.Advance(time.Second)
	want(flood, "anonymous probe a second later", "/healthz", "", http.StatusOK)
	want(flood, "anonymous probe again", "/healthz", "", http.StatusTooManyRequests)
	if got, want := testutil.ToFloat64(s.conns.metrics.anonRefused), 5.0; got != want {
		t.Errorf("anonymous_refused_total = %v, want %v", got, want)
	}
}

func TestAddrKey(t *testing.T) {
	for _, tt := range []struct {
		a, b string
		same bool
	}{
		{"192.0.2.1", "192.0.2.1", true},
		{"192.0.2.1", "192.0.2.2", false},
		{"::ffff:192.0.2.1", "192.0.2.1", true},
		{"2001:db8:1:2::1", "2001:db8:1:2:ffff:ffff:ffff:ffff", true},
		{"2001:db8:1:2::1", "2001:db8:1:3::1", false},
		{"fe80::1%eth0", "fe80::2%eth1", true},
	} {
		t.Run(tt.a+"~"+tt.b, func(t *testing.T) {
			ka := AddrKeyOf(net.TCPAddrFromAddrPort(netip.AddrPortFrom(netip.MustParseAddr(tt.a), 1)))
			kb := addrKeyOfRemote(netip.AddrPortFrom(netip.MustParseAddr(tt.b), 2).String())
			if got := ka == kb; got != tt.same {
				t.Errorf("keys %v and %v: same = %v, want %v", ka, kb, got, tt.same)
			}
			if !ka.IsValid() {
				t.Errorf("key of %s is not a valid prefix", tt.a)
			}
		})
	}
	if k := addrKeyOfRemote("not an address"); k != overflowKey {
		t.Errorf("key of a non-IP remote = %v, want the zero key", k)
	}
}

func TestFairnessDefaults(t *testing.T) {
	c := DefaultConfig().withDefaults()
	if c.MaxConnectionsPerAddress != DefaultMaxConnectionsPerAddress || c.AnonymousRate != DefaultAnonymousRate || c.AnonymousBurst != DefaultAnonymousBurst {
		t.Errorf("defaults: per address %d, anonymous %v/s burst %d", c.MaxConnectionsPerAddress, c.AnonymousRate, c.AnonymousBurst)
	}
	c = Config{AnonymousRate: 500}.withDefaults()
	if c.AnonymousBurst != 500 {
		t.Errorf("burst of a rate of 500 = %d, want 500 (at least the rate)", c.AnonymousBurst)
	}
}

// TestRefusalsAreHeld: a 429 of the anonymous limit is answered only after
// its hold (a fake second here), and a valid credential from the same
// address is served meanwhile.
func TestRefusalsAreHeld(t *testing.T) {
	clock := clockwork.NewFakeClock()
	cfg := fairConfig(prometheus.NewRegistry())
	cfg.AnonymousRate, cfg.AnonymousBurst, cfg.Clock, cfg.anonHold = 1, 1, clock, 0
	s := start(t, authHandler, cfg)
	flood := newConn(dialFrom(t, s, "127.0.0.1"))
	if code, _, err := flood.get("/healthz", ""); err != nil || code != http.StatusOK {
		t.Fatalf("first probe: %d %v", code, err)
	}
	held := make(chan int, 1)
	go func() {
		code, _, _ := flood.get("/healthz", "")
		held <- code
	}()
	if err := clock.BlockUntilContext(context.Background(), 1); err != nil { // the hold's timer
		t.Fatal(err)
	}
	caller := newConn(dialFrom(t, s, "127.0.0.1"))
	if code, _, err := caller.get("/v1/jobs", "good"); err != nil || code != http.StatusOK {
		t.Fatalf("valid credential from the address while a refusal is held: %d %v", code, err)
	}
	select {
	case code := <-held:
		t.Fatalf("the refusal was answered (%d) before its hold", code)
	default:
	}
	clock.Advance(anonHold)
	if code := <-held; code != http.StatusTooManyRequests {
		t.Errorf("held probe: %d, want 429", code)
	}
}
