package admin_test

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"
	"go.uber.org/zap/zaptest/observer"

	"github.com/jobfleet/jobfleet/admin"
	"github.com/jobfleet/jobfleet/api"
	"github.com/jobfleet/jobfleet/auth"
	"github.com/jobfleet/jobfleet/dispatch/workers"
	"github.com/jobfleet/jobfleet/internal/storage"
	"github.com/jobfleet/jobfleet/internal/testkit/admintest"
	"github.com/jobfleet/jobfleet/internal/testkit/authtest"
	"github.com/jobfleet/jobfleet/internal/testkit/etcdtest"
	"github.com/jobfleet/jobfleet/store"
)

// fakeProtocol is a WorkerProtocol and a WorkerRegistry that answers at
// once and records the requests it served.
type fakeProtocol struct {
	mu    sync.Mutex
	calls []any
	block chan struct{} // if not nil, polls wait for it to close (or their context)
	// written is the bytes each completion says its write stored.
	written int
}

func (f *fakeProtocol) record(req any) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, req)
}

func (f *fakeProtocol) count() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.calls)
}

func (f *fakeProtocol) Poll(ctx context.Context, req api.PollRequest) (api.PollResponse, error) {
	f.record(req)
	if f.block != nil {
		select {
		case <-f.block:
		case <-ctx.Done():
		}
	}
	return api.PollResponse{Attempts: []api.AttemptGrant{}}, nil
}

func (f *fakeProtocol) Heartbeat(_ context.Context, req api.HeartbeatRequest) (api.HeartbeatResponse, error) {
	f.record(req)
	return api.HeartbeatResponse{RunLease: api.Duration(time.Second)}, nil
}

func (f *fakeProtocol) PushOutput(_ context.Context, req api.OutputPush) (api.OutputPushResponse, error) {
	f.record(req)
	return api.OutputPushResponse{Held: true}, nil
}

func (f *fakeProtocol) Output(runID string, item *int, attempt int) (api.RunOutput, error) {
	return api.RunOutput{RunID: runID, Attempt: 1, Running: true, Source: api.OutputLive, Output: "hello\n"}, nil
}

func (f *fakeProtocol) FollowOutput(_ context.Context, runID string, item *int, attempt int, emit func(string, any) error) error {
	if err := emit(api.EventOutput, api.OutputEvent{Attempt: 1, Data: "hello\n"}); err != nil {
		return err
	}
	return emit(api.EventEnd, api.RunOutput{RunID: runID, Attempt: 1, Source: api.OutputLive})
}

func (f *fakeProtocol) Complete(_ context.Context, req api.CompleteRequest) (api.CompleteResponse, error) {
	f.record(req)
	return api.CompleteResponse{Status: api.RunSucceeded, Written: f.written}, nil
}

func (f *fakeProtocol) Register(_ context.Context, req api.RegisterRequest) (api.RegisterResponse, error) {
	f.record(req)
	return api.RegisterResponse{TTL: api.Duration(6 * time.Second), Orchestrator: "m1"}, nil
}

func (f *fakeProtocol) Deregister(_ context.Context, req api.DeregisterRequest) error {
	f.record(req)
	return nil
}

func (f *fakeProtocol) EndPolls(_ context.Context, req api.EndPollsRequest) error {
	f.record(req)
	return nil
}

func (f *fakeProtocol) Workers() ([]api.Worker, error) { return []api.Worker{}, nil }

// Presence accepts the stream and reads it to its end.
func (f *fakeProtocol) Presence(_ context.Context, credential string, s workers.PresenceStream) error {
	if err := s.Accept(); err != nil {
		return err
	}
	for {
		line, err := s.Next(time.Second)
		if err != nil {
			if errors.Is(err, io.EOF) {
				return nil
			}
			return err
		}
		f.record(string(line))
	}
}

func (f *fakeProtocol) WhyPending(string, string, string, string) string { return "" }

// secEnv is the API over a real etcd: job store, credential store and
// the credential cache kept current by its watch, on a fake clock.
type secEnv struct {
	t      *testing.T
	client *clientv3.Client
	ns     string
	clock  *clockwork.FakeClock
	jobs   *store.Etcd
	tokens *auth.Store
	cache  *auth.Cache
	member *fakeMember
	proto  *fakeProtocol
	reg    *prometheus.Registry
	logs   *observer.ObservedLogs
	h      http.Handler
	srv    *httptest.Server
}

type secOptions struct {
	limits   admin.Limits
	loopback bool
	insecure bool
	noAuth   bool
	block    bool // polls block until the test ends
	tokens   auth.StoreConfig
	wrote    func(int64)
	room     func() int64
}

func newSecEnv(t *testing.T, o secOptions) *secEnv {
	t.Helper()
	e := &secEnv{t: t, client: etcd.Client(t), ns: etcdtest.Namespace(t), clock: clockwork.NewFakeClockAt(time.Date(2026, 5, 1, 0, 0, 0, 0, time.UTC))}
	e.jobs = store.NewEtcd(e.client, e.ns, testPartitions, api.DefaultLimits(), e.clock.Now)
	e.tokens = auth.NewStoreConfig(e.client, e.ns, e.clock.Now, o.tokens)
	e.cache = authtest.RunCache(t, e.client, auth.CacheConfig{Namespace: e.ns, Clock: e.clock, Logger: zaptest.NewLogger(t)})

	e.member = &fakeMember{ready: true, view: api.View{Revision: 1}, table: api.PartitionTable{Partitions: 1, Rows: []api.PartitionRow{{Partition: 0}}}}
	e.proto = &fakeProtocol{}
	if o.block {
		e.proto.block = make(chan struct{})
	}
	core, logs := observer.New(zap.DebugLevel)
	e.logs = logs
	e.reg = prometheus.NewRegistry()
	e.member.Member = admintest.Member{
		Jobs:          e.jobs,
		Protocol:      e.proto,
		Registry:      e.proto,
		Auth:          e.cache,
		StorageReport: func(context.Context) (storage.Report, error) { return storage.Report{Revision: 1}, nil },
		Cluster:       newFakeCluster(1),
		Wrote:         o.wrote,
		Room:          o.room,
	}
	cfg := admin.Config{
		Gatherer: e.reg,
		Registry: e.reg,
		Logger:   zap.New(core),
		Tokens:   e.tokens,
		Insecure: o.insecure,
		Loopback: o.loopback,
		Limits:   o.limits,
		Clock:    e.clock,
		// No scheduler applies cancel requests here: answer 202 at once.
		CancelWait: time.Millisecond,
	}
	if o.limits == (admin.Limits{}) {
		cfg.Limits = admin.Limits{Rate: -1}
	}
	if o.noAuth {
		e.member.Auth = nil
	}
	e.h = admin.Handler(e.member, cfg)
	e.srv = httptest.NewServer(e.h)
	t.Cleanup(e.srv.Close)
	t.Cleanup(func() {
		if e.proto.block != nil {
			close(e.proto.block)
		}
	})
	return e
}

// cred stores a credential and waits until the cache has it.
func (e *secEnv) cred(req api.CreateRequest) api.Created {
	e.t.Helper()
	c, rev, err := e.tokens.Create(context.Background(), req, "test")
	if err != nil {
		e.t.Fatal(err)
	}
	e.waitRev(rev)
	return c
}

func (e *secEnv) waitRev(rev int64) {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := e.cache.WaitRevision(ctx, rev); err != nil {
		e.t.Fatalf("cache: %v", err)
	}
}

// request describes one HTTP request of a test.
type request struct {
	method, path string
	body         string
	header       map[string]string
	// stream: the reply does not end (an event stream); send reads its
	// status and headers and closes it.
	stream bool
}

