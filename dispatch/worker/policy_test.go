package worker_test

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/jobfleet/jobfleet/api"
	"github.com/jobfleet/jobfleet/dispatch/worker"
	"github.com/jobfleet/jobfleet/egress"
)

// target is a loopback HTTP server that counts the connections it
// accepts and records the requests it serves.
type target struct {
	ln       *countingListener
	srv      *http.Server
	mu       sync.Mutex
	requests []received
	handler  http.HandlerFunc // optional: answers instead of 200 "hit"
}

type countingListener struct {
	net.Listener
	accepted atomic.Int64
}

func (l *countingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err == nil {
		l.accepted.Add(1)
	}
	return c, err
}

func newTarget(t *testing.T) *target {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	tg := &target{ln: &countingListener{Listener: ln}}
	tg.srv = &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		tg.mu.Lock()
		tg.requests = append(tg.requests, received{method: r.Method, path: r.URL.Path, header: r.Header.Clone(), body: string(b)})
		h := tg.handler
		tg.mu.Unlock()
		if h != nil {
			h(w, r)
			return
		}
		io.WriteString(w, "hit")
	})}
	go tg.srv.Serve(tg.ln)
	t.Cleanup(func() { tg.srv.Close() })
	return tg
}

func (tg *target) port() int { return tg.ln.Addr().(*net.TCPAddr).Port }

// url returns the target's URL with host (an address or a name) and path.
func (tg *target) url(host, path string) string {
	return fmt.Sprintf("http://%s%s", net.JoinHostPort(host, fmt.Sprint(tg.port())), path)
}

func (tg *target) got() []received {
	tg.mu.Lock()
	defer tg.mu.Unlock()
	return append([]received(nil), tg.requests...)
}

// mapResolver resolves the names it knows to fixed addresses.
type mapResolver map[string][]netip.Addr

func (m mapResolver) LookupNetIP(_ context.Context, _, host string) ([]netip.Addr, error) {
	if a, ok := m[host]; ok {
		return a, nil
	}
	return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
}

var loopback4 = netip.MustParseAddr("127.0.0.1")

// runHTTPJob runs one attempt of an http executor on a worker with policy
// and returns its completion.
func runHTTPJob(t *testing.T, policy egress.Policy, ex api.Executor, payload string) (dispatchComplete, *fakeOrch) {
	t.Helper()
	f := newFakeOrch(t, "a", nil)
	if policy.Allow == nil {
		policy.Allow = []string{}
	}
	startWorker(t, worker.Config{Orchestrators: worker.StaticOrchestrators(f.URL()), HTTPPolicy: policy}, nil)
	ex.Type = "http"
	f.enqueue(f.assignment("r1", ex, payload))
	c := f.waitComplete(t, "r1")
	return dispatchComplete{Success: c.Success, Error: c.Error, Output: c.Output}, f
}

type dispatchComplete struct {
	Success       bool
	Error, Output string
}

