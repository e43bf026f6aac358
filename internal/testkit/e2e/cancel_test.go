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

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"

	jfapi "github.com/jobfleet/jobfleet/api"
	"github.com/jobfleet/jobfleet/dispatch/worker"
	"github.com/jobfleet/jobfleet/egress"
	"github.com/jobfleet/jobfleet/internal/testkit/fleettest"
	"github.com/jobfleet/jobfleet/internal/testkit/metrictest"
	"github.com/jobfleet/jobfleet/shard"
)

// TestCancelRunningRunOnARealWorker cancels a run whose attempt a real
// worker is executing, through a member that does not own the run's
// partition: the owner records the run cancelled, the worker's next
// heartbeat tells it to stop, its executor's request is cancelled, its
// report is acknowledged (not stale), nothing retries the run, and it
// stays cancelled when its partition moves to a member that joins. A
// viewer, and an operator outside the job's prefix, are refused.
func TestCancelRunningRunOnARealWorker(t *testing.T) {
	f := fleettest.New(t, etcd, fleettest.Options{Partitions: 4, Scheduler: true, RunLease: 3 * time.Second, Quiet: true})
	f.Join("m1")
	f.Join("m2")
	f.WaitSettled(15 * time.Second)

	started, stopped := make(chan struct{}), make(chan struct{})
	var calls atomic.Int32
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if calls.Add(1) > 1 {
			w.WriteHeader(http.StatusOK) // a retry would land here
			return
		}
		close(started)
		select {
		case <-r.Context().Done():
			close(stopped)
		case <-time.After(time.Minute):
		}
	}))
	defer hook.Close()

	reg := prometheus.NewRegistry()
	ctx, cancel := context.WithCancel(context.Background())
	w, err := worker.New(worker.Config{Token: f.WorkerToken, ID: "w1", ServeHTTP: true, Orchestrators: worker.StaticOrchestrators(f.URLs()...), PollWait: time.Second,
		ShutdownTimeout: time.Second, RetryInitial: 50 * time.Millisecond, RetryMax: 500 * time.Millisecond,
		Metrics: worker.NewMetrics(reg), Logger: zaptest.NewLogger(t, zaptest.Level(zap.WarnLevel)),
		HTTPPolicy: egress.Policy{Allow: []string{"127.0.0.1"}}})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { defer close(done); w.Run(ctx) }()
	defer func() { cancel(); <-done }()

	const id = "team/cancel-me"
	job := jfapi.Job{ID: id, RunAt: ptrTime(time.Now().Add(24 * time.Hour)), Executor: jfapi.Executor{Type: "http", URL: hook.URL},
		Retry: jfapi.RetryPolicy{MaxAttempts: 3, InitialBackoff: jfapi.Duration(10 * time.Millisecond)}}
	base := f.URLs()[0]
	if code := api(t, f.AdminToken, "POST", base, "/v1/jobs", job, nil); code != http.StatusCreated {
		t.Fatalf("create: %d", code)
	}
	var tr jfapi.Triggered
	if code := api(t, f.AdminToken, "POST", base, "/v1/jobs/"+url.PathEscape(id)+"/trigger", nil, &tr); code != http.StatusAccepted {
		t.Fatalf("trigger: %d", code)
	}
	waitClosed(t, started, "the attempt to start")

	// The member that does not own the run's partition takes the request.
	p := shard.Partition(id, f.Partitions())
	other := ""
	waitFor(t, 10*time.Second, func() bool {
		owners, _, err := f.Owners(context.Background())
		if err != nil || owners[p].Member == "" {
			return false
		}
		for _, m := range []string{"m1", "m2"} {
			if m != owners[p].Member {
				other = f.Member(m).URL
			}
		}
		return true
	})
	path := "/v1/runs/" + url.PathEscape(tr.RunID) + "/cancel"
	for _, who := range []struct {
		name, token string
	}{{"viewer", f.Token(jfapi.RoleViewer, "")}, {"operator of another prefix", f.Token(jfapi.RoleOperator, "other/")}} {
		if code := api(t, who.token, "POST", other, path, nil, nil); code != http.StatusForbidden {
			t.Fatalf("cancel as %s: %d, want 403", who.name, code)
		}
	}
	var got jfapi.Run
	if code := api(t, f.Token(jfapi.RoleOperator, "team/"), "POST", other, path, nil, &got); code != http.StatusOK || got.Status != jfapi.RunCancelled {
		t.Fatalf("cancel as the team's operator: %d %+v, want 200 with the run cancelled", code, got)
	}
	if a := got.Attempts[0]; a.FinishedAt.IsZero() || !strings.Contains(a.Error, "cancelled") || !strings.Contains(got.Reason, "cancelled by") {
		t.Fatalf("cancelled run = %+v, want its attempt closed as cancelled and the reason naming who", got)
	}
	waitClosed(t, stopped, "the worker to stop the cancelled attempt")
	waitFor(t, 10*time.Second, func() bool {
		return metrictest.Value(t, reg, "jobfleet_worker_attempts_finished_total", "result", "failed") == 1
	})
	if stale := metrictest.Value(t, reg, "jobfleet_worker_attempts_finished_total", "result", "stale"); stale != 0 {
		t.Fatalf("%v attempts ended stale, want 0: the cancelled attempt's report was refused", stale)
	}
	// Cancelling again is refused, naming the status.
	if code := api(t, f.AdminToken, "POST", base, path, nil, nil); code != http.StatusConflict {
		t.Fatalf("second cancel: %d, want 409", code)
	}

	// A third member takes partitions over: the run stays cancelled, and
	// nothing runs it again.
	f.Join("m3")
	f.WaitSettled(15 * time.Second)
	time.Sleep(time.Second) // a retry, were there one, is due within 10ms
	var r jfapi.Run
	for _, u := range f.URLs() {
		if code := api(t, f.AdminToken, "GET", u, "/v1/runs/"+url.PathEscape(tr.RunID), nil, &r); code != http.StatusOK || r.Status != jfapi.RunCancelled || len(r.Attempts) != 1 {
			t.Fatalf("run on %s after the join: %d %+v, want cancelled with one attempt", u, code, r)
		}
	}
	if n := calls.Load(); n != 1 {
		t.Fatalf("the hook was called %d times, want once: the cancelled run ran again", n)
	}
}