// send makes r with bearer token tok ("" for none); a body is sent as
// application/json unless the header says otherwise.
func (e *secEnv) send(r request, tok string) (int, http.Header, []byte) {
	e.t.Helper()
	var rd io.Reader
	if r.body != "" {
		rd = strings.NewReader(r.body)
	}
	req, err := http.NewRequest(r.method, e.srv.URL+r.path, rd)
	if err != nil {
		e.t.Fatal(err)
	}
	if r.body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	if tok != "" {
		req.Header.Set("Authorization", "Bearer "+tok)
	}
	for k, v := range r.header {
		if k == "Host" {
			req.Host = v
			continue
		}
		req.Header.Set(k, v)
	}
	resp, err := e.srv.Client().Do(req)
	if err != nil {
		e.t.Fatalf("%s with token %q: %v", r.path, tok, err)
	}
	defer resp.Body.Close()
	if r.stream && resp.StatusCode == http.StatusOK {
		return resp.StatusCode, resp.Header, nil
	}
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header, b
}

// state returns every key under the namespace with its mod revision, and
// what the fakes were asked to do.
func (e *secEnv) state() string {
	e.t.Helper()
	resp, err := e.client.Get(context.Background(), e.ns, clientv3.WithPrefix())
	if err != nil {
		e.t.Fatal(err)
	}
	var b strings.Builder
	for _, kv := range resp.Kvs {
		fmt.Fprintf(&b, "%s@%d\n", kv.Key, kv.ModRevision)
	}
	fmt.Fprintf(&b, "drains=%d protocol=%d\n", e.member.drains.Load(), e.proto.count())
	return b.String()
}

// ensureJob stores job id if it is missing.
// ensureCalendar stores calendar name if it is not stored.
func (e *secEnv) ensureCalendar(name string) {
	e.t.Helper()
	if _, err := e.jobs.GetCalendar(context.Background(), name); err == nil {
		return
	}
	if _, _, err := e.jobs.PutCalendar(context.Background(), api.Calendar{Name: name, Dates: []string{"2026-01-01"}}); err != nil {
		e.t.Fatal(err)
	}
}

func (e *secEnv) ensureLimit(key string) {
	e.t.Helper()
	if _, err := e.jobs.GetLimit(context.Background(), key); err == nil {
		return
	}
	two := 2
	if _, _, err := e.jobs.PutLimit(context.Background(), api.Limit{Key: key, MaxRunning: &two}); err != nil {
		e.t.Fatal(err)
	}
}

func (e *secEnv) ensureJob(id string) {
	e.t.Helper()
	if _, err := e.jobs.Get(context.Background(), id); err == nil {
		return
	}
	j := api.Job{ID: id, Schedule: "@every 1h", Executor: api.Executor{Type: "http", URL: "http://127.0.0.1:9/hook", Headers: map[string]api.HeaderValue{"Authorization": api.Literal("Bearer target-secret")}}}
	if _, err := e.jobs.Create(context.Background(), j); err != nil {
		e.t.Fatal(err)
	}
}

// ensureBackfill makes sure job id exists with a backfill recorded.
func (e *secEnv) ensureBackfill(id string) {
	e.t.Helper()
	e.ensureJob(id)
	if _, _, err := e.jobs.GetBackfill(context.Background(), id); err == nil {
		return
	}
	at := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	if _, err := e.jobs.PutBackfill(context.Background(), id, store.Backfill{From: at, To: at.Add(time.Hour), Max: 1, Times: []time.Time{at}, Outcome: "p"}, 0); err != nil {
		e.t.Fatal(err)
	}
}

// putRun stores a run of job id directly (no scheduler runs here) and
// returns its ID.
func (e *secEnv) putRun(id string) string {
	e.t.Helper()
	return e.putRunStatus(id, api.RunSucceeded)
}

// putRunStatus stores a run of job id in status st (no owner takes it in:
// the environment has no scheduler), and returns its ID.
func (e *secEnv) putRunStatus(id string, st api.RunStatus) string {
	e.t.Helper()
	at := time.Date(2026, 5, 1, 0, 0, 0, 0, time.UTC)
	r := api.Run{ID: store.RunID(id, at), JobID: id, Partition: e.jobs.Partition(id), ScheduledAt: at, Status: st,
		Steps: []api.RunStep{{ID: "a", Items: 1, Status: api.RunPending}}, Items: []api.Item{{Status: api.RunPending, Attempts: []api.Attempt{}}}}
	b, _ := json.Marshal(r)
	if _, err := e.client.Put(context.Background(), e.jobs.Keys().Run(r.Partition, id, at), string(b)); err != nil {
		e.t.Fatal(err)
	}
	return r.ID
}

// principalCase is a caller of the matrix.
type principalCase struct {
	name   string
	token  string
	role   api.Role // "" for callers with no valid credential
	prefix string
}

