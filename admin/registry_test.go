package admin_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jobfleet/jobfleet/api"

	"github.com/prometheus/client_golang/prometheus"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/jobfleet/jobfleet/admin"
	"github.com/jobfleet/jobfleet/dispatch"
	"github.com/jobfleet/jobfleet/dispatch/worker"
	"github.com/jobfleet/jobfleet/dispatch/workers"
	"github.com/jobfleet/jobfleet/internal/testkit/admintest"
	"github.com/jobfleet/jobfleet/internal/testkit/etcdtest"
	"github.com/jobfleet/jobfleet/store"
)

// scriptedRegistry answers every registration with err.
type scriptedRegistry struct{ err error }

func (s scriptedRegistry) Register(context.Context, api.RegisterRequest) (api.RegisterResponse, error) {
	return api.RegisterResponse{}, s.err
}
func (s scriptedRegistry) Deregister(context.Context, api.DeregisterRequest) error { return s.err }
func (s scriptedRegistry) Workers() ([]api.Worker, error)                          { return nil, s.err }
func (s scriptedRegistry) WhyPending(string, string, string, string) string        { return "" }

// TestRegisterReplies: the registry's refusals reach the worker with their
// status code, a message saying what happened, and Retry-After for a
// rate; never a 200 when the store refused the write.
func TestRegisterReplies(t *testing.T) {
	for _, tt := range []struct {
		name       string
		err        error
		code       int
		msg        string
		retryAfter string
	}{
		{"bad request", fmt.Errorf("%w: executors: must list 1 to 64 executor types, got 1000", dispatch.ErrBadRequest), 400, "executors: must list 1 to 64", ""},
		{"ID held", fmt.Errorf("%w: \"w1\" is registered with another credential", workers.ErrIDTaken), 409, `worker ID held by another credential: "w1" is registered with another credential`, ""},
		{"rate", &workers.RateError{What: "writes", Rate: 10, Burst: 64, RetryAfter: 1500 * time.Millisecond}, 429, "new or changed registrations", "2"},
		{"too many", fmt.Errorf("%w: credential \"c\" has 1024 live workers", workers.ErrTooManyWorkers), 429, "1024 live workers", ""},
		{"etcd full", store.Classify(rpctypes.ErrGRPCNoSpace), 507, "store full: etcd database space exceeded; writes resume once an operator frees space", ""},
		{"high water", fmt.Errorf("%w: etcd's database is 7 MiB, above the high-water mark", store.ErrHighWater), 507, "above the high-water mark", ""},
		{"etcd without leader", store.Classify(rpctypes.ErrGRPCNoLeader), 503, "store unavailable: etcd did not answer in time or has no leader; retry later", ""},
		{"not loaded", workers.ErrNotLoaded, 503, "not loaded yet", ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			srv := httptest.NewServer(admin.Handler(admintest.Member{Auth: testAuth, Registry: scriptedRegistry{tt.err}}, admin.Config{Gatherer: prometheus.NewRegistry()}))
			defer srv.Close()
			code, msg, h := postRegister(t, srv.URL, adminToken, `{"worker":"w1","executors":["http"],"concurrency":1}`)
			if code != tt.code || !strings.Contains(msg, tt.msg) {
				t.Fatalf("got %d %q, want %d with %q", code, msg, tt.code, tt.msg)
			}
			if got := h.Get("Retry-After"); got != tt.retryAfter {
				t.Errorf("Retry-After %q, want %q", got, tt.retryAfter)
			}
		})
	}
}