// TestHTTPPolicyRefuses: jobs aimed at destinations the policy denies
// fail with an error naming the address and the rule, and the target
// receives not even a connection.
func TestHTTPPolicyRefuses(t *testing.T) {
	tests := []struct {
		name    string
		policy  func(tg *target) egress.Policy
		url     func(tg *target) string
		wantErr string
	}{
		{
			name:    "loopback is denied by default",
			url:     func(tg *target) string { return tg.url("127.0.0.1", "/hook") },
			wantErr: "refused: loopback address (127.0.0.0/8), denied by default",
		},
		{
			name:    "another loopback address",
			url:     func(tg *target) string { return tg.url("127.0.0.1", "/") },
			wantErr: "loopback address",
		},
		{
			name:    "IPv4-mapped IPv6 loopback",
			url:     func(tg *target) string { return tg.url("::ffff:127.0.0.1", "/") },
			wantErr: "destination 127.0.0.1:",
		},
		{
			name:    "unspecified address reaches local listeners",
			url:     func(tg *target) string { return tg.url("0.0.0.0", "/") },
			wantErr: "unspecified address (0.0.0.0/8)",
		},
		{
			name: "a denied port beats an allowed range",
			policy: func(tg *target) egress.Policy {
				return egress.Policy{Allow: []string{"127.0.0.0/8"}, Deny: []string{fmt.Sprintf("127.0.0.1:%d", tg.port())}}
			},
			url:     func(tg *target) string { return tg.url("127.0.0.1", "/") },
			wantErr: "on the deny list (127.0.0.1:",
		},
		{
			name: "an etcd endpoint, even with loopback allowed",
			policy: func(tg *target) egress.Policy {
				return egress.Policy{Allow: []string{"127.0.0.0/8"}, Fleet: []string{tg.url("127.0.0.1", "")}}
			},
			url:     func(tg *target) string { return tg.url("127.0.0.1", "/v3/kv/range") },
			wantErr: "fleet endpoint http://127.0.0.1:",
		},
		{
			name: "a host name resolving to a denied address (checked at dial time)",
			policy: func(*target) egress.Policy {
				return egress.Policy{Resolver: mapResolver{"rebound.example": {loopback4}}}
			},
			url:     func(tg *target) string { return tg.url("rebound.example", "/") },
			wantErr: "destination rebound.example (127.0.0.1:",
		},
		{
			name: "a host name on the deny list",
			policy: func(*target) egress.Policy {
				return egress.Policy{Allow: []string{"127.0.0.1"}, Deny: []string{"*.internal"}, Resolver: mapResolver{"metadata.internal": {loopback4}}}
			},
			url:     func(tg *target) string { return tg.url("metadata.internal", "/") },
			wantErr: "on the deny list (*.internal)",
		},
		{
			name: "an etcd endpoint known by name, reached by address",
			policy: func(tg *target) egress.Policy {
				return egress.Policy{Allow: []string{"127.0.0.0/8"}, Fleet: []string{tg.url("etcd.example", "")}, Resolver: mapResolver{"etcd.example": {loopback4}}}
			},
			url:     func(tg *target) string { return tg.url("127.0.0.1", "/v3/kv/put") },
			wantErr: "fleet endpoint http://etcd.example:",
		},
		{
			name: "user and password in the URL",
			policy: func(*target) egress.Policy {
				return egress.Policy{Allow: []string{"127.0.0.0/8"}}
			},
			url: func(tg *target) string {
				return strings.Replace(tg.url("127.0.0.1", "/"), "://", "://admin:hunter2@", 1)
			},
			wantErr: "user name or password",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tg := newTarget(t)
			var policy egress.Policy
			if tt.policy != nil {
				policy = tt.policy(tg)
			}
			c, _ := runHTTPJob(t, policy, api.Executor{URL: tt.url(tg), Method: "POST"}, `{"a":1}`)
			if c.Success || !strings.Contains(c.Error, tt.wantErr) {
				t.Errorf("completion success=%v error=%q, want a failure containing %q", c.Success, c.Error, tt.wantErr)
			}
			if strings.Contains(c.Error, "hunter2") {
				t.Errorf("error %q repeats the URL's password", c.Error)
			}
			if n := tg.ln.accepted.Load(); n != 0 {
				t.Errorf("the target accepted %d connections, want none", n)
			}
		})
	}
}

// TestHTTPPolicyOrchestratorDrain: a job aimed at an orchestrator's own
// API (here its drain endpoint) is refused even with loopback allowed;
// the orchestrator never sees the request.
func TestHTTPPolicyOrchestratorDrain(t *testing.T) {
	f := newFakeOrch(t, "a", nil)
	startWorker(t, worker.Config{Orchestrators: worker.StaticOrchestrators(f.URL()), HTTPPolicy: egress.Policy{Allow: []string{"127.0.0.0/8"}}}, nil)
	f.enqueue(f.assignment("r1", api.Executor{Type: "http", URL: f.URL() + "/v1/cluster/drain", Method: "POST"}, ""))
	c := f.waitComplete(t, "r1")
	if c.Success || !strings.Contains(c.Error, "orchestrator "+f.URL()) || !strings.Contains(c.Error, "always denied") {
		t.Errorf("completion success=%v error=%q, want refused as the fleet's orchestrator", c.Success, c.Error)
	}
	f.mu.Lock()
	drains := f.drains
	f.mu.Unlock()
	if drains != 0 {
		t.Errorf("the orchestrator got %d drain requests, want none", drains)
	}
}

// TestHTTPPolicyAllows: allow rules by address, port and name permit a
// destination a default rule denies.
func TestHTTPPolicyAllows(t *testing.T) {
	tests := []struct {
		name   string
		policy func(tg *target) egress.Policy
		host   string
	}{
		{name: "CIDR", policy: func(*target) egress.Policy { return egress.Policy{Allow: []string{"127.0.0.0/8"}} }, host: "127.0.0.1"},
		{name: "address and port", policy: func(tg *target) egress.Policy {
			return egress.Policy{Allow: []string{fmt.Sprintf("127.0.0.1:%d", tg.port())}}
		}, host: "127.0.0.1"},
		{name: "host name", policy: func(*target) egress.Policy {
			return egress.Policy{Allow: []string{"Echo.Example"}, Resolver: mapResolver{"echo.example": {loopback4}}}
		}, host: "echo.example"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tg := newTarget(t)
			c, _ := runHTTPJob(t, tt.policy(tg), api.Executor{URL: tg.url(tt.host, "/hook"), Method: "POST"}, `{"a":1}`)
			if !c.Success || c.Output != "hit" {
				t.Errorf("completion success=%v error=%q output=%q, want success", c.Success, c.Error, c.Output)
			}
			if got := tg.got(); len(got) != 1 || got[0].body != `{"a":1}` {
				t.Errorf("target got %v, want the one request", got)
			}
		})
	}
}