// TestRouteMatrix sends every route of the API as every kind of caller:
// each role with and without a prefix scope, no credential, a malformed,
// a revoked and an expired one. It checks the status against a table
// written here independently of the route table (401 for no valid
// credential, 403 for the wrong role or scope, the route's own success
// code otherwise), and that a refused request changed nothing: the etcd
// keys under the namespace, drains and worker protocol calls are the same
// after it as before.
func TestRouteMatrix(t *testing.T) {
	e := newSecEnv(t, secOptions{})
	const scope = "team/"
	var callers []principalCase
	for _, role := range api.Roles() {
		c := e.cred(api.CreateRequest{Role: role})
		callers = append(callers, principalCase{name: string(role), token: c.Secret, role: role})
		if role != api.RoleAdmin {
			c := e.cred(api.CreateRequest{Role: role, Prefix: scope})
			callers = append(callers, principalCase{name: string(role) + " " + scope, token: c.Secret, role: role, prefix: scope})
		}
	}
	revoked := e.cred(api.CreateRequest{Role: api.RoleAdmin})
	rev, err := e.tokens.Revoke(context.Background(), revoked.ID)
	if err != nil {
		t.Fatal(err)
	}
	e.waitRev(rev)
	expired := e.cred(api.CreateRequest{Role: api.RoleAdmin, TTL: "1h"})
	e.clock.Advance(2 * time.Hour)
	callers = append(callers,
		principalCase{name: "no credential"},
		principalCase{name: "malformed", token: "not-a-token"},
		principalCase{name: "forged secret", token: auth.FormatToken(callers[0].token[3:15], strings.Repeat("A", 43))},
		principalCase{name: "revoked admin", token: revoked.Secret},
		principalCase{name: "expired admin", token: expired.Secret},
	)

	// allowed lists, per route, the roles that may call it; "*" means
	// anyone, even without a credential.
	type routeCase struct {
		pattern string
		allowed []api.Role
		anyone  bool
		// job is the job the route concerns ("" for none); the route is
		// sent for a job inside and one outside the scope.
		job bool
		// make builds the request for job id (and the setup it needs,
		// done before the state snapshot).
		make func(id string) request
		ok   int
	}
	viewers := []api.Role{api.RoleViewer, api.RoleOperator, api.RoleAdmin}
	members := []api.Role{api.RoleViewer, api.RoleWorker, api.RoleOperator, api.RoleAdmin}
	writers := []api.Role{api.RoleOperator, api.RoleAdmin}
	workers := []api.Role{api.RoleWorker, api.RoleAdmin}
	admins := []api.Role{api.RoleAdmin}
	get := func(p string) func(string) request {
		return func(string) request { return request{method: "GET", path: p} }
	}
	// ensured is the request method path(id) with body, once ensure(id)
	// has put what it acts on in place.
	ensured := func(ensure func(id string), method string, path func(id string) string, body string) func(string) request {
		return func(id string) request {
			ensure(id)
			return request{method: method, path: path(id), body: body}
		}
	}
	// onJob is the request method on job id's path/sub..., the job
	// created first if it is not there.
	onJob := func(method string, sub ...string) func(string) request {
		return ensured(e.ensureJob, method, func(id string) string { return jobPath(id, sub...) }, "")
	}
	backfillPath := func(id string) string { return jobPath(id, "backfill") }
	n := 0
	routes := []routeCase{
		{pattern: "GET /healthz", anyone: true, make: get("/healthz"), ok: 200},
		{pattern: "GET /readyz", anyone: true, make: get("/readyz"), ok: 200},
		{pattern: "GET /metrics", allowed: viewers, make: get("/metrics"), ok: 200},
		{pattern: "GET /v1/cluster/members", allowed: members, make: get("/v1/cluster/members"), ok: 200},
		{pattern: "GET /v1/cluster/partitions", allowed: viewers, make: get("/v1/cluster/partitions"), ok: 200},
		{pattern: "GET /v1/cluster/storage", allowed: viewers, make: get("/v1/cluster/storage"), ok: 200},
		{pattern: "GET /v1/cluster/workers", allowed: viewers, make: get("/v1/cluster/workers"), ok: 200},
		{pattern: "GET /v1/cluster/overview", allowed: viewers, make: get("/v1/cluster/overview"), ok: 200},
		{pattern: "GET /v1/cluster/activity", allowed: viewers, make: get("/v1/cluster/activity"), ok: 200},
		{pattern: "GET /v1/runs/late", allowed: viewers, make: get("/v1/runs/late"), ok: 200},
		{pattern: "GET /v1/cluster/placement", allowed: viewers, job: true, ok: 200, make: func(id string) request {
			return request{method: "GET", path: "/v1/cluster/placement?job=" + url.QueryEscape(id)}
		}},
		{pattern: "GET /v1/cluster/partitions/watch", allowed: viewers, ok: 200, make: func(string) request {
			return request{method: "GET", path: "/v1/cluster/partitions/watch", stream: true}
		}},
		{pattern: "GET /v1/whoami", allowed: members, make: get("/v1/whoami"), ok: 200},
		{pattern: "GET /ui/", anyone: true, make: get("/ui/"), ok: 200},
		{pattern: "GET /{$}", anyone: true, make: get("/"), ok: 200}, // redirected to /ui/
		{pattern: "POST /v1/cluster/drain", allowed: admins, make: func(string) request { return request{method: "POST", path: "/v1/cluster/drain"} }, ok: 202},
		{pattern: "GET /v1/jobs", allowed: viewers, make: get("/v1/jobs"), ok: 200},
		{pattern: "POST /v1/jobs", allowed: writers, job: true, ok: 201, make: func(id string) request {
			n++
			return request{method: "POST", path: "/v1/jobs", body: httpJob(fmt.Sprintf("%snew-%d", id, n), "")}
		}},
		{pattern: "POST /v1/jobs:batch", allowed: writers, job: true, ok: 200, make: func(id string) request {
			n++
			return request{method: "POST", path: "/v1/jobs:batch", body: `{"jobs": [` + httpJob(fmt.Sprintf("%snew-%d", id, n), "") + `]}`}
		}},
		{pattern: "GET /v1/jobs/{id}", allowed: viewers, job: true, ok: 200, make: onJob("GET")},
		{pattern: "PUT /v1/jobs/{id}", allowed: writers, job: true, ok: 200, make: func(id string) request {
			e.ensureJob(id)
			return request{method: "PUT", path: jobPath(id), body: httpJob(id, "")}
		}},
		{pattern: "DELETE /v1/jobs/{id}", allowed: writers, job: true, ok: 204, make: onJob("DELETE")},
		{pattern: "POST /v1/jobs/{id}/pause", allowed: writers, job: true, ok: 200, make: onJob("POST", "pause")},
		{pattern: "POST /v1/jobs/{id}/resume", allowed: writers, job: true, ok: 200, make: onJob("POST", "resume")},
		{pattern: "POST /v1/jobs/{id}/trigger", allowed: writers, job: true, ok: 202, make: onJob("POST", "trigger")},
		{pattern: "POST /v1/jobs/{id}/backfill", allowed: writers, job: true, ok: 202, make: func(id string) request {
			e.ensureJob(id)
			e.jobs.DeleteBackfill(context.Background(), id) // one at a time
			return request{method: "POST", path: jobPath(id, "backfill"), body: `{"from": "2026-01-01T00:00:00Z", "to": "2026-01-01T03:00:00Z"}`}
		}},
		{pattern: "GET /v1/jobs/{id}/backfill", allowed: viewers, job: true, ok: 200, make: ensured(e.ensureBackfill, "GET", backfillPath, "")},
		{pattern: "DELETE /v1/jobs/{id}/backfill", allowed: writers, job: true, ok: 200, make: ensured(e.ensureBackfill, "DELETE", backfillPath, "")},
		{pattern: "GET /v1/jobs/{id}/dependents", allowed: viewers, job: true, ok: 200, make: onJob("GET", "dependents")},
		{pattern: "GET /v1/jobs/{id}/notifications", allowed: viewers, job: true, ok: 200, make: onJob("GET", "notifications")},
		{pattern: "GET /v1/jobs/{id}/next", allowed: viewers, job: true, ok: 200, make: onJob("GET", "next")},
		{pattern: "POST /v1/schedule:preview", allowed: viewers, ok: 200, make: func(string) request {
			return request{method: "POST", path: "/v1/schedule:preview", body: `{"schedule": "@daily", "count": 3}`}
		}},
		{pattern: "GET /v1/jobs/{id}/runs", allowed: viewers, job: true, ok: 200, make: onJob("GET", "runs")},
		{pattern: "GET /v1/runs", allowed: viewers, make: get("/v1/runs"), ok: 200},
		{pattern: "GET /v1/runs/{run_id}", allowed: viewers, job: true, ok: 200, make: func(id string) request {
			return request{method: "GET", path: "/v1/runs/" + url.PathEscape(e.putRun(id))}
		}},
		{pattern: "GET /v1/calendars", allowed: viewers, make: get("/v1/calendars"), ok: 200},
		{pattern: "GET /v1/calendars/{name}", allowed: viewers, job: true, ok: 200, make: ensured(e.ensureCalendar, "GET", calendarPath, "")},
		{pattern: "PUT /v1/calendars/{name}", allowed: writers, job: true, ok: 200, make: ensured(e.ensureCalendar, "PUT", calendarPath, `{"dates":["2026-12-25"]}`)},
		{pattern: "DELETE /v1/calendars/{name}", allowed: writers, job: true, ok: 204, make: ensured(e.ensureCalendar, "DELETE", calendarPath, "")},
		{pattern: "GET /v1/limits", allowed: viewers, make: get("/v1/limits"), ok: 200},
		{pattern: "GET /v1/limits/{key}", allowed: viewers, job: true, ok: 200, make: ensured(e.ensureLimit, "GET", limitPath, "")},
		{pattern: "PUT /v1/limits/{key}", allowed: writers, job: true, ok: 200, make: ensured(e.ensureLimit, "PUT", limitPath, `{"max_running":3}`)},
		{pattern: "DELETE /v1/limits/{key}", allowed: writers, job: true, ok: 204, make: ensured(e.ensureLimit, "DELETE", limitPath, "")},
		{pattern: "POST /v1/runs/{run_id}/cancel", allowed: writers, job: true, ok: 202, make: func(id string) request {
			e.ensureJob(id)
			return request{method: "POST", path: "/v1/runs/" + url.PathEscape(e.putRunStatus(id, api.RunPending)) + "/cancel"}
		}},
		// A run that has not ended cannot be retried: 409 once past the
		// credential checks.
		{pattern: "POST /v1/runs/{run_id}/retry", allowed: writers, job: true, ok: 409, make: func(id string) request {
			e.ensureJob(id)
			return request{method: "POST", path: "/v1/runs/" + url.PathEscape(e.putRunStatus(id, api.RunPending)) + "/retry", body: `{"from": "a"}`}
		}},
		// Viewers read a run's live output (a stream with follow=1).
		{pattern: "GET /v1/runs/{run_id}/output", allowed: viewers, job: true, ok: 200, make: func(id string) request {
			return request{method: "GET", path: "/v1/runs/" + url.PathEscape(store.RunID(id, time.Now())) + "/output"}
		}},
		// Workers push the output of the attempts they hold.
		{pattern: "POST /v1/worker/output", allowed: workers, ok: 200, make: func(string) request {
			return request{method: "POST", path: api.PathOutput, body: `{"worker":"w","run_id":"` + store.RunID("team/a", time.Now()) + `","attempt":1,"offset":0,"data":"x"}`}
		}},
		{pattern: "POST /v1/worker/poll", allowed: workers, ok: 200, make: func(string) request {
			return request{method: "POST", path: api.PathPoll, body: `{"worker":"w","executors":["http"],"max":1}`}
		}},
		{pattern: "POST /v1/worker/poll:end", allowed: workers, ok: 200, make: func(string) request {
			return request{method: "POST", path: api.PathEndPolls, body: `{"worker":"w"}`}
		}},
		{pattern: "POST /v1/worker/heartbeat", allowed: workers, ok: 200, make: func(string) request {
			return request{method: "POST", path: api.PathHeartbeat, body: `{"worker":"w","run_id":"` + store.RunID("team/a", time.Now()) + `","attempt":1}`}
		}},
		{pattern: "POST /v1/worker/complete", allowed: workers, ok: 200, make: func(string) request {
			return request{method: "POST", path: api.PathComplete, body: `{"worker":"w","run_id":"` + store.RunID("team/a", time.Now()) + `","attempt":1,"success":true}`}
		}},
		{pattern: "POST /v1/worker/register", allowed: workers, ok: 200, make: func(string) request {
			return request{method: "POST", path: api.PathRegister, body: `{"worker":"w","executors":["http"],"concurrency":4,"active":0}`}
		}},
		{pattern: "POST /v1/worker/deregister", allowed: workers, ok: 200, make: func(string) request {
			return request{method: "POST", path: api.PathDeregister, body: `{"worker":"w"}`}
		}},
		{pattern: "POST /v1/worker/presence", allowed: workers, ok: 200, make: func(string) request {
			return request{method: "POST", path: api.PathPresence, body: `{"worker":"w"}` + "\n{}\n"}
		}},
		{pattern: "POST /v1/tokens", allowed: admins, ok: 201, make: func(string) request {
			return request{method: "POST", path: "/v1/tokens", body: `{"role":"viewer","description":"made in the matrix"}`}
		}},
		{pattern: "GET /v1/tokens", allowed: admins, make: get("/v1/tokens"), ok: 200},
		{pattern: "DELETE /v1/tokens/{id}", allowed: admins, ok: 204, make: func(string) request {
			c := e.cred(api.CreateRequest{Role: api.RoleViewer, Description: "to revoke"})
			return request{method: "DELETE", path: "/v1/tokens/" + c.ID}
		}},
	}

	// Every route of the table is covered here, and nothing else.
	var tested, table []string
	for _, rc := range routes {
		tested = append(tested, rc.pattern)
	}
	for _, r := range admin.Routes() {
		table = append(table, r.Pattern)
	}
	slices.Sort(tested)
	slices.Sort(table)
	if !slices.Equal(tested, table) {
		t.Fatalf("the matrix covers %q\nbut the route table is %q", tested, table)
	}

	for _, rc := range routes {
		targets := []string{""}
		if rc.job {
			targets = []string{scope + "a", "other/b"}
		}
		for _, target := range targets {
			for _, c := range callers {
				name := fmt.Sprintf("%s %s as %s", rc.pattern, target, c.name)
				req := rc.make(target)
				before := e.state()
				code, hdr, body := e.send(req, c.token)
				want := rc.ok
				switch {
				case rc.anyone:
				case c.role == "":
					want = http.StatusUnauthorized
				case !slices.Contains(rc.allowed, c.role):
					want = http.StatusForbidden
				case rc.job && !strings.HasPrefix(target, c.prefix):
					want = http.StatusForbidden
				}
				if code != want {
					t.Errorf("%s: got %d, want %d (%s)", name, code, want, bytes.TrimSpace(body))
					continue
				}
				if code == http.StatusUnauthorized && hdr.Get("WWW-Authenticate") != `Bearer realm="jobfleet"` {
					t.Errorf("%s: 401 with WWW-Authenticate %q", name, hdr.Get("WWW-Authenticate"))
				}
				if code == http.StatusUnauthorized || code == http.StatusForbidden {
					errorMessage(t, body)
					if after := e.state(); after != before {
						t.Errorf("%s: refused, but the state changed:\nbefore %s\nafter %s", name, before, after)
					}
				}
			}
		}
	}
}

