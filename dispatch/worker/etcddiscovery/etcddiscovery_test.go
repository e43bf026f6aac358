package etcddiscovery_test

import (
	"context"
	"encoding/json"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"

	"github.com/jobfleet/jobfleet/api"
	"github.com/jobfleet/jobfleet/client"
	"github.com/jobfleet/jobfleet/dispatch/worker"
	"github.com/jobfleet/jobfleet/dispatch/worker/etcddiscovery"
	"github.com/jobfleet/jobfleet/internal/testkit/etcdtest"
	"github.com/jobfleet/jobfleet/internal/testkit/fleettest"
	"github.com/jobfleet/jobfleet/membership"
)

var etcd *etcdtest.Server

func TestMain(m *testing.M) {
	os.Exit(etcdtest.Main(m, &etcd, goleak.IgnoreTopFunction("net/http.(*persistConn).writeLoop"), goleak.IgnoreTopFunction("internal/poll.runtime_pollWait")))
}

// recv returns the next value of ch, failing the test after a minute.
func recv[T any](t *testing.T, ch <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(time.Minute):
		t.Fatalf("timed out waiting for %s", what)
		panic("unreachable")
	}
}

func putMember(t *testing.T, ctx context.Context, ns string, m api.Member) {
	t.Helper()
	b, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := etcd.Client(t).Put(ctx, membership.Key(ns, m.ID), string(b)); err != nil {
		t.Fatalf("put member: %v", err)
	}
}

// TestWatch: the members' addresses are reported at once (none), then on
// every change, normalized; Watch returns nil when its context ends.
func TestWatch(t *testing.T) {
	client := etcd.Client(t)
	ns := etcdtest.Namespace(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	d := etcddiscovery.New(client, ns)
	d.Logger = zaptest.NewLogger(t)
	updates := make(chan []string, 100)
	done := make(chan error, 1)
	go func() { done <- d.Watch(ctx, func(addrs []string) { updates <- addrs }) }()
	waitUpdate := func(want ...string) {
		t.Helper()
		for {
			got := recv(t, updates, "an update")
			if slices.Equal(got, want) {
				return
			}
		}
	}
	waitUpdate()
	putMember(t, ctx, ns, api.Member{ID: "a", Addr: "http://a.example:8080/"})
	waitUpdate("http://a.example:8080")
	putMember(t, ctx, ns, api.Member{ID: "b", Addr: "http://b.example:8080"})
	waitUpdate("http://a.example:8080", "http://b.example:8080")
	if _, err := client.Delete(ctx, membership.Key(ns, "a")); err != nil {
		t.Fatal(err)
	}
	waitUpdate("http://b.example:8080")
	cancel()
	if err := recv(t, done, "Watch to return"); err != nil {
		t.Errorf("Watch = %v, want nil", err)
	}
}

func TestValidate(t *testing.T) {
	for _, ns := range []string{"", "/jobfleet"} {
		if err := etcddiscovery.New(etcd.Client(t), ns).Validate(); err == nil {
			t.Errorf("namespace %q: Validate() = nil, want an error", ns)
		}
	}
	if err := etcddiscovery.New(etcd.Client(t), "/jobfleet/").Validate(); err != nil {
		t.Errorf("Validate() = %v, want nil", err)
	}
	// The worker's Config checks its Discovery.
	cfg := worker.DefaultConfig()
	cfg.ID = "w"
	cfg.Orchestrators = etcddiscovery.New(nil, "/jobfleet/")
	if err := cfg.Validate(); err == nil {
		t.Error("worker config with an etcd discovery without client: Validate() = nil, want an error")
	}
}

// TestEtcdEndpoints: the discovery names the client's endpoints, which
// the worker refuses to "http" jobs.
func TestEtcdEndpoints(t *testing.T) {
	c := etcd.Client(t)
	var d worker.Discovery = etcddiscovery.New(c, "/jobfleet/")
	e, ok := d.(worker.EtcdEndpointer)
	if !ok {
		t.Fatal("Members is not a worker.EtcdEndpointer")
	}
	if got := e.EtcdEndpoints(); !slices.Equal(got, c.Endpoints()) || len(got) == 0 {
		t.Errorf("EtcdEndpoints() = %q, want %q", got, c.Endpoints())
	}
}

// TestWorkerRunsJobOfFleet: a worker that finds a real fleet's members
// in etcd runs a job of the fleet, and cannot reach etcd from an "http"
// job.
func TestWorkerRunsJobOfFleet(t *testing.T) {
	f := fleettest.New(t, etcd, fleettest.Options{Partitions: 4, Scheduler: true, Quiet: true, LeaseTTL: 5 * time.Second})
	m := f.Join("a")
	f.WaitSettled(30 * time.Second)

	lg := zaptest.NewLogger(t, zaptest.Level(zap.WarnLevel))
	d := etcddiscovery.New(f.Client, f.NS)
	d.Logger = lg
	w, err := worker.New(worker.Config{ID: "w1", Orchestrators: d, Token: f.WorkerToken, PollWait: time.Second,
		ShutdownTimeout: time.Second, RetryInitial: 50 * time.Millisecond, RetryMax: 500 * time.Millisecond, Logger: lg})
	if err != nil {
		t.Fatal(err)
	}
	ran := make(chan string, 1)
	if err := w.Handle("ok", func(_ context.Context, r worker.Run) error {
		select {
		case ran <- r.JobID:
		default:
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	defer func() {
		cancel()
		if err := recv(t, done, "Run to return"); err != nil {
			t.Errorf("Run = %v, want nil", err)
		}
	}()

	c, err := client.New(client.Config{Server: m.URL, Token: f.AdminToken, Timeout: 40 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	rctx, rcancel := context.WithTimeout(context.Background(), time.Minute)
	defer rcancel()
	// Neither schedule nor run_at: it runs once, now.
	if _, err := c.CreateJob(rctx, api.Job{ID: "found-in-etcd", Executor: api.Executor{Type: "ok"}}); err != nil {
		t.Fatal(err)
	}
	if got := recv(t, ran, "the job to run"); got != "found-in-etcd" {
		t.Errorf("ran job %q, want found-in-etcd", got)
	}
	// etcd is one of the fleet's endpoints: an "http" job may not reach it.
	if _, err := c.CreateJob(rctx, api.Job{ID: "to-etcd", Executor: api.Executor{Type: api.ExecutorHTTP, URL: f.Client.Endpoints()[0] + "/v3/kv/range"}}); err != nil {
		t.Fatal(err)
	}
	for {
		runs, err := c.ListRuns(rctx, "to-etcd", 1)
		if err != nil {
			t.Fatal(err)
		}
		if len(runs) == 1 && runs[0].Status.Final() {
			if runs[0].Status == api.RunSucceeded || len(runs[0].Attempts) == 0 {
				t.Fatalf("run %+v, want it failed by the destination policy", runs[0])
			}
			if msg := runs[0].Attempts[0].Error; !strings.Contains(msg, "refused: etcd endpoint ") {
				t.Errorf("attempt error %q, want it refused as the discovery's etcd endpoint (not only as one learned from a poll reply)", msg)
			}
			break
		}
		select {
		case <-rctx.Done():
			t.Fatalf("the run of to-etcd did not end: %v", runs)
		case <-time.After(50 * time.Millisecond):
		}
	}
}
