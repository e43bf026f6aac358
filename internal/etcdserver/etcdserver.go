package etcdserver

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"strings"
	"sync"
	"time"

	"go.etcd.io/etcd/server/v3/embed"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// Config describes one embedded etcd server.
type Config struct {
	// Dir is the data directory. It is created if missing; an existing one
	// is reused, so a restarted server keeps its data.
	Dir string
	// ClientAddr is the host:port clients connect to. Empty picks a free
	// loopback port.
	ClientAddr string
	// PeerAddr is the host:port of the raft peer listener of a member of
	// a multi-member cluster (InitialCluster); empty picks a free loopback
	// port. A single-member server has no peer listener: PeerAddr is then
	// only the peer URL etcd records for the member (default
	// 127.0.0.1:2380), and nothing listens on it.
	PeerAddr string
	// Name is the member's name; default "jobfleet-dev".
	Name string
	// InitialCluster is the membership a new cluster starts with, as etcd's
	// --initial-cluster: name=URL pairs (peer URLs), comma separated, one
	// of them this member's Name and PeerAddr. With https:// peer URLs the
	// members speak TLS to each other with self-made certificates (etcd's
	// peer auto TLS), so that no web page can reach their peer ports;
	// http:// is plain and reachable by any page the user visits. Empty means
	// a single-member cluster of this server. It is used only when Dir
	// holds no data yet; a restarted member rejoins the cluster its data
	// records. Every member of a multi-member cluster must be started (in
	// any order) before any of them is ready: Start waits for a quorum.
	InitialCluster string
	// NoFsync skips fsync; only for tests, where durability across a power
	// loss does not matter and speed does.
	NoFsync bool
	// QuotaBackendBytes caps the database size; 0 is etcd's default (2 GiB).
	// Past it etcd raises its NOSPACE alarm and refuses writes.
	QuotaBackendBytes int64
	// StartTimeout bounds how long Start waits for the server to be ready.
	// Zero means one minute.
	StartTimeout time.Duration
	// Logger receives etcd's own logs (warnings and errors only). Nil means
	// no logs.
	Logger *zap.Logger
}

// Server is a running embedded etcd. Close stops it; Close is idempotent
// and safe for concurrent use.
type Server struct {
	closeOnce  sync.Once
	etcd       *embed.Etcd
	logLevel   zap.AtomicLevel // raised at Close to hide etcd's shutdown noise
	clientAddr string
	peerAddr   string // "" without a peer listener
}

// etcdLogger returns the logger etcd logs to: lg's "etcd" logger at
// level, keeping at most etcdLogBurst lines of one message a second. On a
// busy machine etcd warns of every slow request ("apply request took too
// long", thousands a minute), which would bury everything else logged.
func etcdLogger(lg *zap.Logger, level zap.AtomicLevel) *zap.Logger {
	return lg.Named("etcd").WithOptions(zap.IncreaseLevel(level), zap.WrapCore(func(c zapcore.Core) zapcore.Core {
		return zapcore.NewSamplerWithOptions(c, time.Second, etcdLogBurst, 0)
	}))
}

// etcdLogBurst is how many lines of one message etcdLogger keeps a second.
const etcdLogBurst = 5

// Start starts a server and waits until it serves clients. It returns an
// error if the data directory cannot be used, a port is taken, or the server
// is not ready within Config.StartTimeout.
func Start(cfg Config) (*Server, error) {
	if cfg.Dir == "" {
		return nil, errors.New("etcdserver: Dir is required")
	}
	var err error
	if cfg.ClientAddr == "" {
		if cfg.ClientAddr, err = FreeAddr(); err != nil {
			return nil, err
		}
	}
	single := cfg.InitialCluster == ""
	if cfg.PeerAddr == "" {
		if single {
			cfg.PeerAddr = unusedPeerAddr
		} else if cfg.PeerAddr, err = FreeAddr(); err != nil {
			return nil, err
		}
	}
	if cfg.StartTimeout == 0 {
		cfg.StartTimeout = time.Minute
	}
	lg := cfg.Logger
	if lg == nil {
		lg = zap.NewNop()
	}

	ec := embed.NewConfig()
	ec.Name = cfg.Name
	if ec.Name == "" {
		ec.Name = "jobfleet-dev"
	}
	ec.Dir = cfg.Dir
	clientURL := url.URL{Scheme: "http", Host: cfg.ClientAddr}
	peerURL := url.URL{Scheme: "http", Host: cfg.PeerAddr}
	if !single {
		if peerURL.Scheme, err = peerScheme(cfg.InitialCluster, ec.Name); err != nil {
			return nil, err
		}
	}
	ec.ListenClientUrls = []url.URL{clientURL}
	ec.AdvertiseClientUrls = []url.URL{clientURL}
	ec.AdvertisePeerUrls = []url.URL{peerURL}
	ec.InitialCluster = ec.InitialClusterFromName(ec.Name)
	if single {
		// A single member never talks to peers: no peer listener at all.
		// Its peer port served raft and lease renewals (POST /leases) to
		// anyone, with no Host or Origin check, so that any web page the
		// user visited could keep a crashed member's lease alive. The peer
		// URL is still recorded as the member's (etcd requires one);
		// nothing listens on it.
		ec.ListenPeerUrls = nil
	} else {
		ec.ListenPeerUrls = []url.URL{peerURL}
		ec.InitialCluster = cfg.InitialCluster
		ec.InitialClusterToken = "jobfleet"
		// With https peer URLs the members speak TLS to each other with
		// certificates they make themselves (and do not verify): what
		// matters here is that a browser cannot complete a handshake
		// with an untrusted certificate, so no web page gets a request
		// to the peer port through (plain HTTP gets 400 before any
		// handler).
		ec.PeerAutoTLS = peerURL.Scheme == "https"
	}
	// The client port speaks gRPC to jobfleet and plain HTTP only for
	// /health, /metrics and /version. etcd's defaults would also serve its
	// JSON gateway (/v3/kv/put, ...) with CORS open to every origin and
	// any Host header, so that any web page the user visits could read
	// and write the namespace through a loopback dev server (by a direct
	// request or by DNS rebinding). No part of jobfleet uses the gateway.
	ec.EnableGRPCGateway = false
	ec.CORS = map[string]struct{}{clientURL.String(): {}} // etcd's own origin, which serves no pages; empty would mean "all"
	ec.HostWhitelist = hostWhitelist(cfg.ClientAddr)
	ec.UnsafeNoFsync = cfg.NoFsync
	ec.QuotaBackendBytes = cfg.QuotaBackendBytes
	ec.Logger = "zap"
	level := zap.NewAtomicLevelAt(zap.WarnLevel)
	ec.ZapLoggerBuilder = embed.NewZapLoggerBuilder(etcdLogger(lg, level))

	e, err := embed.StartEtcd(ec)
	if err != nil {
		return nil, fmt.Errorf("etcdserver: start: %w", err)
	}
	select {
	case <-e.Server.ReadyNotify():
	case err := <-e.Err():
		e.Close()
		return nil, fmt.Errorf("etcdserver: start: %w", err)
	case <-time.After(cfg.StartTimeout):
		e.Server.Stop()
		e.Close()
		return nil, fmt.Errorf("etcdserver: not ready after %v", cfg.StartTimeout)
	}
	srv := &Server{etcd: e, logLevel: level, clientAddr: cfg.ClientAddr}
	if !single {
		srv.peerAddr = cfg.PeerAddr
	}
	return srv, nil
}