func TestAnonymousLearnsNothing(t *testing.T) {
	e := newSecEnv(t, secOptions{})
	e.ensureJob("secret-job")
	for _, r := range []request{
		{method: "GET", path: "/v1/nothing"},
		{method: "DELETE", path: "/nothing"},
		{method: "GET", path: "/v1/cluster/drain"},
		{method: "OPTIONS", path: "/v1/jobs", header: map[string]string{"Origin": "https://evil.example", "Access-Control-Request-Method": "POST"}},
		{method: "GET", path: "/v1//cluster/members"},
		{method: "GET", path: jobPath("secret-job")},
		{method: "GET", path: jobPath("no-such-job")},
	} {
		code, hdr, body := e.send(r, "")
		want := http.StatusUnauthorized
		if r.header["Origin"] != "" {
			want = http.StatusForbidden // the Origin check comes first
		}
		if code != want {
			t.Errorf("anonymous %s %s: got %d, want %d (%s)", r.method, r.path, code, want, body)
			continue
		}
		if msg := errorMessage(t, body); strings.Contains(msg, "secret-job") || strings.Contains(msg, "not found") || strings.Contains(msg, "allowed") {
			t.Errorf("anonymous %s %s: the refusal says %q", r.method, r.path, msg)
		}
		if hdr.Get("Allow") != "" || hdr.Get("Location") != "" || hdr.Get("Access-Control-Allow-Origin") != "" {
			t.Errorf("anonymous %s %s: reply headers %v", r.method, r.path, hdr)
		}
	}
}

// TestScopeDoesNotTellExistence: a scoped caller gets the same reply for
// a job outside its scope whether that job exists or not.
func TestScopeDoesNotTellExistence(t *testing.T) {
	e := newSecEnv(t, secOptions{})
	e.ensureJob("other/exists")
	c := e.cred(api.CreateRequest{Role: api.RoleOperator, Prefix: "team/"})
	for _, sub := range [][]string{nil, {"runs"}} {
		c1, _, b1 := e.send(request{method: "GET", path: jobPath("other/exists", sub...)}, c.Secret)
		c2, _, b2 := e.send(request{method: "GET", path: jobPath("other/missing", sub...)}, c.Secret)
		m1 := strings.ReplaceAll(errorMessage(t, b1), "exists", "X")
		m2 := strings.ReplaceAll(errorMessage(t, b2), "missing", "X")
		if c1 != http.StatusForbidden || c1 != c2 || m1 != m2 {
			t.Errorf("existing: %d %q; missing: %d %q; want the same 403", c1, m1, c2, m2)
		}
	}
	c1, _, _ := e.send(request{method: "GET", path: "/v1/runs/" + url.PathEscape(store.RunID("other/exists", time.Now()))}, c.Secret)
	c2, _, _ := e.send(request{method: "GET", path: "/v1/runs/not-a-run-id"}, c.Secret)
	if c1 != http.StatusForbidden || c2 != http.StatusForbidden {
		t.Errorf("runs outside the scope: %d and %d, want 403", c1, c2)
	}
}

