// Package etcdtest starts real, embedded etcd servers for tests, and TCP
// bridges (package netfault) that inject network faults between a client
// and the server and are closed when the test ends.
//
// Typical use, one server per package:
//
//	var etcd *etcdtest.Server
//
//	func TestMain(m *testing.M) {
//		etcd = etcdtest.MustStart()
//		code := m.Run()
//		etcd.Close()
//		os.Exit(code)
//	}
//
// and in each test a fresh key namespace (Namespace) so tests do not see each
// other's keys.
package etcdtest

import (
	"context"
	"fmt"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/goleak"
	"go.uber.org/zap"

	"github.com/jobfleet/jobfleet/internal/etcdserver"
	"github.com/jobfleet/jobfleet/internal/netfault"
)

// Server is an embedded etcd for tests. It can be stopped and restarted on
// the same ports and data directory to test recovery.
type Server struct {
	dir   string
	owned bool // dir was created by MustStart and is removed by Close

	mu  sync.Mutex
	srv *etcdserver.Server // nil while stopped
	cfg etcdserver.Config
}

var nsCounter atomic.Int64

// Start starts a server whose data lives in dir (created if missing).
func Start(dir string) (*Server, error) {
	cfg := etcdserver.Config{Dir: dir, NoFsync: true}
	var (
		srv *etcdserver.Server
		err error
	)
	// A free port may be taken between probing and binding; retry.
	for range 5 {
		srv, err = etcdserver.Start(cfg)
		if err == nil {
			break
		}
	}
	if err != nil {
		return nil, err
	}
	cfg.ClientAddr, cfg.PeerAddr = srv.ClientAddr(), srv.PeerAddr()
	return &Server{dir: dir, srv: srv, cfg: cfg}, nil
}

// StartConfig starts a server with cfg (Dir is required; NoFsync is forced
// on, ports are picked if empty).
func StartConfig(cfg etcdserver.Config) (*Server, error) {
	cfg.NoFsync = true
	srv, err := etcdserver.Start(cfg)
	if err != nil {
		return nil, err
	}
	cfg.ClientAddr, cfg.PeerAddr = srv.ClientAddr(), srv.PeerAddr()
	return &Server{dir: cfg.Dir, srv: srv, cfg: cfg}, nil
}

// MustStart starts a server in a fresh temporary directory and panics if it
// cannot; for TestMain, which has no *testing.T.
func MustStart() *Server {
	dir, err := os.MkdirTemp("", "jobfleet-etcd-")
	if err != nil {
		panic(err)
	}
	s, err := Start(dir)
	if err != nil {
		panic(err)
	}
	s.owned = true
	return s
}

// New starts a server in t.TempDir() and stops it when the test ends.
func New(t testing.TB) *Server {
	t.Helper()
	s, err := Start(t.TempDir())
	if err != nil {
		t.Fatalf("etcdtest: %v", err)
	}
	t.Cleanup(s.Close)
	return s
}

// NewDurable starts a server in t.TempDir() that syncs its log to disk
// as a production etcd does (the others skip fsync), for tests whose
// subject is how the fleet behaves when the store's writes cost what they
// cost in production; it is stopped when the test ends.
func NewDurable(t testing.TB) *Server {
	t.Helper()
	dir := t.TempDir()
	srv, err := etcdserver.Start(etcdserver.Config{Dir: dir})
	if err != nil {
		t.Fatalf("etcdtest: %v", err)
	}
	s := &Server{dir: dir, srv: srv, cfg: etcdserver.Config{Dir: dir, ClientAddr: srv.ClientAddr(), PeerAddr: srv.PeerAddr()}}
	t.Cleanup(s.Close)
	return s
}

// NewBridge starts a bridge to target (host:port) that is closed when the
// test ends.
func NewBridge(t testing.TB, target string) *netfault.Bridge {
	t.Helper()
	b, err := netfault.StartBridge(target)
	if err != nil {
		t.Fatalf("etcdtest: bridge: %v", err)
	}
	t.Cleanup(b.Close)
	return b
}