// TestHTTPRedirects: redirects are not followed unless the job allows
// them; then only within the policy, never changing the method or
// dropping the body, and without the job's headers for another origin.
func TestHTTPRedirects(t *testing.T) {
	tests := []struct {
		name            string
		status          int
		method          string
		follow          bool
		allowTarget     bool
		wantErr         string // "" for success
		wantTargetCalls int
	}{
		{name: "not followed by default", status: 307, method: "POST", allowTarget: true, wantErr: "redirect to http://127.0.0.1:"},
		{name: "302 answering a POST is not re-sent as a body-less GET", status: 302, method: "POST", follow: true, allowTarget: true, wantErr: "would turn the POST into a GET"},
		{name: "303 answering a DELETE", status: 303, method: "DELETE", follow: true, allowTarget: true, wantErr: "would turn the DELETE into a GET"},
		{name: "307 keeps method and body", status: 307, method: "POST", follow: true, allowTarget: true, wantTargetCalls: 1},
		{name: "308 keeps a DELETE", status: 308, method: "DELETE", follow: true, allowTarget: true, wantTargetCalls: 1},
		{name: "302 for a GET is followed", status: 302, method: "GET", follow: true, allowTarget: true, wantTargetCalls: 1},
		{name: "a redirect to a denied address is refused even when following", status: 307, method: "POST", follow: true, wantErr: "loopback address"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tg := newTarget(t)
			from := newTarget(t)
			from.handler = func(w http.ResponseWriter, r *http.Request) {
				http.Redirect(w, r, tg.url("127.0.0.1", "/moved"), tt.status)
			}
			allow := []string{fmt.Sprintf("127.0.0.1:%d", from.port())}
			if tt.allowTarget {
				allow = append(allow, fmt.Sprintf("127.0.0.1:%d", tg.port()))
			}
			ex := api.Executor{URL: from.url("127.0.0.1", "/start"), Method: tt.method, FollowRedirects: tt.follow,
				Headers: map[string]api.HeaderValue{"Authorization": api.Literal("Bearer for-the-first-host-only"), "X-Trace": api.Literal("1")}}
			payload := `{"keep":"me"}`
			c, _ := runHTTPJob(t, egress.Policy{Allow: allow}, ex, payload)
			if tt.wantErr == "" && !c.Success {
				t.Errorf("completion error %q, want success", c.Error)
			}
			if tt.wantErr != "" && (c.Success || !strings.Contains(c.Error, tt.wantErr)) {
				t.Errorf("completion success=%v error=%q, want failure containing %q", c.Success, c.Error, tt.wantErr)
			}
			got := tg.got()
			if len(got) != tt.wantTargetCalls {
				t.Fatalf("redirect target got %d requests, want %d", len(got), tt.wantTargetCalls)
			}
			if tt.wantTargetCalls == 0 && tg.ln.accepted.Load() != 0 {
				t.Errorf("redirect target accepted %d connections, want none", tg.ln.accepted.Load())
			}
			if len(got) == 1 {
				r := got[0]
				wantBody := payload
				if tt.method == "GET" {
					wantBody = "" // the first request's body is the payload too; a GET's redirect carries none
					if first := from.got(); len(first) != 1 || first[0].body != payload {
						t.Errorf("first request %v, want the payload", first)
					}
				}
				if r.method != tt.method || (tt.method != "GET" && r.body != wantBody) {
					t.Errorf("redirected request %s body %q, want %s body %q", r.method, r.body, tt.method, wantBody)
				}
				if r.header.Get("Authorization") != "" || r.header.Get("X-Trace") != "" || r.header.Get("Referer") != "" {
					t.Errorf("redirected request to another origin carries the job's headers: %v", r.header)
				}
				if r.header.Get("Jobfleet-Run-Id") != "r1" {
					t.Errorf("redirected request lost the Jobfleet headers: %v", r.header)
				}
			}
		})
	}
}

func TestHTTPRedirectLoopStops(t *testing.T) {
	loop := newTarget(t)
	loop.handler = func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, loop.url("127.0.0.1", "/again"), http.StatusTemporaryRedirect)
	}
	c, _ := runHTTPJob(t, egress.Policy{Allow: []string{"127.0.0.1"}}, api.Executor{URL: loop.url("127.0.0.1", "/"), Method: "POST", FollowRedirects: true}, "")
	if c.Success || !strings.Contains(c.Error, "more than 5 redirects") {
		t.Errorf("completion success=%v error=%q, want a failure after 5 redirects", c.Success, c.Error)
	}
	if n := len(loop.got()); n != 6 {
		t.Errorf("%d requests, want the first and 5 redirects", n)
	}
}

func TestHTTPPolicyConfigErrors(t *testing.T) {
	for _, p := range []egress.Policy{
		{Allow: []string{"not a host!"}},
		{Deny: []string{"10.0.0.0/33"}},
		{Deny: []string{"example.com:http"}},
		{Allow: []string{""}},
		{Fleet: []string{"http://[::1"}},
	} {
		_, err := worker.New(worker.Config{ID: "w", Orchestrators: worker.StaticOrchestrators("http://127.0.0.1:1"), HTTPPolicy: p})
		if err == nil {
			t.Errorf("New with %+v: nil error, want invalid config", p)
		}
	}
}