func postRegister(t *testing.T, base, token, body string) (int, string, http.Header) {
	t.Helper()
	req, err := http.NewRequest("POST", base+api.PathRegister, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var e struct{ Error string }
	_ = json.NewDecoder(resp.Body).Decode(&e)
	return resp.StatusCode, e.Error, resp.Header
}

// idChecking is the worker protocol as the dispatcher serves it to a
// worker whose ID is bound elsewhere: polls are checked against the
// registry, and find nothing.
type idChecking struct{ reg *workers.Registry }

func (p idChecking) Poll(_ context.Context, req api.PollRequest) (api.PollResponse, error) {
	if err := p.reg.CheckID(req.Worker, req.Credential); err != nil {
		return api.PollResponse{}, err
	}
	return api.PollResponse{Attempts: []api.AttemptGrant{}}, nil
}
func (idChecking) Heartbeat(context.Context, api.HeartbeatRequest) (api.HeartbeatResponse, error) {
	return api.HeartbeatResponse{}, dispatch.ErrStaleAttempt
}
func (idChecking) Complete(context.Context, api.CompleteRequest) (api.CompleteResponse, error) {
	return api.CompleteResponse{}, dispatch.ErrStaleAttempt
}
func (p idChecking) EndPolls(_ context.Context, req api.EndPollsRequest) error {
	return p.reg.CheckID(req.Worker, req.Credential)
}

// TestWorkerLockedOutOfItsIDIsToldWhy: another credential holds a
// worker's ID (it took it once the grace after the worker's registration
// had passed). The worker, with a valid credential, is told that the ID
// is held by another credential, at registration and at polls: nothing
// it logs says its token is wrong.
func TestWorkerLockedOutOfItsIDIsToldWhy(t *testing.T) {
	client := etcd.Client(t)
	reg, err := workers.New(client, workers.Config{Namespace: etcdtest.Namespace(t), Member: "m1", Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() { reg.Run(ctx) })
	defer func() { cancel(); wg.Wait() }()
	tokens := staticAuth{
		"tok-real":  {ID: "team-worker", Role: api.RoleWorker},
		"tok-other": {ID: "other-worker", Role: api.RoleWorker, Prefix: "other/"},
	}
	auditCore, audit := observer.New(zap.InfoLevel)
	srv := httptest.NewServer(admin.Handler(admintest.Member{Auth: tokens, Registry: reg, Protocol: idChecking{reg}}, admin.Config{
		Gatherer: prometheus.NewRegistry(), Logger: zap.New(auditCore),
	}))
	defer srv.Close()

	if code, msg, _ := postRegister(t, srv.URL, "tok-other", `{"worker":"billing-1","executors":["http"],"concurrency":1}`); code != http.StatusOK {
		t.Fatalf("the other credential registering billing-1: %d %q", code, msg)
	}
	for deadline := time.Now().Add(10 * time.Second); reg.CheckID("billing-1", "team-worker") == nil; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the registry does not show billing-1 bound")
		}
	}

	core, logs := observer.New(zap.InfoLevel)
	w, err := worker.New(worker.Config{ID: "billing-1", Orchestrators: worker.StaticOrchestrators(srv.URL), ServeHTTP: true, Token: "tok-real",
		PollWait: time.Second, RetryInitial: 50 * time.Millisecond, RetryMax: 500 * time.Millisecond, Logger: zap.New(core)})
	if err != nil {
		t.Fatal(err)
	}
	wctx, stop := context.WithCancel(context.Background())
	var wwg sync.WaitGroup
	wwg.Go(func() { _ = w.Run(wctx) })
	held := func(e observer.LoggedEntry) bool {
		for _, f := range e.Context {
			if f.Key == "error" && strings.Contains(fmt.Sprint(f.Interface), `status 409: worker ID held by another credential: "billing-1" is`) {
				return true
			}
		}
		return false
	}
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		registering := logs.FilterMessageSnippet("registering the worker failed").Filter(held).Len()
		polling := logs.FilterMessageSnippet("poll failed").Filter(held).Len()
		if registering > 0 && polling > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no log line says the ID is held (registering %d, polling %d): %v", registering, polling, logs.All())
		}
	}
	stop()
	wwg.Wait()
	for _, e := range logs.All() {
		if strings.Contains(e.Message, "token") || strings.Contains(e.Message, "refused the worker's credentials") {
			t.Errorf("the worker logged %q %v: its credentials are fine", e.Message, e.Context)
		}
	}
	// The orchestrator's audit log shows each refused registration (the
	// accepted ones are at debug level).
	refused := audit.FilterMessage("request").FilterField(zap.String("route", "POST "+api.PathRegister)).FilterField(zap.Int("status", http.StatusConflict))
	if refused.FilterField(zap.String("credential", "team-worker")).Len() == 0 {
		t.Errorf("no audit line at info for the refused registrations: %v", audit.All())
	}
	if err := reg.CheckID("billing-1", "other-worker"); err != nil {
		t.Errorf("the ID's holder lost it: %v", err)
	}
}
