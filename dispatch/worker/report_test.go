package worker_test

import (
	"context"
	"net/http"
	"slices"
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

// TestSlotServesTheNextAttemptWhileAResultIsReported: a worker of one
// slot takes its next attempt while the result of the one before is on
// its way, holding a report place instead of the slot; with its one
// report place taken, the next finished attempt keeps the slot while it
// reports, so no third attempt starts until a report is answered.
func TestSlotServesTheNextAttemptWhileAResultIsReported(t *testing.T) {
	f := newFakeOrch(t, "a", clockwork.NewRealClock())
	// A held report is answered 503 (etcd unavailable, say), and retried,
	// until it is let through.
	var holdR1, holdR2 atomic.Bool
	holdR1.Store(true)
	holdR2.Store(true)
	f.onComplete = func(req api.CompleteRequest) (int, any) {
		if (req.RunID == "r1" && holdR1.Load()) || (req.RunID == "r2" && holdR2.Load()) {
			return http.StatusServiceUnavailable, errorDoc("held")
		}
		return 0, nil
	}
	started := make(chan string, 3)
	startWorker(t, worker.Config{Orchestrators: worker.StaticOrchestrators(f.URL()), Concurrency: 1,
		RetryInitial: 10 * time.Millisecond, RetryMax: 20 * time.Millisecond},
		func(w *worker.Worker) {
			mustHandle(t, w, "ok", func(_ context.Context, r worker.Run) error { started <- r.RunID; return nil })
		})
	f.enqueue(f.assignment("r1", handlerExec("ok"), ""), f.assignment("r2", handlerExec("ok"), ""), f.assignment("r3", handlerExec("ok"), ""))
	reported := func(runID string) func() bool {
		return func() bool {
			return slices.ContainsFunc(f.completeReq, func(c api.CompleteRequest) bool { return c.RunID == runID })
		}
	}
	if got := recv(t, started, "the first execution"); got != "r1" {
		t.Fatalf("first execution %s, want r1", got)
	}
	f.waitFor(t, "r1's report", reported("r1"))
	if got := recv(t, started, "the second execution, while r1's result is reported"); got != "r2" {
		t.Fatalf("second execution %s, want r2", got)
	}
	f.waitFor(t, "r2's report", reported("r2"))
	select {
	case got := <-started:
		t.Fatalf("%s started while two results were reported by a worker of one slot and one report place", got)
	case <-time.After(300 * time.Millisecond):
	}
	holdR1.Store(false) // r2 still holds the slot while it reports
	f.waitFor(t, "r1's result accepted", func() bool {
		return slices.ContainsFunc(f.completes, func(c api.CompleteRequest) bool { return c.RunID == "r1" })
	})
	select {
	case got := <-started:
		t.Fatalf("%s started while r2, holding the one slot, was reported", got)
	case <-time.After(300 * time.Millisecond):
	}
	holdR2.Store(false)
	if got := recv(t, started, "the third execution"); got != "r3" {
		t.Fatalf("third execution %s, want r3", got)
	}
}
