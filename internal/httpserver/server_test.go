package httpserver

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"
	"go.uber.org/zap/zaptest/observer"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// start serves h with cfg on a free loopback port until the test ends.
func start(t *testing.T, h http.Handler, cfg Config) *Server {
	t.Helper()
	cfg.Logger = zaptest.NewLogger(t)
	s, err := Start("127.0.0.1:0", h, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := s.Shutdown(); err != nil {
			t.Errorf("Shutdown: %v", err)
		}
	})
	return s
}

// dial opens a TCP connection to s, closed when the test ends.
func dial(t *testing.T, s *Server) net.Conn {
	t.Helper()
	c, err := net.DialTimeout("tcp", s.Addr(), 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// readReply reads one HTTP reply from c within limit.
func readReply(t *testing.T, c net.Conn, br *bufio.Reader, limit time.Duration) (*http.Response, string) {
	t.Helper()
	_ = c.SetReadDeadline(time.Now().Add(limit))
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatalf("reading the reply: %v", err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	return resp, string(body)
}

func TestSlowBodyIsCutAtReadTimeout(t *testing.T) {
	const readTimeout = 3 * time.Second
	cfg := DefaultConfig()
	cfg.ReadHeaderTimeout = time.Second
	cfg.ReadTimeout = readTimeout
	var got atomic.Int64
	s := start(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n, err := io.Copy(io.Discard, r.Body)
		got.Store(n)
		if err != nil {
			http.Error(w, "reading the body: "+err.Error(), http.StatusRequestTimeout)
			return
		}
		fmt.Fprintln(w, "read", n)
	}), cfg)

	// 1 byte every 2s of a 1000-byte body: each byte comes well within the
	// read timeout of the one before, so only a deadline on the whole
	// request cuts it (after 2 or 3 bytes instead of 2000 seconds).
	// The server's deadline runs from when it starts reading the
	// connection, which can be before dial returns here: start the clock
	// before dialling, or the cut looks early by the time dial took to
	// return (6ms once under load).
	startedAt := time.Now()
	c := dial(t, s)
	if _, err := fmt.Fprintf(c, "POST /upload HTTP/1.1\r\nHost: x\r\nContent-Length: 1000\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		tick := time.NewTicker(2 * time.Second)
		defer tick.Stop()
		for {
			if _, err := c.Write([]byte("x")); err != nil {
				return // the server closed the connection
			}
			select {
			case <-stop:
				return
			case <-tick.C:
			}
		}
	}()
	defer func() { close(stop); wg.Wait() }()

	resp, body := readReply(t, c, bufio.NewReader(c), readTimeout+20*time.Second)
	took := time.Since(startedAt)
	t.Logf("slow body cut after %v (read timeout %v), %d bytes read: %d %s", took.Round(time.Millisecond), readTimeout, got.Load(), resp.StatusCode, strings.TrimSpace(body))
	if resp.StatusCode != http.StatusRequestTimeout || !strings.Contains(body, "timeout") {
		t.Errorf("reply %d %q, want 408 with the handler's read timeout", resp.StatusCode, body)
	}
	if took < readTimeout {
		t.Errorf("cut after %v, before the read timeout %v", took, readTimeout)
	}
	if n := got.Load(); n >= 1000 || n < 1 {
		t.Errorf("handler read %d bytes, want some but not the whole body", n)
	}
	// The connection is closed after such a request: nothing more comes.
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, err := c.Read(make([]byte, 1)); err == nil {
		t.Error("the connection stayed open after the cut body")
	}
}

func TestLongPollOutlivesReadTimeout(t *testing.T) {
	// A long poll reads its small body at once, then holds the request
	// longer than the read timeout: the read timeout must not cut it or
	// cancel its context (only the write timeout bounds it).
	const readTimeout, hold = 500 * time.Millisecond, 1500 * time.Millisecond
	cfg := DefaultConfig()
	cfg.ReadHeaderTimeout = readTimeout
	cfg.ReadTimeout = readTimeout
	s := start(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		select {
		case <-r.Context().Done():
			http.Error(w, "request context cancelled while holding", http.StatusServiceUnavailable)
		case <-time.After(hold): // the long poll's wait
			fmt.Fprintf(w, "held %s", body)
		}
	}), cfg)

	c := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	resp, err := c.Post(s.URL(), "application/json", strings.NewReader(`{"wait":"1.5s"}`))
	if err != nil {
		t.Fatalf("long poll: %v", err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.HasPrefix(string(body), "held") {
		t.Errorf("long poll held %v past a read timeout of %v: %d %q, want 200", hold, readTimeout, resp.StatusCode, body)
	}
}

func TestIdleKeepAliveIsClosedAtIdleTimeout(t *testing.T) {
	const idle = time.Second
	cfg := DefaultConfig()
	cfg.IdleTimeout = idle
	s := start(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { fmt.Fprintln(w, "ok") }), cfg)

	c := dial(t, s)
	br := bufio.NewReader(c)
	for i := range 2 { // the connection is kept alive between requests
		if _, err := fmt.Fprintf(c, "GET / HTTP/1.1\r\nHost: x\r\n\r\n"); err != nil {
			t.Fatalf("request %d: %v", i+1, err)
		}
		if resp, _ := readReply(t, c, br, 10*time.Second); resp.StatusCode != http.StatusOK || resp.Close {
			t.Fatalf("request %d: status %d, close %v; want 200 on a kept-alive connection", i+1, resp.StatusCode, resp.Close)
		}
	}
	idleFrom := time.Now()
	_ = c.SetReadDeadline(time.Now().Add(idle + 20*time.Second))
	_, err := br.ReadByte()
	took := time.Since(idleFrom)
	if !errors.Is(err, io.EOF) {
		t.Fatalf("idle connection: read %v, want EOF (closed by the server)", err)
	}
	t.Logf("idle keep-alive connection closed by the server %v after its last reply (idle timeout %v)", took.Round(time.Millisecond), idle)
	if took < idle*9/10 {
		t.Errorf("closed after %v, before the idle timeout %v", took, idle)
	}
}