// TestScopedListing: a scoped caller lists only its prefix's jobs, page
// by page, however they are spread over the partitions and whatever
// trigger requests lie between them.
func TestScopedListing(t *testing.T) {
	e := newSecEnv(t, secOptions{})
	var want []string
	for i := range 25 {
		e.ensureJob(fmt.Sprintf("other/%02d", i))
		id := fmt.Sprintf("team/%02d", i)
		want = append(want, id)
		e.ensureJob(id)
		if i%3 == 0 {
			if _, err := e.jobs.Trigger(context.Background(), id); err != nil {
				t.Fatal(err)
			}
		}
	}
	e.ensureJob("team") // shorter than the prefix: outside
	e.ensureJob("teams/x")
	c := e.cred(api.CreateRequest{Role: api.RoleViewer, Prefix: "team/"})
	for _, limit := range []int{1, 3, 7, 100} {
		var got []string
		cursor := ""
		for pages := 0; ; pages++ {
			if pages > 30 {
				t.Fatalf("limit %d: listing does not end", limit)
			}
			code, _, body := e.send(request{method: "GET", path: fmt.Sprintf("/v1/jobs?limit=%d&cursor=%s", limit, url.QueryEscape(cursor))}, c.Secret)
			var page struct {
				Jobs       []api.Job `json:"jobs"`
				NextCursor string    `json:"next_cursor"`
			}
			if code != http.StatusOK || json.Unmarshal(body, &page) != nil {
				t.Fatalf("limit %d: %d %s", limit, code, body)
			}
			if len(page.Jobs) > limit {
				t.Fatalf("limit %d: a page of %d", limit, len(page.Jobs))
			}
			got = append(got, jobIDs(page.Jobs)...)
			if page.NextCursor == "" {
				break
			}
			cursor = page.NextCursor
		}
		slices.Sort(got)
		if !slices.Equal(got, want) {
			t.Errorf("limit %d: listed %q, want %q", limit, got, want)
		}
	}
}

func TestCreateOutsideScope(t *testing.T) {
	e := newSecEnv(t, secOptions{})
	c := e.cred(api.CreateRequest{Role: api.RoleOperator, Prefix: "team/"})
	before := e.state()
	code, _, body := e.send(request{method: "POST", path: "/v1/jobs", body: httpJob("other/x", "")}, c.Secret)
	if code != http.StatusForbidden || !strings.Contains(errorMessage(t, body), `"team/"`) {
		t.Fatalf("create outside the scope: %d %s", code, body)
	}
	// PUT with the body naming another job than the (in-scope) path.
	code, _, body = e.send(request{method: "PUT", path: jobPath("team/x"), body: httpJob("other/x", "")}, c.Secret)
	if code != http.StatusBadRequest {
		t.Fatalf("put with a body naming another job: %d %s", code, body)
	}
	if after := e.state(); after != before {
		t.Fatalf("refused creates changed the state")
	}
}

func TestViewerRedaction(t *testing.T) {
	e := newSecEnv(t, secOptions{})
	e.ensureJob("j")
	viewer := e.cred(api.CreateRequest{Role: api.RoleViewer})
	op := e.cred(api.CreateRequest{Role: api.RoleOperator})
	for _, path := range []string{jobPath("j"), "/v1/jobs"} {
		_, _, vb := e.send(request{method: "GET", path: path}, viewer.Secret)
		if strings.Contains(string(vb), "target-secret") || !strings.Contains(string(vb), `"Authorization": "\u003credacted\u003e"`) {
			t.Errorf("viewer GET %s: %s", path, vb)
		}
		_, _, ob := e.send(request{method: "GET", path: path}, op.Secret)
		if !strings.Contains(string(ob), "target-secret") {
			t.Errorf("operator GET %s does not show the header value: %s", path, ob)
		}
	}
	// Redaction is of the reply only: the stored job keeps its value.
	j, err := e.jobs.Get(context.Background(), "j")
	if err != nil || j.Executor.Headers["Authorization"] != api.Literal("Bearer target-secret") {
		t.Fatalf("stored job: %+v, %v", j.Executor, err)
	}
}

// TestBrowserDefences: bodies other than JSON, requests from another
// origin or site, and Host headers that are not the loopback listener are
// refused, store nothing, and no reply carries CORS headers.
func TestBrowserDefences(t *testing.T) {
	e := newSecEnv(t, secOptions{loopback: true})
	op := e.cred(api.CreateRequest{Role: api.RoleOperator})
	e.ensureJob("j")
	port := e.srv.URL[strings.LastIndex(e.srv.URL, ":")+1:]
	job := httpJob("browser", "")
	tests := []struct {
		name string
		req  request
		want int
	}{
		{"text/plain body", request{method: "POST", path: "/v1/jobs", body: job, header: map[string]string{"Content-Type": "text/plain"}}, 415},
		{"form body", request{method: "POST", path: "/v1/jobs", body: "id=x", header: map[string]string{"Content-Type": "application/x-www-form-urlencoded"}}, 415},
		{"multipart body", request{method: "POST", path: "/v1/jobs", body: job, header: map[string]string{"Content-Type": "multipart/form-data; boundary=x"}}, 415},
		{"JSON with another charset", request{method: "PUT", path: jobPath("j"), body: httpJob("j", ""), header: map[string]string{"Content-Type": "application/json; charset=latin1"}}, 415},
		{"body-less pause as text/plain", request{method: "POST", path: jobPath("j", "pause"), header: map[string]string{"Content-Type": "text/plain"}}, 415},
		{"body-less trigger as a form", request{method: "POST", path: jobPath("j", "trigger"), header: map[string]string{"Content-Type": "application/x-www-form-urlencoded"}}, 415},
		{"foreign Origin", request{method: "POST", path: "/v1/jobs", body: job, header: map[string]string{"Origin": "https://evil.example"}}, 403},
		{"null Origin", request{method: "POST", path: jobPath("j", "trigger"), header: map[string]string{"Origin": "null"}}, 403},
		{"Origin on another port", request{method: "DELETE", path: jobPath("j"), header: map[string]string{"Origin": "http://127.0.0.1:1"}}, 403},
		{"cross-site fetch", request{method: "POST", path: jobPath("j", "pause"), header: map[string]string{"Sec-Fetch-Site": "cross-site"}}, 403},
		{"rebinding Host", request{method: "POST", path: "/v1/jobs", body: job, header: map[string]string{"Host": "evil.example:" + port}}, 403},
		{"rebinding Host without port", request{method: "POST", path: jobPath("j", "trigger"), header: map[string]string{"Host": "evil.example"}}, 403},
		{"loopback Host, other port", request{method: "POST", path: jobPath("j", "trigger"), header: map[string]string{"Host": "127.0.0.1:1"}}, 403},
		{"rebinding Host reading", request{method: "GET", path: jobPath("j"), header: map[string]string{"Host": "evil.example:" + port}}, 403},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := e.state()
			code, hdr, body := e.send(tt.req, op.Secret)
			if code != tt.want {
				t.Fatalf("got %d, want %d (%s)", code, tt.want, body)
			}
			errorMessage(t, body)
			for k := range hdr {
				if strings.HasPrefix(k, "Access-Control-") {
					t.Errorf("reply carries %s", k)
				}
			}
			if after := e.state(); after != before {
				t.Fatalf("refused, but the state changed")
			}
		})
	}
	// What a legitimate client sends passes.
	for _, r := range []request{
		{method: "POST", path: "/v1/jobs", body: job, header: map[string]string{"Content-Type": "application/json; charset=UTF-8"}},
		{method: "POST", path: jobPath("j", "pause")},
		{method: "POST", path: jobPath("j", "resume"), header: map[string]string{"Content-Type": "application/json"}},
		{method: "GET", path: jobPath("j"), header: map[string]string{"Host": "localhost:" + port, "Origin": "http://localhost:" + port}},
		{method: "GET", path: jobPath("j"), header: map[string]string{"Sec-Fetch-Site": "same-origin"}},
	} {
		if code, _, body := e.send(r, op.Secret); code/100 != 2 {
			t.Errorf("%s %s %v: got %d (%s)", r.method, r.path, r.header, code, body)
		}
	}
}

