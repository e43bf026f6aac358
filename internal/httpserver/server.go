package httpserver

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log"
	"math"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/jonboulle/clockwork"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// Default limits of DefaultConfig.
const (
	// DefaultReadHeaderTimeout bounds the wait for a request's headers.
	DefaultReadHeaderTimeout = 10 * time.Second
	// DefaultReadTimeout bounds reading a whole request, body included.
	DefaultReadTimeout = 30 * time.Second
	// DefaultWriteTimeout bounds a request from its headers to the end of
	// its reply. It covers the orchestrator's longest long poll
	// (dispatch.MaxPollWait, 30s) with a margin of 30s for the reply.
	DefaultWriteTimeout = 60 * time.Second
	// DefaultIdleTimeout is how long a keep-alive connection may wait for
	// its next request.
	DefaultIdleTimeout = 60 * time.Second
	// DefaultMaxHeaderBytes caps a request's header block.
	DefaultMaxHeaderBytes = 64 << 10
	// DefaultMaxConnections caps the open connections of one listener.
	DefaultMaxConnections = 4096
	// DefaultMaxConnectionsPerAddress caps the open connections of one
	// listener from one client address (AddrKey). A worker host holds
	// about one connection per attempt it runs to each member it polls,
	// and a member holds at most 256 polls of one credential by default,
	// plus one presence stream per worker process; another member holds
	// one probe connection (and a brief second one every few seconds).
	// This leaves room for that and for the host's other clients.
	DefaultMaxConnectionsPerAddress = 512
	// DefaultAnonymousRate and DefaultAnonymousBurst limit, per client
	// address, the requests without a valid credential: probes,
	// scrapers of a metrics listener, a browser loading the console's
	// files before it signs in.
	DefaultAnonymousRate  = 20
	DefaultAnonymousBurst = 100
)

// Config configures one listener. Every limit must be set (Validate
// refuses zero, which net/http takes as "no limit"); start from
// DefaultConfig.
type Config struct {
	// ReadHeaderTimeout is how long a connection may take to send a
	// request's headers, counted from its first byte (from the connection's
	// start for its first request).
	ReadHeaderTimeout time.Duration
	// ReadTimeout is how long reading a whole request (headers and body)
	// may take. A slow body is cut there: the handler's read fails.
	ReadTimeout time.Duration
	// WriteTimeout is how long a request may take from the end of its
	// headers to the end of its reply: writes after it fail and the
	// connection is closed. It must exceed the longest a handler holds a
	// request (a long poll) plus the time to write the reply.
	WriteTimeout time.Duration
	// IdleTimeout is how long a keep-alive connection may wait for its next
	// request before it is closed.
	IdleTimeout time.Duration
	// MaxHeaderBytes caps the request line and headers (net/http allows a
	// few KiB of slack); larger requests get 431.
	MaxHeaderBytes int
	// MaxConnections caps the connections open at once on the listener.
	// At the cap a new connection takes the place of the keep-alive
	// connection that has been idle the longest, which is closed; if none
	// is idle, it waits (accepted, unanswered) until one closes or turns
	// idle, and the connections after it wait in the kernel's accept
	// queue.
	MaxConnections int
	// MaxConnectionsPerAddress caps the connections open at once from one
	// client address (an IPv4 address, or an IPv6 /64: see AddrKey): a
	// further connection from it is closed as soon as it is accepted.
	// Zero means DefaultMaxConnectionsPerAddress; negative, no cap. Behind
	// a proxy every client has the proxy's address: turn it off there, or
	// raise it, and let the proxy limit its clients.
	MaxConnectionsPerAddress int
	// AnonymousRate is how many requests a second, with bursts of
	// AnonymousBurst, one client address may make without a valid
	// credential: a request that presents none (no Authorization header,
	// no TLS client certificate) takes a token of its address's bucket
	// before the handler runs, or is answered 429 with Retry-After; a
	// request that presents one always reaches the handler, and unless
	// the handler marks it authenticated (MarkAuthenticated) its reply
	// takes a token, becoming a 429 if there is none (a refused
	// credential's 401, a probe sent with a made-up token). A 429 is
	// answered after a hold of a second, so that a connection that floods
	// gets one refusal a second. So a flood without valid credentials
	// from one address is held to the rate (and to a refusal a second per
	// connection it holds), and callers with valid ones are served
	// whatever their address sends. Zero means DefaultAnonymousRate (and a zero
	// burst DefaultAnonymousBurst, at least the rate); a negative rate, no
	// limit (a listener whose handler needs no credentials at all).
	AnonymousRate  float64
	AnonymousBurst int
	// Name labels the listener's metrics (listener="api"); empty means
	// "http".
	Name string
	// Registry receives the listener's metrics
	// (jobfleet_http_connections_open, _idle, _closed_total{reason},
	// jobfleet_http_anonymous_refused_total); nil means not registered.
	// Listeners sharing a registry need distinct names.
	Registry prometheus.Registerer
	// Clock times the anonymous rate limit; nil means the real clock.
	Clock clockwork.Clock

	// anonHold is how long a 429 of the anonymous limit is held; 0 means
	// anonHold, negative none (for tests of the limit itself).
	anonHold time.Duration
	// TLS, if not nil, serves HTTPS with this configuration (see
	// TLSFiles.Config); nil serves plain HTTP.
	TLS *tls.Config
	// Logger receives net/http's own error lines (accept errors at warn,
	// failed TLS handshakes at debug, since a client can cause one per
	// connection). Nil means no logs.
	Logger *zap.Logger
}

