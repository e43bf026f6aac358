package admin_test

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/jobfleet/jobfleet/admin"
	"github.com/jobfleet/jobfleet/api"
	"github.com/jobfleet/jobfleet/internal/testkit/admintest"
)

// fakeMember is an admin.Member whose answers the test sets; its parts
// are those of its admintest.Member.
type fakeMember struct {
	admintest.Member
	view      api.View
	table     api.PartitionTable
	tableErr  error
	ready     bool
	reason    string
	healthErr error
	drains    atomic.Int32
	lastGrace atomic.Int64
}

func (f *fakeMember) Members() api.View { return f.view }

func (f *fakeMember) Partitions() (api.PartitionTable, error) {
	return f.table, f.tableErr
}

func (f *fakeMember) Ready() (bool, string) { return f.ready, f.reason }

func (f *fakeMember) Healthy(grace time.Duration) error {
	f.lastGrace.Store(int64(grace))
	return f.healthErr
}

func (f *fakeMember) Drain() { f.drains.Add(1) }

var started = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

func TestHandler(t *testing.T) {
	tests := []struct {
		name   string
		member *fakeMember
		method string
		path   string
		// wantCode is the status code; wantJSON the body, compared as JSON
		// documents.
		wantCode  int
		wantJSON  string
		wantAllow string
	}{
		{
			name:     "healthz ok",
			member:   &fakeMember{},
			method:   "GET",
			path:     "/healthz",
			wantCode: http.StatusOK,
			wantJSON: `{"status":"ok"}`,
		},
		{
			name:     "healthz failing",
			member:   &fakeMember{healthErr: errors.New("owns 3 partitions but last renewed its lease 9s ago (TTL 5s)")},
			method:   "GET",
			path:     "/healthz",
			wantCode: http.StatusServiceUnavailable,
			wantJSON: `{"error":"owns 3 partitions but last renewed its lease 9s ago (TTL 5s)"}`,
		},
		{
			name:     "readyz ready",
			member:   &fakeMember{ready: true},
			method:   "GET",
			path:     "/readyz",
			wantCode: http.StatusOK,
			wantJSON: `{"status":"ready"}`,
		},
		{
			name:     "readyz not ready",
			member:   &fakeMember{reason: "acquiring 3 of 20 partitions"},
			method:   "GET",
			path:     "/readyz",
			wantCode: http.StatusServiceUnavailable,
			wantJSON: `{"status":"not ready","reason":"acquiring 3 of 20 partitions"}`,
		},
		{
			name:     "members empty is a list",
			member:   &fakeMember{view: api.View{Revision: 7}},
			method:   "GET",
			path:     "/v1/cluster/members",
			wantCode: http.StatusOK,
			wantJSON: `{"revision":7,"members":[]}`,
		},
		{
			name: "members",
			member: &fakeMember{view: api.View{Revision: 42, Members: []api.Member{
				{ID: "a", Addr: "http://127.0.0.1:8080", LeaseID: 0x1f, StartedAt: started},
				{ID: "b", Addr: "http://127.0.0.1:8081", LeaseID: 0x20, StartedAt: started},
			}}},
			method:   "GET",
			path:     "/v1/cluster/members",
			wantCode: http.StatusOK,
			wantJSON: `{"revision":42,"members":[
				{"id":"a","addr":"http://127.0.0.1:8080","lease_id":"31","started_at":"2026-01-02T03:04:05Z"},
				{"id":"b","addr":"http://127.0.0.1:8081","lease_id":"32","started_at":"2026-01-02T03:04:05Z"}]}`,
		},
		{
			name: "partitions",
			member: &fakeMember{table: api.PartitionTable{Partitions: 2, Revision: 9, Rows: []api.PartitionRow{
				{Partition: 0, Owner: "a", Epoch: 5, Target: "a"},
				{Partition: 1, Owner: "", Epoch: 0, Target: "b"},
			}}},
			method:   "GET",
			path:     "/v1/cluster/partitions",
			wantCode: http.StatusOK,
			wantJSON: `{"partitions":2,"revision":9,"assignments":[
				{"partition":0,"owner":"a","epoch":5,"target":"a"},
				{"partition":1,"owner":"","epoch":0,"target":"b"}]}`,
		},
		{
			name:     "partitions before start",
			member:   &fakeMember{tableErr: admin.ErrNotStarted},
			method:   "GET",
			path:     "/v1/cluster/partitions",
			wantCode: http.StatusServiceUnavailable,
			wantJSON: `{"error":"this member has not joined the cluster yet"}`,
		},
		{
			name:     "partitions failing",
			member:   &fakeMember{tableErr: errors.New("ring: boom")},
			method:   "GET",
			path:     "/v1/cluster/partitions",
			wantCode: http.StatusInternalServerError,
			wantJSON: `{"error":"ring: boom"}`,
		},
		{
			name:     "drain",
			member:   &fakeMember{},
			method:   "POST",
			path:     "/v1/cluster/drain",
			wantCode: http.StatusAccepted,
			wantJSON: `{"status":"draining"}`,
		},
		{
			name:     "unknown path",
			member:   &fakeMember{},
			method:   "GET",
			path:     "/v1/nothing",
			wantCode: http.StatusNotFound,
			wantJSON: `{"error":"no such endpoint: GET /v1/nothing"}`,
		},
		{
			name:     "a job ID's slash not escaped",
			member:   &fakeMember{},
			method:   "GET",
			path:     "/v1/jobs/team/nightly",
			wantCode: http.StatusNotFound,
			wantJSON: `{"error":"no such endpoint: GET /v1/jobs/team/nightly; if the ID is team/nightly, percent-encode its \"/\" in the path: /v1/jobs/team%2Fnightly"}`,
		},
		{
			name:     "unknown path and method",
			member:   &fakeMember{},
			method:   "DELETE",
			path:     "/nothing",
			wantCode: http.StatusNotFound,
			wantJSON: `{"error":"no such endpoint: DELETE /nothing"}`,
		},
		{
			name:      "delete members",
			member:    &fakeMember{},
			method:    "DELETE",
			path:      "/v1/cluster/members",
			wantCode:  http.StatusMethodNotAllowed,
			wantJSON:  `{"error":"method DELETE not allowed on /v1/cluster/members (allowed: GET, HEAD)"}`,
			wantAllow: "GET, HEAD",
		},
		{
			name:      "get drain",
			member:    &fakeMember{},
			method:    "GET",
			path:      "/v1/cluster/drain",
			wantCode:  http.StatusMethodNotAllowed,
			wantJSON:  `{"error":"method GET not allowed on /v1/cluster/drain (allowed: POST)"}`,
			wantAllow: "POST",
		},
		{
			name:      "post healthz",
			member:    &fakeMember{},
			method:    "POST",
			path:      "/healthz",
			wantCode:  http.StatusMethodNotAllowed,
			wantJSON:  `{"error":"method POST not allowed on /healthz (allowed: GET, HEAD)"}`,
			wantAllow: "GET, HEAD",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.member.Auth = testAuth
			h := admin.Handler(tt.member, admin.Config{Gatherer: prometheus.NewRegistry()})
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, asAdmin(httptest.NewRequest(tt.method, tt.path, nil)))

			if rec.Code != tt.wantCode {
				t.Errorf("%s %s: got status %d, want %d (body %s)", tt.method, tt.path, rec.Code, tt.wantCode, rec.Body)
			}
			if got := rec.Header().Get("Content-Type"); got != "application/json" {
				t.Errorf("%s %s: got Content-Type %q, want application/json", tt.method, tt.path, got)
			}
			if got := rec.Header().Get("Allow"); got != tt.wantAllow {
				t.Errorf("%s %s: got Allow %q, want %q", tt.method, tt.path, got, tt.wantAllow)
			}
			assertJSONEqual(t, rec.Body.Bytes(), tt.wantJSON)

			wantDrains := int32(0)
			if tt.method == "POST" && tt.path == "/v1/cluster/drain" {
				wantDrains = 1
			}
			if got := tt.member.drains.Load(); got != wantDrains {
				t.Errorf("Drain called %d times, want %d", got, wantDrains)
			}
		})
	}
}

