//go:build !windows

// The in-process fleet (package fleettest) builds on Unix only: package
// internal/httpserver reads the open-file limit with getrlimit.

package etcddiscovery_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"

	"github.com/jobfleet/jobfleet/api"
	"github.com/jobfleet/jobfleet/client"
	"github.com/jobfleet/jobfleet/dispatch/worker"
	"github.com/jobfleet/jobfleet/dispatch/worker/etcddiscovery"
	"github.com/jobfleet/jobfleet/internal/testkit/fleettest"
)

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
	w, err := worker.New(worker.Config{ID: "w1", Orchestrators: d, ServeHTTP: true, Token: f.WorkerToken, PollWait: time.Second,
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