func TestSlowHeadersAreCutAtReadHeaderTimeout(t *testing.T) {
	const timeout = time.Second
	cfg := DefaultConfig()
	cfg.ReadHeaderTimeout = timeout
	var served atomic.Bool
	s := start(t, http.HandlerFunc(func(http.ResponseWriter, *http.Request) { served.Store(true) }), cfg)

	startedAt := time.Now() // before dialling: see TestSlowBodyIsCutAtReadTimeout
	c := dial(t, s)
	if _, err := fmt.Fprintf(c, "GET / HTTP/1.1\r\nHost: x\r\n"); err != nil { // never finished
		t.Fatal(err)
	}
	_ = c.SetReadDeadline(time.Now().Add(timeout + 20*time.Second))
	_, err := io.ReadAll(c)
	took := time.Since(startedAt)
	if err != nil {
		t.Fatalf("connection with unfinished headers: %v, want closed by the server", err)
	}
	t.Logf("unfinished headers cut after %v (header timeout %v)", took.Round(time.Millisecond), timeout)
	if took < timeout*9/10 {
		t.Errorf("cut after %v, before the header timeout %v", took, timeout)
	}
	if served.Load() {
		t.Error("the handler ran for a request without complete headers")
	}
}

func TestOversizedHeadersAreRefused(t *testing.T) {
	cfg := DefaultConfig()
	cfg.MaxHeaderBytes = 4 << 10
	var served atomic.Bool
	s := start(t, http.HandlerFunc(func(http.ResponseWriter, *http.Request) { served.Store(true) }), cfg)

	for _, tt := range []struct {
		name string
		size int
		want int
	}{
		{"within the limit", 2 << 10, http.StatusOK},
		{"above the limit and its slack", 16 << 10, http.StatusRequestHeaderFieldsTooLarge},
	} {
		t.Run(tt.name, func(t *testing.T) {
			served.Store(false)
			c := dial(t, s)
			if _, err := fmt.Fprintf(c, "GET / HTTP/1.1\r\nHost: x\r\nX-Big: %s\r\n\r\n", strings.Repeat("a", tt.size)); err != nil {
				t.Fatal(err)
			}
			resp, _ := readReply(t, c, bufio.NewReader(c), 10*time.Second)
			if resp.StatusCode != tt.want {
				t.Errorf("%d-byte header: status %d, want %d", tt.size, resp.StatusCode, tt.want)
			}
			if served.Load() != (tt.want == http.StatusOK) {
				t.Errorf("%d-byte header: handler ran %v", tt.size, served.Load())
			}
		})
	}
}