// assertJSONEqual fails unless got and want are the same JSON document.
func assertJSONEqual(t *testing.T, got []byte, want string) {
	t.Helper()
	var g, w any
	if err := json.Unmarshal(got, &g); err != nil {
		t.Fatalf("body %q is not JSON: %v", got, err)
	}
	if err := json.Unmarshal([]byte(want), &w); err != nil {
		t.Fatalf("bad want %q: %v", want, err)
	}
	gs, _ := json.Marshal(g)
	ws, _ := json.Marshal(w)
	if string(gs) != string(ws) {
		t.Errorf("got body %s, want %s", gs, ws)
	}
}

func TestHealthzPassesGrace(t *testing.T) {
	for _, tt := range []struct {
		name  string
		grace time.Duration
		want  time.Duration
	}{
		{"default", 0, 2 * time.Second},
		{"configured", 7 * time.Second, 7 * time.Second},
	} {
		t.Run(tt.name, func(t *testing.T) {
			m := &fakeMember{}
			h := admin.Handler(m, admin.Config{HealthGrace: tt.grace, Gatherer: prometheus.NewRegistry()})
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, httptest.NewRequest("GET", "/healthz", nil))
			if rec.Code != http.StatusOK {
				t.Fatalf("got status %d, want 200", rec.Code)
			}
			if got := time.Duration(m.lastGrace.Load()); got != tt.want {
				t.Errorf("Healthy called with grace %v, want %v", got, tt.want)
			}
		})
	}
}

