package admin_test

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jobfleet/jobfleet/api"

	"github.com/jobfleet/jobfleet/internal/httpserver"
)

// TestOneAddressFlood measures what a flood from one address does to the
// API on a real server with the default limits (the figures of
// docs/security.md): 2 700 idle keep-alive connections from 127.0.0.1,
// each having made one GET /healthz (the reported outage), then the
// connections it holds sending anonymous requests, then bad tokens, as
// fast as they can, then enough other addresses' idle connections to fill
// the cap; throughout, a viewer on 127.0.0.2 makes requests on new
// connections. It checks that the flood holds at most the per-address
// limit and that the viewer is always served, and logs the figures. It
// runs only with JOBFLEET_FLOOD_FIGURES=1 (it opens thousands of
// connections and keeps both cores busy for seconds).
func TestOneAddressFlood(t *testing.T) {
	if os.Getenv("JOBFLEET_FLOOD_FIGURES") == "" {
		t.Skip("set JOBFLEET_FLOOD_FIGURES=1 to measure a flood from one address")
	}
	const (
		flood  = 2700
		active = 5 * time.Second
	)
	e := newRevocationEnv(t)
	viewer := e.cred(t, api.CreateRequest{Role: api.RoleViewer})
	addr := e.url[len("http://"):]

	dial := func(from string) (net.Conn, error) {
		d := net.Dialer{Timeout: 5 * time.Second, LocalAddr: &net.TCPAddr{IP: net.ParseIP(from)}}
		return d.Dial("tcp", addr)
	}
	// get sends one request on c and returns its status (0: the
	// connection was closed).
	get := func(c net.Conn, br *bufio.Reader, path, bearer string) int {
		req := "GET " + path + " HTTP/1.1\r\nHost: " + addr + "\r\n"
		if bearer != "" {
			req += "Authorization: Bearer " + bearer + "\r\n"
		}
		if _, err := io.WriteString(c, req+"\r\n"); err != nil {
			return 0
		}
		_ = c.SetReadDeadline(time.Now().Add(30 * time.Second))
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			return 0
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp.StatusCode
	}
	// caller makes n requests of the viewer, each on a new connection
	// from 127.0.0.2, and returns their latencies.
	caller := func(n int) []time.Duration {
		t.Helper()
		var lat []time.Duration
		for range n {
			start := time.Now()
			c, err := dial("127.0.0.2")
			if err != nil {
				t.Fatalf("viewer's connection: %v", err)
			}
			code := get(c, bufio.NewReader(c), "/v1/whoami", viewer.Secret)
			lat = append(lat, time.Since(start))
			c.Close()
			if code != http.StatusOK {
				t.Fatalf("viewer from 127.0.0.2: status %d, want 200", code)
			}
		}
		return lat
	}
	summary := func(lat []time.Duration) string {
		slices.Sort(lat)
		q := func(p float64) time.Duration { return lat[int(p*float64(len(lat)-1))].Round(10 * time.Microsecond) }
		return fmt.Sprintf("p50 %v, p99 %v, max %v", q(0.5), q(0.99), q(1))
	}
	t.Logf("viewer on new connections, no flood: %s", summary(caller(200)))

	type held struct {
		c  net.Conn
		br *bufio.Reader
	}
	var (
		mu               sync.Mutex
		conns            []held
		refused, limited int
		wg               sync.WaitGroup
	)
	// Many clients at once, as a flood is (a refusal of the anonymous
	// limit is held for a second).
	next := make(chan struct{})
	for range 256 {
		wg.Go(func() {
			for range next {
				c, err := dial("127.0.0.1")
				if err != nil {
					t.Errorf("flood connection: %v", err)
					return
				}
				br := bufio.NewReader(c)
				code := get(c, br, "/healthz", "")
				mu.Lock()
				switch code {
				case 0:
					c.Close()
					refused++
				case http.StatusTooManyRequests:
					limited++
					fallthrough
				default:
					conns = append(conns, held{c, br})
				}
				mu.Unlock()
			}
		})
	}
	for range flood {
		next <- struct{}{}
	}
	close(next)
	wg.Wait()
	defer func() {
		for _, h := range conns {
			h.c.Close()
		}
	}()
	if len(conns) > httpserver.DefaultMaxConnectionsPerAddress {
		t.Errorf("one address holds %d connections, above the per-address limit %d", len(conns), httpserver.DefaultMaxConnectionsPerAddress)
	}
	t.Logf("idle flood from 127.0.0.1: %d connections tried, %d held (the per-address limit), %d refused at accept; of the held ones' GET /healthz, %d answered 429 (the anonymous limit)",
		flood, len(conns), refused, limited)
	t.Logf("viewer during the idle flood: %s", summary(caller(200)))

	for _, probe := range []struct{ what, path, bearer string }{
		{"anonymous GET /healthz", "/healthz", ""},
		{"GET /healthz with a made-up token", "/healthz", "jf_bogus_AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"},
		{"GET /v1/whoami with a made-up token", "/v1/whoami", "jf_bogus_AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"},
	} {
		var ok, limited, other atomic.Int64
		stop := make(chan struct{})
		began := time.Now()
		var wg sync.WaitGroup
		for _, h := range conns {
			wg.Go(func() {
				for {
					select {
					case <-stop:
						return
					default:
					}
					switch get(h.c, h.br, probe.path, probe.bearer) {
					case http.StatusOK, http.StatusUnauthorized:
						ok.Add(1)
					case http.StatusTooManyRequests:
						limited.Add(1)
					default:
						other.Add(1)
						return
					}
				}
			})
		}
		lat := caller(200)
		time.Sleep(active - min(active, time.Since(began)))
		close(stop)
		wg.Wait()
		elapsed := time.Since(began)
		secs := elapsed.Seconds()
		t.Logf("%s from the %d held connections for %v: %.0f/s answered (200 or 401), %.0f/s refused 429, %d connections lost; viewer meanwhile: %s",
			probe.what, len(conns), elapsed.Round(100*time.Millisecond), float64(ok.Load())/secs, float64(limited.Load())/secs, other.Load(), summary(lat))
	}

	// Other addresses fill the rest of the cap with idle connections: a
	// new connection then takes the place of the longest idle one.
	var more []net.Conn
	defer func() {
		for _, c := range more {
			c.Close()
		}
	}()
	for host := 3; len(conns)+len(more) < httpserver.DefaultMaxConnections; host++ {
		from := fmt.Sprintf("127.0.0.%d", host)
		for range httpserver.DefaultMaxConnectionsPerAddress {
			if len(conns)+len(more) >= httpserver.DefaultMaxConnections {
				break
			}
			c, err := dial(from)
			if err != nil {
				t.Fatalf("filling the cap: %v", err)
			}
			// A credential's request, so as not to wait on the
			// anonymous limit's held refusals: idle is idle.
			if get(c, bufio.NewReader(c), "/v1/whoami", viewer.Secret) == 0 {
				t.Fatalf("filling the cap from %s: refused", from)
			}
			more = append(more, c)
		}
	}
	t.Logf("viewer with the cap (%d) full of idle connections of %d addresses: %s",
		httpserver.DefaultMaxConnections, 1+(len(more)+httpserver.DefaultMaxConnectionsPerAddress-1)/httpserver.DefaultMaxConnectionsPerAddress, summary(caller(200)))
}
