package e2e_test

import (
	"context"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"

	jfapi "github.com/jobfleet/jobfleet/api"
	"github.com/jobfleet/jobfleet/dispatch/worker"
	"github.com/jobfleet/jobfleet/egress"
	"github.com/jobfleet/jobfleet/internal/netfault"
	"github.com/jobfleet/jobfleet/internal/testkit/fleettest"
	"github.com/jobfleet/jobfleet/internal/testkit/metrictest"
)

// presenceWorker runs a worker whose connections to the fleet's first
// member all go through a TCP bridge (as through a proxy), until the test
// ends; the bridge is returned so the test can drop or refuse its
// connections. The worker names the member by its own address, as the
// member's loopback Host check wants.
func presenceWorker(t *testing.T, f *fleettest.Fleet, id string) *netfault.Bridge {
	t.Helper()
	b, err := netfault.StartBridge(strings.TrimPrefix(f.URLs()[0], "http://"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b.Close)
	via := strings.TrimPrefix(b.Endpoints()[0], "http://")
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.DialContext = func(ctx context.Context, network, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, network, via)
	}
	t.Cleanup(tr.CloseIdleConnections)
	w, err := worker.New(worker.Config{
		ID: id, Orchestrators: worker.StaticOrchestrators(f.URLs()[0]), Token: f.WorkerToken, Concurrency: 1, ServeHTTP: true,
		HTTPClient: &http.Client{Transport: tr},
		PollWait:   time.Second, ShutdownTimeout: time.Second, ReportTimeout: time.Second, RequestTimeout: 500 * time.Millisecond,
		RetryInitial: 50 * time.Millisecond, RetryMax: 200 * time.Millisecond,
		HTTPPolicy: egress.Policy{Allow: []string{"127.0.0.1"}},
		Logger:     zaptest.NewLogger(t, zaptest.Level(zap.WarnLevel)).Named(id),
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() { w.Run(ctx) })
	t.Cleanup(func() { cancel(); wg.Wait() })
	return b
}

// registration returns worker id's registration as member base lists it.
func registration(t *testing.T, f *fleettest.Fleet, base, id string) (jfapi.Worker, bool) {
	t.Helper()
	var l jfapi.WorkerList
	if api(t, f.AdminToken, "GET", base, "/v1/cluster/workers", nil, &l) != http.StatusOK {
		return jfapi.Worker{}, false
	}
	for _, w := range l.Workers {
		if w.ID == id {
			return w, true
		}
	}
	return jfapi.Worker{}, false
}

// TestDeadWorkerIsRevokedAtOnce: a worker holding an attempt dies as its
// orchestrator sees a dead process: its connections close (here the
// bridge in front of it closes them and refuses new ones) and it never
// comes back. The member holding its presence stream revokes its
// registration after the grace, long before the registration's 6 s TTL,
// and the attempt is retried on another worker.
func TestDeadWorkerIsRevokedAtOnce(t *testing.T) {
	f := fleettest.New(t, etcd, fleettest.Options{Partitions: 4, Scheduler: true, RunLease: time.Minute, Quiet: true})
	f.Join("m1")
	f.WaitSettled(15 * time.Second)
	base := f.URLs()[0]

	hook, hung, release := hangingHook(t)
	defer release()

	bridge := presenceWorker(t, f, "doomed")
	waitFor(t, 10*time.Second, func() bool {
		_, ok := registration(t, f, base, "doomed")
		return ok
	})
	m1 := f.Member("m1").Metrics
	waitFor(t, 10*time.Second, func() bool { return metrictest.Value(t, m1, "jobfleet_worker_presence_streams") == 1 })
	if code := api(t, f.AdminToken, "POST", base, "/v1/jobs", jfapi.Job{ID: "survives", Executor: jfapi.Executor{Type: "http", URL: hook.URL},
		Retry: jfapi.RetryPolicy{MaxAttempts: 3, InitialBackoff: jfapi.Duration(10 * time.Millisecond)}}, nil); code != http.StatusCreated {
		t.Fatalf("create: %d", code)
	}
	waitFor(t, 10*time.Second, func() bool {
		runs := runsOf(t, f.AdminToken, base, "survives")
		return len(runs) == 1 && runs[0].Status == jfapi.RunRunning && hung()
	})

	killedAt := time.Now()
	bridge.Close() // every connection closes, and nothing answers there any more
	waitFor(t, 10*time.Second, func() bool {
		_, ok := registration(t, f, base, "doomed")
		return !ok
	})
	gone := time.Since(killedAt)
	// Counted once etcd answered the revocation, maybe after the member's
	// copy of the registry saw it.
	waitFor(t, 10*time.Second, func() bool { return metrictest.Value(t, m1, "jobfleet_worker_dead_revocations_total") > 0 })
	if got := metrictest.Value(t, m1, "jobfleet_worker_dead_revocations_total"); got != 1 {
		t.Fatalf("dead worker revocations = %v, want 1", got)
	}
	startWorkers(t, 1, []string{base}, f.WorkerToken, zaptest.NewLogger(t, zaptest.Level(zap.WarnLevel)))
	var run jfapi.Run
	waitFor(t, 20*time.Second, func() bool {
		run = runsOf(t, f.AdminToken, base, "survives")[0]
		return run.Status == jfapi.RunSucceeded
	})
	if len(run.Attempts) != 2 || run.Attempts[1].Worker != "w1" || !strings.Contains(run.Attempts[0].Error, `worker "doomed" lost`) {
		t.Fatalf("attempts = %+v, want attempt 1 lost with the doomed worker, attempt 2 by w1", run.Attempts)
	}
	t.Logf("registration revoked %v after the worker's connections closed (grace 500ms, TTL 6s)", gone.Round(time.Millisecond))
}

// TestCutWorkerConnectionIsNotRevoked: the connection of a live worker's
// presence stream is closed by something between it and the member (a
// proxy recycling connections): the worker opens a new stream at once,
// within the grace, and keeps its registration, again and again.
func TestCutWorkerConnectionIsNotRevoked(t *testing.T) {
	// A grace of 2s rather than the default 500ms: the worker must come
	// back within it, and on a loaded machine under the race detector
	// a reconnection through the bridge has been seen to take longer.
	f := fleettest.New(t, etcd, fleettest.Options{Partitions: 4, Scheduler: true, Quiet: true, PresenceGrace: 2 * time.Second})
	f.Join("m1")
	f.WaitSettled(15 * time.Second)
	base := f.URLs()[0]
	bridge := presenceWorker(t, f, "alive")
	var before jfapi.Worker
	waitFor(t, 10*time.Second, func() bool {
		var ok bool
		before, ok = registration(t, f, base, "alive")
		return ok
	})
	m1 := f.Member("m1").Metrics
	for i := range 3 {
		waitFor(t, 10*time.Second, func() bool { return metrictest.Value(t, m1, "jobfleet_worker_presence_streams") == 1 })
		bridge.DropConnections()
		waitFor(t, 10*time.Second, func() bool {
			return metrictest.Value(t, m1, "jobfleet_worker_presence_returned_total") == float64(i+1)
		})
	}
	if got := metrictest.Value(t, m1, "jobfleet_worker_presence_lost_total"); got != 3 {
		t.Errorf("presence streams lost = %v, want 3 (one per cut)", got)
	}
	if got := metrictest.Value(t, m1, "jobfleet_worker_dead_revocations_total"); got != 0 {
		t.Fatalf("a live worker was revoked %v times", got)
	}
	after, ok := registration(t, f, base, "alive")
	if !ok || !after.RegisteredAt.Equal(before.RegisteredAt) {
		t.Fatalf("registration %+v after the cuts, want the one registered at %v", after, before.RegisteredAt)
	}
}

// TestStoppedWorkerEndsItsPresence: a worker stopped gracefully ends its
// presence stream properly before it deregisters: nothing is taken for a
// death.
func TestStoppedWorkerEndsItsPresence(t *testing.T) {
	f := fleettest.New(t, etcd, fleettest.Options{Partitions: 4, Scheduler: true, Quiet: true})
	f.Join("m1")
	f.WaitSettled(15 * time.Second)
	base := f.URLs()[0]
	w, err := worker.New(worker.Config{
		ID: "leaving", Orchestrators: worker.StaticOrchestrators(base), Token: f.WorkerToken, Concurrency: 1, ServeHTTP: true,
		PollWait: time.Second, ShutdownTimeout: time.Second, RetryInitial: 50 * time.Millisecond, RetryMax: 200 * time.Millisecond,
		Logger: zaptest.NewLogger(t, zaptest.Level(zap.WarnLevel)),
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); w.Run(ctx) }()
	m1 := f.Member("m1").Metrics
	waitFor(t, 10*time.Second, func() bool { return metrictest.Value(t, m1, "jobfleet_worker_presence_streams") == 1 })
	cancel()
	<-done
	waitFor(t, 10*time.Second, func() bool {
		_, ok := registration(t, f, base, "leaving")
		return !ok && metrictest.Value(t, m1, "jobfleet_worker_presence_streams") == 0
	})
	for _, name := range []string{"jobfleet_worker_presence_lost_total", "jobfleet_worker_dead_revocations_total"} {
		if got := metrictest.Value(t, m1, name); got != 0 {
			t.Errorf("%s = %v after a graceful stop, want 0", name, got)
		}
	}
}
