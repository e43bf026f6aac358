package worker

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"
)

// TestPollSendsNothingOnceStopped: a poll asked for with its context
// already done (the worker stopped between two polls, a poll's reply
// having just come in) sends nothing. Sent, it would race its own end
// request, and an orchestrator reached by the poll first would hand the
// stopping worker new attempts.
func TestPollSendsNothingOnceStopped(t *testing.T) {
	var requests atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		requests.Add(1)
		w.Header().Set("Content-Type", "application/json")
		w.Write([]byte(`{"attempts":[{"run_id":"a@x","job_id":"a","attempt":1,"executor":{"type":"ok"}}]}`))
	}))
	defer srv.Close()
	w, err := New(Config{ID: "w1", Orchestrators: StaticOrchestrators(srv.URL), Concurrency: 1})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	got, err := w.poll(ctx, srv.URL, 1, time.Second)
	if !errors.Is(err, context.Canceled) || len(got) != 0 || requests.Load() != 0 {
		t.Fatalf("poll with its context done: %d attempts, %v, %d requests sent; want context.Canceled and nothing sent", len(got), err, requests.Load())
	}
}