// DefaultConfig returns the default limits, without TLS.
func DefaultConfig() Config {
	return Config{
		ReadHeaderTimeout: DefaultReadHeaderTimeout,
		ReadTimeout:       DefaultReadTimeout,
		WriteTimeout:      DefaultWriteTimeout,
		IdleTimeout:       DefaultIdleTimeout,
		MaxHeaderBytes:    DefaultMaxHeaderBytes,
		MaxConnections:    DefaultMaxConnections,
	}
}

// withDefaults returns c with the zero fields that have a default set to
// it.
func (c Config) withDefaults() Config {
	if c.MaxConnectionsPerAddress == 0 {
		c.MaxConnectionsPerAddress = DefaultMaxConnectionsPerAddress
	}
	if c.AnonymousRate == 0 {
		c.AnonymousRate = DefaultAnonymousRate
	}
	if c.AnonymousBurst == 0 {
		c.AnonymousBurst = max(DefaultAnonymousBurst, int(math.Ceil(c.AnonymousRate)))
	}
	if c.Name == "" {
		c.Name = "http"
	}
	if c.anonHold == 0 {
		c.anonHold = anonHold
	}
	if c.Clock == nil {
		c.Clock = clockwork.NewRealClock()
	}
	if c.Logger == nil {
		c.Logger = zap.NewNop()
	}
	return c
}

// Validate checks that every limit is set and that the timeouts fit each
// other (headers are part of the request: ReadHeaderTimeout ≤
// ReadTimeout). It returns an error naming the field.
func (c Config) Validate() error {
	for _, d := range []struct {
		name string
		v    time.Duration
	}{
		{"ReadHeaderTimeout", c.ReadHeaderTimeout},
		{"ReadTimeout", c.ReadTimeout},
		{"WriteTimeout", c.WriteTimeout},
		{"IdleTimeout", c.IdleTimeout},
	} {
		if d.v <= 0 {
			return fmt.Errorf("httpserver: %s must be positive, got %v", d.name, d.v)
		}
	}
	if c.ReadHeaderTimeout > c.ReadTimeout {
		return fmt.Errorf("httpserver: ReadHeaderTimeout %v exceeds ReadTimeout %v", c.ReadHeaderTimeout, c.ReadTimeout)
	}
	if c.MaxHeaderBytes < 1024 {
		return fmt.Errorf("httpserver: MaxHeaderBytes must be at least 1024, got %d", c.MaxHeaderBytes)
	}
	if c.MaxConnections < 1 {
		return fmt.Errorf("httpserver: MaxConnections must be at least 1, got %d", c.MaxConnections)
	}
	if c.AnonymousBurst < 0 {
		return fmt.Errorf("httpserver: AnonymousBurst must not be negative, got %d", c.AnonymousBurst)
	}
	if math.IsNaN(c.AnonymousRate) || math.IsInf(c.AnonymousRate, 0) {
		return fmt.Errorf("httpserver: AnonymousRate must be a finite number, got %v", c.AnonymousRate)
	}
	if c.TLS != nil && c.TLS.MinVersion < tls.VersionTLS12 {
		return fmt.Errorf("httpserver: TLS.MinVersion must be TLS 1.2 or later, got %#x", c.TLS.MinVersion)
	}
	return nil
}

// Server is one listener serving a handler. Its methods are safe for
// concurrent use.
type Server struct {
	srv    *http.Server
	ln     net.Listener
	tls    bool
	done   chan error
	cancel context.CancelFunc // cancels in-flight requests' contexts
	conns  *connTracker

	once sync.Once
	err  error
}