func TestTokenEndpoints(t *testing.T) {
	e := newSecEnv(t, secOptions{})
	adm := e.cred(api.CreateRequest{Role: api.RoleAdmin})
	code, hdr, body := e.send(request{method: "POST", path: "/v1/tokens", body: `{"role":"operator","prefix":"team/","ttl":"24h","description":"team ci"}`}, adm.Secret)
	if code != http.StatusCreated || hdr.Get("Cache-Control") != "no-store" {
		t.Fatalf("create: %d %v %s", code, hdr, body)
	}
	var c api.Created
	if err := json.Unmarshal(body, &c); err != nil {
		t.Fatal(err)
	}
	if c.Role != api.RoleOperator || c.Prefix != "team/" || c.CreatedBy != adm.ID || c.Secret == "" || !c.ExpiresAt.Equal(e.clock.Now().Add(24*time.Hour).Truncate(time.Millisecond)) {
		t.Fatalf("created %+v", c)
	}
	// It works on this member as soon as the reply arrived.
	if code, _, body := e.send(request{method: "GET", path: "/v1/jobs"}, c.Secret); code != http.StatusOK {
		t.Fatalf("new token: %d %s", code, body)
	}
	code, _, body = e.send(request{method: "GET", path: "/v1/tokens"}, adm.Secret)
	if code != http.StatusOK || strings.Contains(string(body), c.Secret[len(c.Secret)-43:]) || strings.Contains(string(body), "sha256") {
		t.Fatalf("list shows a secret or hash: %s", body)
	}
	var list api.TokenList
	if err := json.Unmarshal(body, &list); err != nil || len(list.Tokens) != 2 {
		t.Fatalf("list: %s (%v)", body, err)
	}
	if code, _, _ := e.send(request{method: "DELETE", path: "/v1/tokens/" + c.ID}, adm.Secret); code != http.StatusNoContent {
		t.Fatalf("revoke: %d", code)
	}
	if code, _, _ := e.send(request{method: "GET", path: "/v1/jobs"}, c.Secret); code != http.StatusUnauthorized {
		t.Fatalf("revoked token: %d, want 401 at once", code)
	}
	if code, _, _ := e.send(request{method: "DELETE", path: "/v1/tokens/" + c.ID}, adm.Secret); code != http.StatusNotFound {
		t.Fatalf("revoke twice: %d, want 404", code)
	}
	before := e.state()
	for _, bad := range []struct{ body, field string }{
		{`{"role":"root"}`, "role"},
		{`{"role":"admin","prefix":"x/"}`, "prefix"},
		{`{"role":"viewer","ttl":"forever"}`, "ttl"},
		{`{"role":"viewer","token":"chosen"}`, "unknown field"},
		{`{"role":"viewer"} {"role":"admin"}`, "unexpected data after the document"},
		{`{"role":"viewer","role":"admin"}`, `duplicate key "role"`},
		{`{"role":"viewer","Prefix":"x/"}`, `Prefix: unknown field; did you mean "prefix"?`},
		{``, "empty document"},
	} {
		code, _, body := e.send(request{method: "POST", path: "/v1/tokens", body: bad.body}, adm.Secret)
		if code != http.StatusBadRequest || !strings.Contains(errorMessage(t, body), bad.field) {
			t.Errorf("create %s: %d %s, want 400 naming %s", bad.body, code, body, bad.field)
		}
	}
	if after := e.state(); after != before {
		t.Fatal("refused credential requests changed the state")
	}
}

func TestAuditAndRequestMetrics(t *testing.T) {
	e := newSecEnv(t, secOptions{})
	op := e.cred(api.CreateRequest{Role: api.RoleOperator, Prefix: "team/"})
	e.send(request{method: "GET", path: "/v1/jobs"}, op.Secret)
	e.send(request{method: "POST", path: "/v1/jobs", body: httpJob("team/audited", "")}, op.Secret)
	e.send(request{method: "DELETE", path: jobPath("other/x")}, op.Secret)
	e.send(request{method: "POST", path: "/v1/cluster/drain"}, "")
	e.send(request{method: "POST", path: "/v1/jobs:batch", body: `{"jobs": [` + httpJob("team/b1", "") + `, ` + httpJob("team/b2", "") + `]}`}, op.Secret)

	lines := e.logs.FilterLoggerName("audit").AllUntimed()
	if len(lines) != 4 {
		t.Fatalf("got %d audit lines, want 4 (the GET is not audited): %v", len(lines), lines)
	}
	want := []map[string]any{
		{"credential": op.ID, "role": "operator", "method": "POST", "route": "POST /v1/jobs", "job_id": "team/audited", "status": int64(201)},
		{"credential": op.ID, "role": "operator", "method": "DELETE", "route": "DELETE /v1/jobs/{id}", "job_id": "other/x", "status": int64(403)},
		{"credential": "", "role": "", "method": "POST", "route": "POST /v1/cluster/drain", "job_id": "", "status": int64(401)},
		{"credential": op.ID, "role": "operator", "method": "POST", "route": "POST /v1/jobs:batch", "job_id": "2 jobs: team/b1, team/b2", "status": int64(200)},
	}
	for i, l := range lines {
		fields := l.ContextMap()
		for k, v := range want[i] {
			if fields[k] != v {
				t.Errorf("audit line %d: %s = %v, want %v (%v)", i, k, fields[k], v, fields)
			}
		}
		if fields["remote"] == "" {
			t.Errorf("audit line %d has no remote address", i)
		}
	}
	for _, tt := range []struct {
		route, code string
		want        float64
	}{
		{"POST /v1/jobs", "201", 1},
		{"DELETE /v1/jobs/{id}", "403", 1},
		{"GET /v1/jobs", "200", 1},
		{"POST /v1/cluster/drain", "401", 1},
	} {
		got := testutil.ToFloat64(counter(t, e.reg, tt.route, tt.code))
		if got != tt.want {
			t.Errorf("jobfleet_api_requests_total{route=%q,code=%q} = %v, want %v", tt.route, tt.code, got, tt.want)
		}
	}
	// The raw path never becomes a label.
	mfs, _ := e.reg.Gather()
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if strings.Contains(l.GetValue(), "other/x") || strings.Contains(l.GetValue(), "audited") {
					t.Errorf("metric %s has label %s=%q", mf.GetName(), l.GetName(), l.GetValue())
				}
			}
		}
	}
}

func counter(t *testing.T, reg *prometheus.Registry, route, code string) prometheus.Collector {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "jobfleet_api_requests_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			if labels["route"] == route && labels["code"] == code {
				c := prometheus.NewCounter(prometheus.CounterOpts{Name: "x"})
				c.Add(m.GetCounter().GetValue())
				return c
			}
		}
	}
	return prometheus.NewCounter(prometheus.CounterOpts{Name: "x"})
}