func TestConnectionsAboveTheCapWaitUntilOneCloses(t *testing.T) {
	const limit = 3
	cfg := DefaultConfig()
	cfg.MaxConnections = limit
	var active, maxActive atomic.Int32
	entered := make(chan struct{})
	release := make(chan struct{})
	s := start(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := active.Add(1)
		defer active.Add(-1)
		for {
			m := maxActive.Load()
			if n <= m || maxActive.CompareAndSwap(m, n) {
				break
			}
		}
		entered <- struct{}{}
		select {
		case <-release:
			fmt.Fprintln(w, "ok")
		case <-r.Context().Done(): // the client closed its connection
		}
	}), cfg)

	conns := make([]net.Conn, limit+1)
	for i := range conns {
		conns[i] = dial(t, s) // the kernel completes the handshake of every one
		if _, err := fmt.Fprintf(conns[i], "GET / HTTP/1.1\r\nHost: x\r\n\r\n"); err != nil {
			t.Fatal(err)
		}
		if i < limit {
			<-entered
		}
	}
	// The connection above the cap is not accepted, so its request is not
	// served while the others are held. (Without the cap it would reach
	// the handler within microseconds; this window is only how long a
	// wrong server would be given to show itself.)
	select {
	case <-entered:
		t.Fatalf("a request on connection %d was served while %d connections were open (cap %d)", limit+1, limit, limit)
	case <-time.After(300 * time.Millisecond):
	}

	// Closing one connection lets the waiting one in.
	conns[0].Close()
	<-entered // the waiting connection's request is served
	close(release)
	resp, _ := readReply(t, conns[limit], bufio.NewReader(conns[limit]), 10*time.Second)
	if resp.StatusCode != http.StatusOK {
		t.Errorf("request of the connection that waited: status %d, want 200", resp.StatusCode)
	}
	if m := maxActive.Load(); m > limit {
		t.Errorf("%d requests were served at once, cap %d", m, limit)
	}
}

func TestShutdownCancelsRequestsAndIsIdempotent(t *testing.T) {
	cfg := DefaultConfig()
	entered := make(chan struct{})
	s, err := Start("127.0.0.1:0", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		close(entered)
		<-r.Context().Done() // a long poll
	}), cfg)
	if err != nil {
		t.Fatal(err)
	}
	client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	errc := make(chan error, 1)
	go func() {
		resp, err := client.Get(s.URL())
		if err == nil {
			resp.Body.Close()
		}
		errc <- err
	}()
	<-entered
	startedAt := time.Now()
	if err := s.Shutdown(); err != nil {
		t.Fatalf("Shutdown: %v", err)
	}
	if took := time.Since(startedAt); took >= shutdownGrace {
		t.Errorf("Shutdown took %v with a request held on its context, want it cancelled at once", took)
	}
	<-errc
	if err := s.Shutdown(); err != nil {
		t.Errorf("second Shutdown: %v", err)
	}
}

func TestStartRefusesATakenPortAndBadConfig(t *testing.T) {
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	if _, err := Start(taken.Addr().String(), http.NotFoundHandler(), DefaultConfig()); err == nil || !strings.Contains(err.Error(), taken.Addr().String()) {
		t.Errorf("Start on a taken port: %v, want an error naming the address", err)
	}
	bad := DefaultConfig()
	bad.WriteTimeout = 0
	if _, err := Start("127.0.0.1:0", http.NotFoundHandler(), bad); err == nil || !strings.Contains(err.Error(), "WriteTimeout") {
		t.Errorf("Start without a write timeout: %v, want an error naming WriteTimeout", err)
	}
}

func TestConfigValidate(t *testing.T) {
	for _, tt := range []struct {
		name   string
		change func(*Config)
		want   string // substring of the error; "" for none
	}{
		{"default", func(*Config) {}, ""},
		{"no read header timeout", func(c *Config) { c.ReadHeaderTimeout = 0 }, "ReadHeaderTimeout"},
		{"no read timeout", func(c *Config) { c.ReadTimeout = 0 }, "ReadTimeout"},
		{"negative idle timeout", func(c *Config) { c.IdleTimeout = -time.Second }, "IdleTimeout"},
		{"header timeout above read timeout", func(c *Config) { c.ReadHeaderTimeout = time.Minute; c.ReadTimeout = time.Second }, "exceeds ReadTimeout"},
		{"tiny header limit", func(c *Config) { c.MaxHeaderBytes = 100 }, "MaxHeaderBytes"},
		{"no connections", func(c *Config) { c.MaxConnections = 0 }, "MaxConnections"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c := DefaultConfig()
			tt.change(&c)
			err := c.Validate()
			if tt.want == "" && err != nil || tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)) {
				t.Errorf("Validate() = %v, want an error containing %q", err, tt.want)
			}
		})
	}
}

