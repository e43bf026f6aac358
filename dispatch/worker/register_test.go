package worker_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/jobfleet/jobfleet/api"
	"github.com/jobfleet/jobfleet/dispatch/worker"
)

// registrarOrch is an orchestrator that answers registrations with
// status (and an empty poll), recording what it got.
type registrarOrch struct {
	srv    *httptest.Server
	status int
	mu     sync.Mutex
	regs   []api.RegisterRequest
	deregs []api.DeregisterRequest
}

func newRegistrarOrch(t *testing.T, status int) *registrarOrch {
	o := &registrarOrch{status: status}
	mux := http.NewServeMux()
	mux.HandleFunc("POST "+api.PathRegister, func(w http.ResponseWriter, r *http.Request) {
		var req api.RegisterRequest
		_ = json.NewDecoder(r.Body).Decode(&req)
		o.mu.Lock()
		o.regs = append(o.regs, req)
		o.mu.Unlock()
		if o.status != http.StatusOK {
			writeJSON(w, o.status, errorDoc("etcd does not answer"))
			return
		}
		writeJSON(w, http.StatusOK, api.RegisterResponse{TTL: api.Duration(6 * time.Second), Orchestrator: "b"})
	})
	mux.HandleFunc("POST "+api.PathDeregister, func(w http.ResponseWriter, r *http.Request) {
		var req api.DeregisterRequest
		_ = json.NewDecoder(r.Body).Decode(&req)
		o.mu.Lock()
		o.deregs = append(o.deregs, req)
		o.mu.Unlock()
		writeJSON(w, http.StatusOK, struct{}{})
	})
	mux.HandleFunc("POST "+api.PathPoll, func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
		case <-time.After(100 * time.Millisecond):
		}
		writeJSON(w, http.StatusOK, api.PollResponse{Attempts: []api.AttemptGrant{}})
	})
	o.srv = httptest.NewServer(mux)
	t.Cleanup(o.srv.Close)
	return o
}

func (o *registrarOrch) counts() (regs, deregs int, last api.RegisterRequest) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if len(o.regs) > 0 {
		last = o.regs[len(o.regs)-1]
	}
	return len(o.regs), len(o.deregs), last
}

// TestWorkerRegistersWithAnOrchestratorThatAnswers: a worker whose first
// orchestrator fails its registration registers with the other one, says
// what it runs, and deregisters there when it stops.
func TestWorkerRegistersWithAnOrchestratorThatAnswers(t *testing.T) {
	down, up := newRegistrarOrch(t, http.StatusServiceUnavailable), newRegistrarOrch(t, http.StatusOK)
	tw := startWorker(t, worker.Config{ID: "w-reg", Orchestrators: worker.StaticOrchestrators(down.srv.URL, up.srv.URL), Concurrency: 3, AllowShell: true,
		PollWait: 100 * time.Millisecond, RetryInitial: 10 * time.Millisecond, RetryMax: 50 * time.Millisecond}, nil)
	deadline := time.Now().Add(waitTimeout)
	for {
		if n, _, _ := up.counts(); n > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the worker did not register with the orchestrator that answers")
		}
		time.Sleep(10 * time.Millisecond)
	}
	_, _, req := up.counts()
	if req.Worker != "w-reg" || req.Concurrency != 3 || len(req.Executors) != 2 || req.Executors[1] != api.ExecutorShell || len(req.Orchestrators) != 2 {
		t.Fatalf("registration %+v", req)
	}
	tw.cancel()
	if err := tw.result(); err != nil {
		t.Fatal(err)
	}
	if _, deregs, _ := up.counts(); deregs != 1 {
		t.Fatalf("%d deregistrations at the registrar, want 1", deregs)
	}
	if _, deregs, _ := down.counts(); deregs != 0 {
		t.Fatalf("%d deregistrations at the failing orchestrator, want 0", deregs)
	}
}
