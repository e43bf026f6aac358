package worker_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"

	"github.com/jobfleet/jobfleet/api"
	"github.com/jobfleet/jobfleet/dispatch/worker"
)

// TestHangingHeartbeatStopsAttemptHoldingSlotsAtItsLease: an attempt
// holding slots of limit keys stops once a run lease passed since the
// last heartbeat that succeeded was sent, even while a heartbeat hangs
// (a cut that drops packets) with a request timeout far longer than the
// lease: its owner may give the slots away from then on.
func TestHangingHeartbeatStopsAttemptHoldingSlotsAtItsLease(t *testing.T) {
	hung := make(chan struct{}, 16)
	release := make(chan struct{})
	owner := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hung <- struct{}{}
		select {
		case <-r.Context().Done():
		case <-release:
			w.WriteHeader(http.StatusConflict)
		}
	}))
	t.Cleanup(owner.Close)
	clock := clockwork.NewFakeClock()
	f := newFakeOrch(t, "a", clock)
	started := make(chan struct{})
	ended := make(chan error, 1)
	startWorker(t, worker.Config{Orchestrators: worker.StaticOrchestrators(f.URL()), Concurrency: 1, Clock: clock,
		RequestTimeout: time.Hour, ReportTimeout: time.Hour},
		func(w *worker.Worker) {
			mustHandle(t, w, "wait", func(ctx context.Context, _ worker.Run) error {
				close(started)
				<-ctx.Done()
				ended <- ctx.Err()
				return ctx.Err()
			})
		})
	t.Cleanup(func() { close(release) }) // before the worker stops
	a := f.assignment("r1", handlerExec("wait"), "")
	a.Limits = []string{"db"}
	a.RunLease = api.Duration(3 * time.Second) // a heartbeat every second
	a.OwnerAddr = owner.URL
	f.enqueue(a)
	recv(t, started, "attempt start")
	blockUntil(t, clock, 3) // the attempt's timeout, its heartbeat timer and the registration's retry
	clock.Advance(time.Second)
	recv(t, hung, "a heartbeat to the owner")
	clock.Advance(2 * time.Second) // the lease since the attempt started
	if err := recv(t, ended, "the execution's end"); !errors.Is(err, context.Canceled) {
		t.Fatalf("handler ended with %v, want its context cancelled", err)
	}
}