func TestRateLimit(t *testing.T) {
	e := newSecEnv(t, secOptions{limits: admin.Limits{Rate: 1, Burst: 2}})
	v := e.cred(api.CreateRequest{Role: api.RoleViewer})
	other := e.cred(api.CreateRequest{Role: api.RoleViewer})
	w := e.cred(api.CreateRequest{Role: api.RoleWorker})
	get := request{method: "GET", path: "/v1/cluster/members"}
	for i := range 2 {
		if code, _, _ := e.send(get, v.Secret); code != http.StatusOK {
			t.Fatalf("request %d within the burst: %d", i+1, code)
		}
	}
	code, hdr, body := e.send(get, v.Secret)
	if code != http.StatusTooManyRequests || hdr.Get("Retry-After") != "1" {
		t.Fatalf("over the limit: %d, Retry-After %q (%s)", code, hdr.Get("Retry-After"), body)
	}
	if code, _, _ := e.send(get, other.Secret); code != http.StatusOK {
		t.Fatalf("another credential is limited too: %d", code)
	}
	// The worker protocol is not rate limited.
	for i := range 5 {
		if code, _, body := e.send(request{method: "POST", path: api.PathHeartbeat, body: `{"worker":"w","run_id":"` + store.RunID("a", time.Now()) + `","attempt":1}`}, w.Secret); code != http.StatusOK {
			t.Fatalf("heartbeat %d: %d %s", i, code, body)
		}
	}
	e.clock.Advance(time.Second)
	if code, _, _ := e.send(get, v.Secret); code != http.StatusOK {
		t.Fatalf("a second later: %d", code)
	}
}

