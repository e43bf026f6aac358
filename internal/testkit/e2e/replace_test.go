package e2e_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	jfapi "github.com/jobfleet/jobfleet/api"
	"github.com/jobfleet/jobfleet/egress"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"

	"github.com/jobfleet/jobfleet/dispatch/worker"
	"github.com/jobfleet/jobfleet/internal/testkit/fleettest"
	"github.com/jobfleet/jobfleet/internal/testkit/metrictest"
)

// TestReplacedRunIsCancelledOnItsWorker runs a "replace" job on a real
// worker: while the first run's attempt is executing, a second trigger
// replaces it. The orchestrator records the first run dead with its
// attempt cancelled, the worker's next heartbeat tells it to stop, the
// executor's request is cancelled, the worker reports the attempt (not
// refused as stale), and the replacing run executes.
func TestReplacedRunIsCancelledOnItsWorker(t *testing.T) {
	f := fleettest.New(t, etcd, fleettest.Options{Partitions: 4, Scheduler: true, RunLease: 3 * time.Second, Quiet: true})
	f.Join("m1")
	f.WaitSettled(15 * time.Second)
	base := f.URLs()[0]

	started, cancelled := make(chan struct{}), make(chan struct{})
	var first atomic.Bool
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if first.CompareAndSwap(false, true) {
			close(started)
			select {
			case <-r.Context().Done(): // the worker stopped the attempt
				close(cancelled)
			case <-time.After(time.Minute):
			}
			return
		}
		w.WriteHeader(http.StatusOK)
	}))
	defer hook.Close()

	reg := prometheus.NewRegistry()
	metrics := worker.NewMetrics(reg)
	ctx, cancel := context.WithCancel(context.Background())
	w, err := worker.New(worker.Config{Token: f.WorkerToken, ID: "w1", Orchestrators: worker.StaticOrchestrators(base), ServeHTTP: true, PollWait: time.Second,
		ShutdownTimeout: time.Second, RetryInitial: 50 * time.Millisecond, RetryMax: 500 * time.Millisecond,
		Metrics: metrics, Logger: zaptest.NewLogger(t, zaptest.Level(zap.WarnLevel)),
		HTTPPolicy: egress.Policy{Allow: []string{"127.0.0.1"}}}) // the hook
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { defer close(done); w.Run(ctx) }()
	defer func() { cancel(); <-done }()

	job := jfapi.Job{ID: "rep", RunAt: ptrTime(time.Now().Add(24 * time.Hour)), ConcurrencyPolicy: jfapi.ConcurrencyReplace,
		Executor: jfapi.Executor{Type: "http", URL: hook.URL}}
	if code := api(t, f.AdminToken, "POST", base, "/v1/jobs", job, nil); code != http.StatusCreated {
		t.Fatalf("create: %d", code)
	}
	trigger := func() string {
		var out struct {
			RunID string `json:"run_id"`
		}
		if code := api(t, f.AdminToken, "POST", base, "/v1/jobs/rep/trigger", nil, &out); code != http.StatusAccepted {
			t.Fatalf("trigger: %d", code)
		}
		return out.RunID
	}
	firstRun := trigger()
	waitClosed(t, started, "the first run's attempt to start")
	secondRun := trigger()
	waitClosed(t, cancelled, "the worker to cancel the replaced attempt")

	var old jfapi.Run
	waitFor(t, 10*time.Second, func() bool {
		api(t, f.AdminToken, "GET", base, "/v1/runs/"+url.PathEscape(firstRun), nil, &old)
		return old.Status == jfapi.RunDead
	})
	if a := old.Attempts[0]; a.FinishedAt.IsZero() || !strings.Contains(a.Error, "cancelled") || !strings.Contains(old.Reason, secondRun) {
		t.Fatalf("replaced run = %+v, want dead, replaced by %s, its attempt finished as cancelled", old, secondRun)
	}
	waitFor(t, 10*time.Second, func() bool {
		var r jfapi.Run
		api(t, f.AdminToken, "GET", base, "/v1/runs/"+url.PathEscape(secondRun), nil, &r)
		return r.Status == jfapi.RunSucceeded
	})
	// The worker reported the cancelled attempt and was heard, rather than
	// being refused as stale.
	waitFor(t, 10*time.Second, func() bool {
		return metrictest.Value(t, reg, "jobfleet_worker_attempts_finished_total", "result", "failed") == 1
	})
	if stale := metrictest.Value(t, reg, "jobfleet_worker_attempts_finished_total", "result", "stale"); stale != 0 {
		t.Fatalf("%v attempts ended stale, want 0", stale)
	}
}

func ptrTime(t time.Time) *time.Time { return &t }

func waitClosed(t *testing.T, ch <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(20 * time.Second):
		t.Fatalf("timed out waiting for %s", what)
	}
}
