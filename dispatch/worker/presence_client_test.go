package worker

import (
	"net"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
)

// TestPresenceStreamsDialAfresh: a presence stream never goes on a pooled
// connection (one the other side may have closed meanwhile, which
// net/http would report only once the stream's silent body wrote again,
// past the orchestrator's grace), while the worker's other requests keep
// reusing theirs; a transport that is not an *http.Transport is used as
// it is.
func TestPresenceStreamsDialAfresh(t *testing.T) {
	var conns atomic.Int64
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			conns.Add(1)
		}
	}
	srv.Start()
	defer srv.Close()

	for _, hc := range []*http.Client{defaultHTTPClient(4, nil), {}} {
		conns.Store(0)
		ph := presenceClient(hc)
		get := func(c *http.Client) {
			t.Helper()
			resp, err := c.Get(srv.URL)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
		}
		get(hc)
		get(hc)
		if got := conns.Load(); got != 1 {
			t.Fatalf("the worker's own requests used %d connections, want 1 (reused)", got)
		}
		get(ph)
		get(ph)
		if got := conns.Load(); got != 3 {
			t.Fatalf("connections after two presence requests = %d, want 3 (one each, none pooled)", got)
		}
		if hc.Transport != nil && hc.Transport.(*http.Transport).DisableKeepAlives {
			t.Fatal("presenceClient changed the worker's own transport")
		}
		hc.CloseIdleConnections()
		ph.CloseIdleConnections()
	}

	custom := &http.Client{Transport: roundTripperFunc(http.DefaultTransport.RoundTrip)}
	if presenceClient(custom) != custom {
		t.Fatal("a custom round tripper was replaced")
	}
}

type roundTripperFunc func(*http.Request) (*http.Response, error)

func (f roundTripperFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }
