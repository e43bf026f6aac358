package worker_test

import (
	"context"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"

	"github.com/jobfleet/jobfleet/api"
	"github.com/jobfleet/jobfleet/dispatch/worker"
)

// TestReportingKeepsTheAttemptAlive: while a worker retries the report of a
// finished attempt (the orchestrator answers 503: etcd unavailable, say),
// it keeps heartbeating, so that the attempt's lease does not expire and
// the run is not executed again although it succeeded. Found by the chaos
// suite (internal/chaos): during an etcd restart a successful attempt's
// report was delayed past the run lease, and the run ran twice.
func TestReportingKeepsTheAttemptAlive(t *testing.T) {
	clock := clockwork.NewFakeClock()
	f := newFakeOrch(t, "a", clock)
	var failing atomic.Bool
	failing.Store(true)
	f.onComplete = func(api.CompleteRequest) (int, any) {
		if failing.Load() {
			return http.StatusServiceUnavailable, errorDoc("etcd unreachable")
		}
		return 0, nil
	}
	done := make(chan struct{})
	startWorker(t, worker.Config{Orchestrators: worker.StaticOrchestrators(f.URL()), Concurrency: 1, Clock: clock,
		RetryInitial: time.Second, RetryMax: 2 * time.Second},
		func(w *worker.Worker) {
			mustHandle(t, w, "ok", func(context.Context, worker.Run) error { close(done); return nil })
		})
	f.enqueue(f.assignment("r1", handlerExec("ok"), "")) // lease 30s: a heartbeat every 10s
	recv(t, done, "execution")
	f.waitFor(t, "first report", func() bool { return len(f.completeReq) > 0 })
	// 45s of refused reports: longer than the lease.
	for range 90 {
		clock.Advance(500 * time.Millisecond)
		time.Sleep(5 * time.Millisecond)
	}
	if _, hbs, _, _ := f.snapshot(); len(hbs) < 3 {
		t.Errorf("%d heartbeats while the report was refused for 45s, want at least 3 (one every 10s)", len(hbs))
	}
	failing.Store(false)
	var accepted bool
	for range 40 {
		clock.Advance(500 * time.Millisecond)
		time.Sleep(5 * time.Millisecond)
		if _, _, done, _ := f.snapshot(); len(done) > 0 {
			accepted = true
			break
		}
	}
	if !accepted {
		t.Fatal("the report was not accepted once the orchestrator could record it (the attempt's lease expired meanwhile)")
	}
}