func TestPollCaps(t *testing.T) {
	e := newSecEnv(t, secOptions{limits: admin.Limits{Rate: -1, MaxPolls: 5, MaxPollsPerCredential: 3}, block: true})
	rogue := e.cred(api.CreateRequest{Role: api.RoleWorker})
	real := e.cred(api.CreateRequest{Role: api.RoleWorker, Prefix: "team/"})
	third := e.cred(api.CreateRequest{Role: api.RoleWorker})
	poll := request{method: "POST", path: api.PathPoll, body: `{"worker":"w","executors":["http"],"max":1,"wait":"30s"}`}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel()
	hold := func(tok string) {
		req, _ := http.NewRequestWithContext(ctx, "POST", e.srv.URL+poll.path, strings.NewReader(poll.body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Authorization", "Bearer "+tok)
		wg.Go(func() {
			if resp, err := e.srv.Client().Do(req); err == nil {
				resp.Body.Close()
			}
		})
	}
	waitCalls := func(n int) {
		t.Helper()
		deadline := time.Now().Add(5 * time.Second)
		for e.proto.count() < n {
			if time.Now().After(deadline) {
				t.Fatalf("%d polls held, want %d", e.proto.count(), n)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	for range 3 {
		hold(rogue.Secret)
	}
	waitCalls(3)
	code, hdr, body := e.send(poll, rogue.Secret)
	if code != http.StatusTooManyRequests || hdr.Get("Retry-After") == "" || !strings.Contains(errorMessage(t, body), "per credential") {
		t.Fatalf("poll over the per-credential cap: %d %v %s", code, hdr, body)
	}
	// Another credential still gets through, until the total cap.
	hold(real.Secret)
	hold(real.Secret)
	waitCalls(5)
	code, _, body = e.send(poll, third.Secret)
	if code != http.StatusTooManyRequests || !strings.Contains(errorMessage(t, body), "on this member") {
		t.Fatalf("poll over the total cap: %d %s", code, body)
	}
	if n := e.proto.count(); n != 5 {
		t.Fatalf("refused polls reached the dispatcher: %d calls", n)
	}
	// The real worker's polls carried its credential and scope.
	e.proto.mu.Lock()
	var scoped int
	for _, c := range e.proto.calls {
		if p, ok := c.(api.PollRequest); ok && p.Credential == real.ID && p.Prefix == "team/" {
			scoped++
		}
	}
	e.proto.mu.Unlock()
	if scoped != 2 {
		t.Fatalf("%d polls carried the scoped worker's credential and prefix, want 2", scoped)
	}
}

// TestClientCertificate: a verified client certificate's CommonName
// names the credential; a bearer token must then name the same one.
func TestClientCertificate(t *testing.T) {
	e := newSecEnv(t, secOptions{})
	op := e.cred(api.CreateRequest{Role: api.RoleOperator})
	viewer := e.cred(api.CreateRequest{Role: api.RoleViewer})
	withCert := func(cn, tok string) int {
		r := httptest.NewRequest("POST", jobPath("x", "pause"), nil)
		r.TLS = &tls.ConnectionState{VerifiedChains: [][]*x509.Certificate{{{Subject: pkix.Name{CommonName: cn}}}}}
		if tok != "" {
			r.Header.Set("Authorization", "Bearer "+tok)
		}
		rec := httptest.NewRecorder()
		e.h.ServeHTTP(rec, r)
		return rec.Code
	}
	if code := withCert(op.ID, ""); code != http.StatusNotFound { // authorized; the job does not exist
		t.Errorf("operator certificate: %d, want 404", code)
	}
	if code := withCert(viewer.ID, ""); code != http.StatusForbidden {
		t.Errorf("viewer certificate: %d, want 403", code)
	}
	if code := withCert(op.ID, op.Secret); code != http.StatusNotFound {
		t.Errorf("certificate and its token: %d, want 404", code)
	}
	if code := withCert(viewer.ID, op.Secret); code != http.StatusUnauthorized {
		t.Errorf("certificate and another credential's token: %d, want 401", code)
	}
	if code := withCert("", op.Secret); code != http.StatusUnauthorized {
		t.Errorf("certificate without CommonName: %d, want 401", code)
	}
	if code := withCert("nobody", ""); code != http.StatusUnauthorized {
		t.Errorf("certificate of no credential: %d, want 401", code)
	}
}

func TestInsecureAndUnconfigured(t *testing.T) {
	insecure := newSecEnv(t, secOptions{insecure: true, loopback: true})
	if code, _, body := insecure.send(request{method: "POST", path: "/v1/jobs", body: httpJob("x", "")}, ""); code != http.StatusCreated {
		t.Fatalf("insecure create: %d %s", code, body)
	}
	// The browser defences stay.
	if code, _, _ := insecure.send(request{method: "POST", path: "/v1/jobs", body: httpJob("y", ""), header: map[string]string{"Content-Type": "text/plain"}}, ""); code != http.StatusUnsupportedMediaType {
		t.Fatalf("insecure text/plain: %d", code)
	}
	if code, _, _ := insecure.send(request{method: "POST", path: "/v1/cluster/drain", header: map[string]string{"Origin": "https://evil.example"}}, ""); code != http.StatusForbidden {
		t.Fatalf("insecure foreign origin: %d", code)
	}
	if n := insecure.member.drains.Load(); n != 0 {
		t.Fatalf("drained %d times", n)
	}
	// No credential can be minted, listed or revoked anonymously: one made
	// here would be accepted by every member of the fleet.
	before, err := insecure.tokens.List(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, rq := range []request{
		{method: "POST", path: "/v1/tokens", body: `{"name":"backdoor","role":"admin"}`},
		{method: "GET", path: "/v1/tokens"},
		{method: "DELETE", path: "/v1/tokens/0123456789ab"},
	} {
		code, _, body := insecure.send(rq, "")
		if code != http.StatusForbidden || !strings.Contains(string(body), "--insecure-no-auth") {
			t.Errorf("insecure %s %s: %d %s, want 403 naming --insecure-no-auth", rq.method, rq.path, code, body)
		}
	}
	if after, err := insecure.tokens.List(context.Background()); err != nil || len(after) != len(before) {
		t.Errorf("credentials %d before, %d after (%v); want unchanged", len(before), len(after), err)
	}

	none := newSecEnv(t, secOptions{noAuth: true})
	if code, _, _ := none.send(request{method: "GET", path: "/v1/jobs"}, "anything"); code != http.StatusServiceUnavailable {
		t.Fatalf("no authenticator: %d, want 503", code)
	}
	if code, _, _ := none.send(request{method: "GET", path: "/healthz"}, ""); code != http.StatusOK {
		t.Fatalf("no authenticator, healthz: %d", code)
	}
}

// TestAnonymousRefusalsAuditedOncePerHost floods the API with requests
// without a credential: one audit line per remote host and minute reaches
// info level, the rest go to debug, and the metric counts them all.
func TestAnonymousRefusalsAuditedOncePerHost(t *testing.T) {
	e := newSecEnv(t, secOptions{})
	const n = 200
	for range n {
		if code, _, _ := e.send(request{method: "POST", path: "/v1/cluster/drain"}, ""); code != http.StatusUnauthorized {
			t.Fatalf("anonymous drain: %d, want 401", code)
		}
	}
	info := func() int {
		return e.logs.FilterLoggerName("audit").Filter(func(l observer.LoggedEntry) bool { return l.Level >= zap.InfoLevel }).Len()
	}
	if got, all := info(), e.logs.FilterLoggerName("audit").Len(); got != 1 || all != n {
		t.Fatalf("%d audit lines at info and %d in all for %d anonymous requests, want 1 and %d", got, all, n, n)
	}
	// A wrong credential is refused the same way, from the same host.
	e.send(request{method: "POST", path: "/v1/cluster/drain"}, "not-a-token")
	if got := info(); got != 1 {
		t.Fatalf("%d audit lines at info after a wrong token, want still 1", got)
	}
	e.clock.Advance(time.Minute)
	e.send(request{method: "POST", path: "/v1/cluster/drain"}, "")
	if got := info(); got != 2 {
		t.Fatalf("%d audit lines at info a minute later, want 2", got)
	}
	if got := testutil.ToFloat64(counter(t, e.reg, "POST /v1/cluster/drain", "401")); got != n+2 {
		t.Errorf("requests counted %v, want %d", got, n+2)
	}
}

// TestTokenCapPagesAndExpiry checks the bounds of the credential routes:
// a creator holding its cap of credentials is refused with 409 and
// nothing is written; GET /v1/tokens is paged by cursor; and an expired
// credential is removed from etcd by the member that lists it.
func TestTokenCapPagesAndExpiry(t *testing.T) {
	e := newSecEnv(t, secOptions{tokens: auth.StoreConfig{MaxPerCreator: 3}})
	adm := e.cred(api.CreateRequest{Role: api.RoleAdmin})
	var made []string
	for i := range 3 {
		ttl := ""
		if i == 0 {
			ttl = `,"ttl":"1h"`
		}
		code, _, body := e.send(request{method: "POST", path: "/v1/tokens", body: `{"role":"viewer"` + ttl + `}`}, adm.Secret)
		if code != http.StatusCreated {
			t.Fatalf("create %d: %d %s", i, code, body)
		}
		var c api.Created
		if err := json.Unmarshal(body, &c); err != nil {
			t.Fatal(err)
		}
		made = append(made, c.ID)
	}
	before := e.state()
	code, _, body := e.send(request{method: "POST", path: "/v1/tokens", body: `{"role":"viewer"}`}, adm.Secret)
	if code != http.StatusConflict || !strings.Contains(errorMessage(t, body), "too many credentials: credential "+adm.ID+" has made 3 unexpired credentials") {
		t.Fatalf("create over the cap: %d %s, want 409", code, body)
	}
	if e.state() != before {
		t.Fatal("a refused create changed the state")
	}

	// Pages of 2, in ID order, covering every credential once.
	var all []string
	cursor := ""
	for pages := 0; ; pages++ {
		if pages > 5 {
			t.Fatal("the pages do not end")
		}
		path := "/v1/tokens?limit=2"
		if cursor != "" {
			path += "&cursor=" + cursor
		}
		code, _, body := e.send(request{method: "GET", path: path}, adm.Secret)
		var page api.TokenList
		if err := json.Unmarshal(body, &page); code != http.StatusOK || err != nil || len(page.Tokens) > 2 {
			t.Fatalf("GET %s: %d %s", path, code, body)
		}
		for _, tok := range page.Tokens {
			all = append(all, tok.ID)
		}
		if page.NextCursor == "" {
			break
		}
		cursor = page.NextCursor
	}
	want := append([]string{adm.ID}, made...)
	slices.Sort(want)
	if !slices.Equal(all, want) {
		t.Fatalf("pages list %v, want %v", all, want)
	}
	for _, bad := range []string{"/v1/tokens?limit=0", "/v1/tokens?limit=1001", "/v1/tokens?cursor=NOT%20AN%20ID"} {
		if code, _, body := e.send(request{method: "GET", path: bad}, adm.Secret); code != http.StatusBadRequest {
			t.Errorf("GET %s: %d %s, want 400", bad, code, body)
		}
	}

	// The credential with a TTL expires: listing removes it from etcd,
	// and its creator may make another.
	e.clock.Advance(2 * time.Hour)
	code, _, body = e.send(request{method: "GET", path: "/v1/tokens"}, adm.Secret)
	if code != http.StatusOK || strings.Contains(string(body), made[0]) {
		t.Fatalf("list after expiry: %d %s, want %s left out", code, body, made[0])
	}
	resp, err := e.client.Get(context.Background(), auth.TokensPrefix(e.ns)+made[0])
	if err != nil || len(resp.Kvs) != 0 {
		t.Fatalf("expired credential %s still in etcd (%v)", made[0], err)
	}
	if code, _, body := e.send(request{method: "POST", path: "/v1/tokens", body: `{"role":"viewer"}`}, adm.Secret); code != http.StatusCreated {
		t.Fatalf("create after an expiry freed a place: %d %s", code, body)
	}
}

// TestReportsOutsideScopeTellNothing: a worker credential limited to a
// prefix that reports on a run of a job outside it gets the same 403 for
// every such run, before the member looks the run up, so the reports
// cannot tell another team's running runs from runs that do not exist;
// within its prefix the report reaches the member.
func TestReportsOutsideScopeTellNothing(t *testing.T) {
	e := newSecEnv(t, secOptions{limits: admin.Limits{Rate: -1}})
	w := e.cred(api.CreateRequest{Role: api.RoleWorker, Prefix: "team/"})
	at := time.Date(2026, 1, 2, 3, 4, 0, 0, time.UTC)
	report := func(path, runID string) (int, string) {
		t.Helper()
		extra := ""
		if path == api.PathComplete {
			extra = `,"success":true`
		}
		code, _, body := e.send(request{method: "POST", path: path, body: `{"worker":"w","run_id":"` + runID + `","attempt":1` + extra + `}`}, w.Secret)
		return code, string(body)
	}
	for _, path := range []string{api.PathHeartbeat, api.PathComplete} {
		before := e.proto.count()
		var first string
		for i, runID := range []string{store.RunID("other/running", at), store.RunID("other/never-existed", at), store.RunID("teamx", at)} {
			code, body := report(path, runID)
			if code != http.StatusForbidden {
				t.Fatalf("%s of %s: %d %s, want 403", path, runID, code, body)
			}
			if i == 0 {
				first = body
			} else if body != first {
				t.Fatalf("%s: the refusals differ: %q and %q", path, first, body)
			}
		}
		if n := e.proto.count(); n != before {
			t.Fatalf("%s: %d reports outside the prefix reached the member", path, n-before)
		}
		if code, body := report(path, store.RunID("team/nightly", at)); code != http.StatusOK {
			t.Fatalf("%s within the prefix: %d %s, want 200", path, code, body)
		}
		if n := e.proto.count(); n != before+1 {
			t.Fatalf("%s within the prefix: %d reports reached the member, want 1", path, n-before)
		}
	}
}