// unusedPeerAddr is the peer address recorded for a single member started
// without one: etcd's default, on which this server does not listen.
const unusedPeerAddr = "127.0.0.1:2380"

// peerScheme returns the scheme of member name's peer URL in
// initialCluster (name=URL pairs, comma separated): "http" or "https".
func peerScheme(initialCluster, name string) (string, error) {
	for _, pair := range strings.Split(initialCluster, ",") {
		n, raw, ok := strings.Cut(strings.TrimSpace(pair), "=")
		if !ok || n != name {
			continue
		}
		u, err := url.Parse(raw)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") {
			return "", fmt.Errorf("etcdserver: InitialCluster: the peer URL %q of %s is not an http:// or https:// URL", raw, name)
		}
		return u.Scheme, nil
	}
	return "", fmt.Errorf("etcdserver: InitialCluster %q does not name this member, %s", initialCluster, name)
}

// hostWhitelist returns the Host header names the client port answers
// plain HTTP requests for: the loopback names and addresses, and the host
// of clientAddr (the address clients are given). Any other Host, such as a
// name an attacker rebinds to 127.0.0.1, is refused with 421.
func hostWhitelist(clientAddr string) map[string]struct{} {
	hosts := map[string]struct{}{"localhost": {}, "127.0.0.1": {}, "::1": {}, "[::1]": {}}
	if host, _, err := net.SplitHostPort(clientAddr); err == nil && host != "" {
		hosts[host] = struct{}{}
		if strings.Contains(host, ":") {
			hosts["["+host+"]"] = struct{}{}
		}
	}
	return hosts
}

// Endpoints returns the client URLs, for clientv3.Config.Endpoints.
func (s *Server) Endpoints() []string { return []string{"http://" + s.clientAddr} }

// ClientAddr returns the client listener's host:port.
func (s *Server) ClientAddr() string { return s.clientAddr }

// Err returns a channel that receives the error that stops a running
// server (such as a listener failing); it is not closed by Close.
func (s *Server) Err() <-chan error { return s.etcd.Err() }

// PeerAddr returns the peer listener's host:port, or "" for a
// single-member server, which has no peer listener.
func (s *Server) PeerAddr() string { return s.peerAddr }

// Close stops the server and waits for it to release its ports and files.
// etcd logs its closing listeners as errors; they are expected here.
func (s *Server) Close() {
	s.closeOnce.Do(func() {
		s.logLevel.SetLevel(zap.FatalLevel)
		s.etcd.Close() // panics if called twice
	})
}

// FreeAddr returns a loopback host:port that was free a moment ago and
// that no earlier call in this process returned: the kernel may hand the
// same ephemeral port to two listeners opened one after the other, and
// two members given one port cannot both start. Another process may
// still take the port before it is used; callers that bind it retry on
// failure. Safe for concurrent use.
func FreeAddr() (string, error) {
	handedOut.mu.Lock()
	defer handedOut.mu.Unlock()
	for range 100 {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return "", fmt.Errorf("etcdserver: find free port: %w", err)
		}
		addr := l.Addr().String()
		l.Close()
		if _, dup := handedOut.addrs[addr]; dup {
			continue
		}
		if handedOut.addrs == nil {
			handedOut.addrs = make(map[string]struct{})
		}
		handedOut.addrs[addr] = struct{}{}
		return addr, nil
	}
	return "", fmt.Errorf("etcdserver: find free port: every port offered was handed out before")
}

// handedOut holds the addresses FreeAddr returned, so that it never
// returns one twice.
var handedOut struct {
	mu    sync.Mutex
	addrs map[string]struct{}
}