// Start validates cfg, binds addr (host:port; port 0 picks a free one) so
// that a taken port is reported here, and serves h on it in a goroutine
// that Shutdown stops and waits for. Requests run under a context that
// Shutdown cancels, so long polls return at once instead of holding the
// shutdown for their whole wait.
func Start(addr string, h http.Handler, cfg Config) (*Server, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("listen on %s: %w", addr, err)
	}
	lg := cfg.Logger
	m := newMetrics(cfg.Name, cfg.Registry)
	if cfg.AnonymousRate > 0 {
		h = newAnonLimiter(cfg.AnonymousRate, cfg.AnonymousBurst, cfg.anonHold, cfg.Clock, m).wrap(h)
	}
	// One refusal line a second at most: a flood makes thousands, the
	// metric counts them all.
	refusals := lg.WithOptions(zap.WrapCore(func(c zapcore.Core) zapcore.Core {
		return zapcore.NewSamplerWithOptions(c, time.Second, 1, 0)
	}))
	tracker := newConnTracker(cfg.MaxConnections, cfg.MaxConnectionsPerAddress, m, refusals)
	base, cancel := context.WithCancel(context.Background())
	var protocols http.Protocols
	protocols.SetHTTP1(true)
	srv := &http.Server{
		Handler:           h,
		ReadHeaderTimeout: cfg.ReadHeaderTimeout,
		ReadTimeout:       cfg.ReadTimeout,
		WriteTimeout:      cfg.WriteTimeout,
		IdleTimeout:       cfg.IdleTimeout,
		MaxHeaderBytes:    cfg.MaxHeaderBytes,
		Protocols:         &protocols,
		ErrorLog:          log.New(errorLogWriter{lg}, "", 0),
		BaseContext:       func(net.Listener) context.Context { return base },
		ConnState:         tracker.setState,
	}
	if cfg.TLS != nil {
		srv.TLSConfig = cfg.TLS.Clone()
	}
	s := &Server{srv: srv, ln: ln, tls: cfg.TLS != nil, done: make(chan error, 1), cancel: cancel, conns: tracker}
	limited := &fairListener{Listener: ln, t: tracker}
	go func() {
		var err error
		if s.tls {
			// The certificate comes from TLS.GetCertificate or
			// TLS.Certificates, not from files named here.
			err = srv.ServeTLS(limited, "", "")
		} else {
			err = srv.Serve(limited)
		}
		if errors.Is(err, http.ErrServerClosed) {
			err = nil
		}
		s.done <- err
	}()
	return s, nil
}

// Addr returns the bound host:port.
func (s *Server) Addr() string { return s.ln.Addr().String() }

// URL returns the server's base URL on its bound address: https:// with
// TLS, http:// without.
func (s *Server) URL() string {
	if s.tls {
		return "https://" + s.Addr()
	}
	return "http://" + s.Addr()
}

// shutdownGrace bounds how long Shutdown lets in-flight requests finish.
const shutdownGrace = 5 * time.Second

// Shutdown stops accepting, cancels in-flight requests' contexts, lets
// them finish for a few seconds at most (then closes their connections),
// and returns once the serving goroutine has exited, with the error that
// ended serving, if any. It is idempotent.
func (s *Server) Shutdown() error {
	s.once.Do(func() {
		s.cancel()
		ctx, cancel := context.WithTimeout(context.Background(), shutdownGrace)
		defer cancel()
		if err := s.srv.Shutdown(ctx); err != nil {
			_ = s.srv.Close() // the grace is over: cut what is left
		}
		s.err = <-s.done
	})
	return s.err
}

// errorLogWriter turns the lines net/http writes to its ErrorLog into zap
// entries: failed TLS handshakes (one per bad connection, which any client
// can cause) at debug level, the rest (accept errors, handler panics) at
// warn.
type errorLogWriter struct{ lg *zap.Logger }

func (w errorLogWriter) Write(p []byte) (int, error) {
	msg := string(bytes.TrimSpace(p))
	if bytes.Contains(p, []byte("TLS handshake error")) {
		w.lg.Debug("http server", zap.String("error", msg))
	} else {
		w.lg.Warn("http server", zap.String("error", msg))
	}
	return len(p), nil
}

// ExtendWriteDeadline lets a reply that goes on for long, such as an
// event stream, outlive the listener's WriteTimeout: it sets the
// connection's write deadline to d from now. Socket deadlines are
// wall-clock times, whatever clock the caller runs on. It returns
// http.ErrNotSupported (wrapped) for a writer without deadlines, such as
// a test recorder.
func ExtendWriteDeadline(w http.ResponseWriter, d time.Duration) error {
	return http.NewResponseController(w).SetWriteDeadline(time.Now().Add(d))
}
