package etcdserver_test

import (
	"context"
	"crypto/x509"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/jobfleet/jobfleet/internal/etcdserver"
)

func TestSingleMemberKeepsDataAcrossRestart(t *testing.T) {
	dir := t.TempDir()
	s, err := etcdserver.Start(etcdserver.Config{Dir: dir, NoFsync: true})
	if err != nil {
		t.Fatal(err)
	}
	c := client(t, s.Endpoints())
	if _, err := c.Put(context.Background(), "k", "v"); err != nil {
		t.Fatal(err)
	}
	s.Close()
	s, err = etcdserver.Start(etcdserver.Config{Dir: dir, ClientAddr: s.ClientAddr(), PeerAddr: s.PeerAddr(), NoFsync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := c.Get(ctx, "k")
	if err != nil || len(resp.Kvs) != 1 || string(resp.Kvs[0].Value) != "v" {
		t.Fatalf("after restart: get k = %v, %v; want v", resp, err)
	}
}

// TestThreeMembersFormOneCluster starts a 3-member cluster in this process
// (the chaos harness starts each member in its own `jobfleet etcd`
// process), checks that it has one leader and replicates writes, and that
// it survives losing its leader.
func TestThreeMembersFormOneCluster(t *testing.T) {
	var cfgs []etcdserver.Config
	var peers []string
	for i := range 3 {
		client, err := etcdserver.FreeAddr()
		if err != nil {
			t.Fatal(err)
		}
		peer, err := etcdserver.FreeAddr()
		if err != nil {
			t.Fatal(err)
		}
		name := fmt.Sprintf("m%d", i+1)
		cfgs = append(cfgs, etcdserver.Config{Dir: t.TempDir(), ClientAddr: client, PeerAddr: peer, Name: name, NoFsync: true, StartTimeout: 30 * time.Second})
		peers = append(peers, name+"=https://"+peer)
	}
	servers := make([]*etcdserver.Server, 3)
	errs := make([]error, 3)
	var wg sync.WaitGroup
	for i := range cfgs {
		cfgs[i].InitialCluster = strings.Join(peers, ",")
		wg.Go(func() { servers[i], errs[i] = etcdserver.Start(cfgs[i]) })
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("member %d: %v", i+1, err)
		}
		defer servers[i].Close()
	}
	for i, s := range servers {
		if s.PeerAddr() != cfgs[i].PeerAddr {
			t.Errorf("member %d: PeerAddr %q, want %q", i+1, s.PeerAddr(), cfgs[i].PeerAddr)
		}
		peerRefusesBrowsers(t, s.PeerAddr())
	}
	var endpoints []string
	for _, s := range servers {
		endpoints = append(endpoints, s.Endpoints()...)
	}
	c := client(t, endpoints)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	members, err := c.MemberList(ctx)
	if err != nil || len(members.Members) != 3 {
		t.Fatalf("member list: %v, %v; want 3 members", members, err)
	}
	leader := -1
	for i, s := range servers {
		st, err := c.Status(ctx, s.Endpoints()[0])
		if err != nil {
			t.Fatalf("status of member %d: %v", i+1, err)
		}
		if st.Leader == st.Header.MemberId {
			leader = i
		}
	}
	if leader < 0 {
		t.Fatal("no member says it is the leader")
	}
	if _, err := c.Put(ctx, "k", "v1"); err != nil {
		t.Fatal(err)
	}
	servers[leader].Close() // the others elect a new leader and keep serving
	for {
		_, err := c.Put(ctx, "k", "v2")
		if err == nil {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("no write accepted after the leader stopped: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	follower := servers[(leader+1)%3]
	fc := client(t, follower.Endpoints())
	resp, err := fc.Get(ctx, "k")
	if err != nil || len(resp.Kvs) != 1 || string(resp.Kvs[0].Value) != "v2" {
		t.Fatalf("get k from a survivor = %v, %v; want v2", resp, err)
	}
}

func client(t *testing.T, endpoints []string) *clientv3.Client {
	t.Helper()
	c, err := clientv3.New(clientv3.Config{Endpoints: endpoints, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// TestClientPortRefusesBrowsers replays what a web page can make a browser
// send to a loopback etcd: a "simple" cross-origin POST to the JSON
// gateway (text/plain, any Origin), and requests under a rebound Host
// name. None may reach the data, and none may be answered with CORS
// headers; the product's own gRPC client and plain health checks still
// work.
func TestClientPortRefusesBrowsers(t *testing.T) {
	s, err := etcdserver.Start(etcdserver.Config{Dir: t.TempDir(), NoFsync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	base := s.Endpoints()[0]
	hc := &http.Client{Timeout: 10 * time.Second}
	do := func(method, path, host, body string) (*http.Response, string) {
		t.Helper()
		req, err := http.NewRequest(method, base+path, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "text/plain")
		req.Header.Set("Origin", "http://evil.example")
		if host != "" {
			req.Host = host
		}
		resp, err := hc.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 200))
		return resp, string(b)
	}
	put := `{"key":"` + base64.StdEncoding.EncodeToString([]byte("attack")) + `","value":"` + base64.StdEncoding.EncodeToString([]byte("x")) + `"}`
	for _, path := range []string{"/v3/kv/put", "/v3beta/kv/put", "/v3/kv/range"} {
		resp, body := do(http.MethodPost, path, "", put)
		if resp.StatusCode/100 == 2 {
			t.Errorf("POST %s from a foreign origin = %d %q; want refused", path, resp.StatusCode, body)
		}
		if v := resp.Header.Get("Access-Control-Allow-Origin"); v != "" {
			t.Errorf("POST %s: Access-Control-Allow-Origin = %q; want none", path, v)
		}
	}
	resp, _ := do(http.MethodOptions, "/v3/kv/put", "", "")
	if v := resp.Header.Get("Access-Control-Allow-Origin"); v != "" {
		t.Errorf("preflight: Access-Control-Allow-Origin = %q; want none", v)
	}
	for _, path := range []string{"/health", "/metrics", "/version"} {
		if resp, body := do(http.MethodGet, path, "rebound.evil.example:2379", ""); resp.StatusCode != http.StatusMisdirectedRequest {
			t.Errorf("GET %s with a rebound Host = %d %q; want 421", path, resp.StatusCode, body)
		}
	}
	for _, host := range []string{"", "localhost", "127.0.0.1:1"} {
		if resp, body := do(http.MethodGet, "/health", host, ""); resp.StatusCode != http.StatusOK {
			t.Errorf("GET /health with Host %q = %d %q; want 200", host, resp.StatusCode, body)
		}
	}
	c := client(t, s.Endpoints())
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	got, err := c.Get(ctx, "attack")
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Kvs) != 0 {
		t.Fatalf("the cross-origin POST wrote %q", got.Kvs[0].Value)
	}
	if _, err := c.Put(ctx, "k", "v"); err != nil {
		t.Fatalf("gRPC put: %v", err)
	}
}

// leaseRenewal is what a web page can make a browser send to a peer port
// to keep a lease alive: a "simple" cross-origin POST of etcd's lease
// renewal (/leases, a protobuf LeaseKeepAliveRequest sent as text/plain).
func leaseRenewal(t *testing.T, url string) *http.Request {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, url+"/leases", strings.NewReader("\x08\x01"))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "text/plain")
	req.Header.Set("Origin", "http://evil.example")
	req.Host = "rebound.evil.example"
	return req
}

// peerRefusesBrowsers checks that no request a browser can send reaches
// the handlers of a peer port with TLS: plain HTTP fails the handshake,
// and HTTPS does not verify (a browser stops at the certificate).
func peerRefusesBrowsers(t *testing.T, addr string) {
	t.Helper()
	hc := &http.Client{Timeout: 10 * time.Second}
	// Plain HTTP fails the TLS handshake: the connection is closed
	// unanswered (or answered 400 by a TLS layer that recognises HTTP).
	resp, err := hc.Do(leaseRenewal(t, "http://"+addr))
	if err == nil {
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 200))
		resp.Body.Close()
		if resp.StatusCode != http.StatusBadRequest || !strings.Contains(string(body), "HTTPS server") {
			t.Errorf("plain HTTP lease renewal to the peer port %s = %d %q; want it refused by the TLS layer", addr, resp.StatusCode, body)
		}
	}
	resp, err = hc.Do(leaseRenewal(t, "https://"+addr))
	var unknown x509.UnknownAuthorityError
	if err == nil {
		resp.Body.Close()
		t.Errorf("HTTPS lease renewal to the peer port %s verified its certificate: %d; want a certificate error", addr, resp.StatusCode)
	} else if !errors.As(err, &unknown) && !strings.Contains(err.Error(), "certificate") {
		t.Errorf("HTTPS to the peer port %s: %v; want a certificate error", addr, err)
	}
}

// TestSingleMemberHasNoPeerListener: `jobfleet dev`'s etcd, a single
// member, listens on no peer port, so no web page can renew a lease
// through it; leases still work through the client port.
func TestSingleMemberHasNoPeerListener(t *testing.T) {
	peer, err := etcdserver.FreeAddr()
	if err != nil {
		t.Fatal(err)
	}
	s, err := etcdserver.Start(etcdserver.Config{Dir: t.TempDir(), PeerAddr: peer, NoFsync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if got := s.PeerAddr(); got != "" {
		t.Errorf("PeerAddr = %q, want none", got)
	}
	hc := &http.Client{Timeout: 10 * time.Second}
	resp, err := hc.Do(leaseRenewal(t, "http://"+peer))
	if err == nil {
		resp.Body.Close()
		t.Fatalf("a lease renewal to the peer address %s was answered %d; want no listener", peer, resp.StatusCode)
	}
	if !errors.Is(err, syscall.ECONNREFUSED) {
		t.Errorf("a lease renewal to the peer address %s: %v; want connection refused", peer, err)
	}

	c := client(t, s.Endpoints())
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	lease, err := c.Grant(ctx, 5)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.KeepAliveOnce(ctx, lease.ID); err != nil {
		t.Fatalf("lease keepalive without a peer listener: %v", err)
	}
	members, err := c.MemberList(ctx)
	if err != nil || len(members.Members) != 1 || len(members.Members[0].PeerURLs) != 1 || members.Members[0].PeerURLs[0] != "http://"+peer {
		t.Errorf("member list %v, %v; want one member recording peer URL http://%s", members, err, peer)
	}
}