func TestDrainCalledOncePerRequest(t *testing.T) {
	m := &fakeMember{}
	m.Auth = testAuth
	h := admin.Handler(m, admin.Config{Gatherer: prometheus.NewRegistry()})
	for i := range 3 {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, asAdmin(httptest.NewRequest("POST", "/v1/cluster/drain", nil)))
		if rec.Code != http.StatusAccepted {
			t.Fatalf("request %d: got status %d, want 202", i, rec.Code)
		}
		if got, want := m.drains.Load(), int32(i+1); got != want {
			t.Fatalf("after %d requests: Drain called %d times, want %d", i+1, got, want)
		}
	}
}

func TestHeadIsServedLikeGet(t *testing.T) {
	h := admin.Handler(&fakeMember{ready: true}, admin.Config{Gatherer: prometheus.NewRegistry()})
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("HEAD", "/readyz", nil))
	if rec.Code != http.StatusOK {
		t.Errorf("HEAD /readyz: got status %d, want 200", rec.Code)
	}
}

func TestNonCanonicalPathRedirects(t *testing.T) {
	h := admin.Handler(&fakeMember{Member: admintest.Member{Auth: testAuth}}, admin.Config{Gatherer: prometheus.NewRegistry()})
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, asAdmin(httptest.NewRequest("DELETE", "/v1//cluster/members", nil)))
	if rec.Code/100 != 3 {
		t.Fatalf("got status %d, want a redirect", rec.Code)
	}
	if got, want := rec.Header().Get("Location"), "/v1/cluster/members"; got != want {
		t.Errorf("got Location %q, want %q", got, want)
	}
}

func TestMetricsServesPrometheusText(t *testing.T) {
	reg := prometheus.NewRegistry()
	c := prometheus.NewCounter(prometheus.CounterOpts{Name: "jobfleet_test_total", Help: "A test counter."})
	reg.MustRegister(c)
	c.Add(3)
	srv := httptest.NewServer(admin.Handler(&fakeMember{Member: admintest.Member{Auth: testAuth}}, admin.Config{Gatherer: reg}))
	defer srv.Close()

	resp, err := srv.Client().Do(asAdmin(httptest.NewRequest("GET", srv.URL+"/metrics", nil)))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("got status %d, want 200 (body %s)", resp.StatusCode, body)
	}
	if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/plain") {
		t.Errorf("got Content-Type %q, want Prometheus text (text/plain; version=0.0.4)", ct)
	}
	for _, want := range []string{
		"# HELP jobfleet_test_total A test counter.",
		"# TYPE jobfleet_test_total counter",
		"jobfleet_test_total 3",
	} {
		if !strings.Contains(string(body), want) {
			t.Errorf("metrics body lacks %q:\n%s", want, body)
		}
	}
}