func TestRaiseOpenFileLimit(t *testing.T) {
	before, after, err := RaiseOpenFileLimit()
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("open-file limit before %+v, after %+v", before, after)
	if after.Soft < before.Soft || after.Hard != before.Hard || after.Soft > after.Hard {
		t.Errorf("after %+v, before %+v: want the soft limit raised toward the unchanged hard limit", after, before)
	}
	if _, err := os.Stat("/proc/self"); err == nil && after.Soft != after.Hard {
		t.Errorf("on Linux the soft limit should reach the hard limit: %+v", after)
	}
}

func TestConnectionCap(t *testing.T) {
	for _, tt := range []struct {
		name        string
		budget      Budget
		n, fixed    int
		want        int
		explicit    bool
		wantCap     int
		wantLowered bool
		wantErr     string
	}{
		{"fits", Budget{OpenFiles: 1 << 20, Reserve: 1 << 18}, 1, 64, 4096, false, 4096, false, ""},
		{"default lowered to fit", Budget{OpenFiles: 1024, Reserve: 256}, 1, 64, 4096, false, 704, true, ""},
		{"shared by listeners", Budget{OpenFiles: 1024, Reserve: 512}, 3, 0, 4096, false, 170, true, ""},
		{"explicit too large", Budget{OpenFiles: 1024, Reserve: 256}, 2, 0, 1000, true, 0, false, "at most 384 fit"},
		{"explicit fits", Budget{OpenFiles: 1024, Reserve: 256}, 2, 0, 64, true, 64, false, ""},
		{"limit below the reserve", Budget{OpenFiles: 200, Reserve: 256}, 1, 0, 4096, false, 0, false, "raise the limit"},
		{"nothing left after fixed", Budget{OpenFiles: 1024, Reserve: 256}, 1, 760, 64, false, 0, false, "too few descriptors"},
		{"zero wanted", Budget{OpenFiles: 1024, Reserve: 256}, 1, 0, 0, true, 0, false, "at least 1"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got, lowered, err := ConnectionCap(tt.budget, tt.n, tt.fixed, tt.want, tt.explicit)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("got %d, %v, want an error containing %q", got, err, tt.wantErr)
				}
				return
			}
			if err != nil || got != tt.wantCap || lowered != tt.wantLowered {
				t.Fatalf("got %d, lowered %v, %v; want %d, lowered %v", got, lowered, err, tt.wantCap, tt.wantLowered)
			}
			if sum := uint64(got*tt.n + tt.fixed); sum > tt.budget.Listeners() {
				t.Errorf("caps sum to %d, above the listeners' budget %d", sum, tt.budget.Listeners())
			}
		})
	}
}

func TestErrorLogLevels(t *testing.T) {
	core, logs := observer.New(zap.DebugLevel)
	w := errorLogWriter{zap.New(core)}
	for _, line := range []string{
		"http: TLS handshake error from 127.0.0.1:5555: remote error: tls: bad certificate\n",
		"http: Accept error: accept tcp 127.0.0.1:80: accept4: too many open files; retrying in 5ms\n",
	} {
		if n, err := w.Write([]byte(line)); n != len(line) || err != nil {
			t.Fatalf("Write: %d, %v", n, err)
		}
	}
	entries := logs.AllUntimed()
	if len(entries) != 2 || entries[0].Level != zap.DebugLevel || entries[1].Level != zap.WarnLevel {
		t.Fatalf("log entries %+v, want the handshake error at debug and the accept error at warn", entries)
	}
	if got := entries[1].ContextMap()["error"]; !strings.Contains(got.(string), "too many open files") || strings.HasSuffix(got.(string), "\n") {
		t.Errorf("accept error logged as %q, want the line without its newline", got)
	}
}