// AwaitBridgeUsed sends gets with c until one is answered through bridge b,
// at least four gets in all, so that the client's connection through the
// bridge is ready and takes its share of requests. A client sends requests
// only on ready connections, and the bridge's (two hops) may finish its
// handshake after a direct one has answered several requests, on a loaded
// machine; cut before that, it never gets ready, no request goes to it,
// and a test of a silent endpoint proves nothing. It fails the test if a
// get fails or none is answered through b within 10s.
func AwaitBridgeUsed(t testing.TB, c *clientv3.Client, b *netfault.Bridge) {
	t.Helper()
	ready := time.Now().Add(10 * time.Second)
	for i := 0; ; i++ {
		before := b.Replied()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		_, err := c.Get(ctx, "probe")
		cancel()
		if err != nil {
			t.Fatalf("etcdtest: get %d before the bridge was used: %v", i, err)
		}
		if i >= 3 && b.Replied() > before {
			return
		}
		if time.Now().After(ready) {
			t.Fatalf("etcdtest: %d gets, none answered through the bridge: its connection never got ready", i+1)
		}
	}
}

// Endpoints returns the client URLs of the server (valid across restarts).
func (s *Server) Endpoints() []string { return []string{"http://" + s.cfg.ClientAddr} }

// ClientAddr returns the client listener's host:port.
func (s *Server) ClientAddr() string { return s.cfg.ClientAddr }

// Stop stops the server, keeping its data; Restart starts it again.
func (s *Server) Stop() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.srv != nil {
		s.srv.Close()
		s.srv = nil
	}
}

// Restart starts a stopped server on the same ports and data directory.
func (s *Server) Restart() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.srv != nil {
		return nil
	}
	var err error
	for range 20 { // the old listeners may take a moment to be released
		if s.srv, err = etcdserver.Start(s.cfg); err == nil {
			return nil
		}
		time.Sleep(100 * time.Millisecond)
	}
	return fmt.Errorf("etcdtest: restart: %w", err)
}

// Close stops the server and removes the data it created. Idempotent.
func (s *Server) Close() {
	s.Stop()
	if s.owned {
		os.RemoveAll(s.dir)
	}
}

// Client returns a client of the server that is closed when the test ends.
func (s *Server) Client(t testing.TB) *clientv3.Client {
	t.Helper()
	return NewClient(t, s.Endpoints())
}

// NewClient returns a client of endpoints that is closed when the test ends.
func NewClient(t testing.TB, endpoints []string) *clientv3.Client {
	t.Helper()
	c, err := clientv3.New(clientv3.Config{
		Endpoints:   endpoints,
		DialTimeout: 5 * time.Second,
		Logger:      zap.NewNop(),
	})
	if err != nil {
		t.Fatalf("etcdtest: client: %v", err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// Namespace returns a key prefix unique to this test within the process,
// ending in "/", so tests sharing a server do not see each other's keys.
func Namespace(t testing.TB) string {
	name := strings.NewReplacer("/", "_", " ", "_").Replace(t.Name())
	return fmt.Sprintf("/t%d-%s/", nsCounter.Add(1), name)
}

// Compact compacts the server's history up to its current revision, so that
// watchers started at an older revision are cancelled with ErrCompacted.
func Compact(ctx context.Context, c *clientv3.Client) (int64, error) {
	resp, err := c.Get(ctx, "compact-probe")
	if err != nil {
		return 0, err
	}
	rev := resp.Header.Revision
	if _, err := c.Compact(ctx, rev, clientv3.WithCompactPhysical()); err != nil {
		return 0, err
	}
	return rev, nil
}

// Main runs a package's tests against one shared server, stored in *s, and
// then fails the run if goroutines started during the tests are still
// running (go.uber.org/goleak, against a baseline taken before the server
// started). Use it as the whole TestMain:
//
//	func TestMain(m *testing.M) { os.Exit(etcdtest.Main(m, &etcd)) }
func Main(m *testing.M, s **Server, leakOpts ...goleak.Option) int {
	baseline := goleak.IgnoreCurrent()
	*s = MustStart()
	code := m.Run()
	(*s).Close()
	if code == 0 {
		if err := goleak.Find(append(leakOpts, baseline)...); err != nil {
			fmt.Fprintln(os.Stderr, "goleak:", err)
			code = 1
		}
	}
	return code
}

// KeepAliveLeaks are the options with which Main's leak check ignores
// the goroutines of HTTP clients' keep-alive connections that outlive
// the tests (their write loops, and the reads they wait in):
//
//	func TestMain(m *testing.M) { os.Exit(etcdtest.Main(m, &etcd, etcdtest.KeepAliveLeaks()...)) }
func KeepAliveLeaks() []goleak.Option {
	return []goleak.Option{
		goleak.IgnoreTopFunction("net/http.(*persistConn).writeLoop"),
		goleak.IgnoreTopFunction("internal/poll.runtime_pollWait"),
	}
}
