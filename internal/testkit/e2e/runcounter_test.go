package e2e_test

import (
	"context"
	"maps"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"

	"github.com/jobfleet/jobfleet/dispatch/worker"
	"github.com/jobfleet/jobfleet/egress"
	"github.com/jobfleet/jobfleet/internal/testkit/fleettest"
	"github.com/jobfleet/jobfleet/shard"
)

// settledFleet starts a fleet of opts with members, and waits until its
// partitions are settled among them.
func settledFleet(t *testing.T, opts fleettest.Options, members ...string) *fleettest.Fleet {
	t.Helper()
	f := fleettest.New(t, etcd, opts)
	for _, m := range members {
		f.Join(m)
	}
	f.WaitSettled(20 * time.Second)
	return f
}

// runCounter is an http executor's endpoint that counts the requests
// it answers by run ID (the Jobfleet-Run-Id header). Close it.
type runCounter struct {
	*httptest.Server

	mu    sync.Mutex
	byRun map[string]int // guarded by mu
}

func newRunCounter() *runCounter {
	c := &runCounter{byRun: map[string]int{}}
	c.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c.mu.Lock()
		c.byRun[r.Header.Get("Jobfleet-Run-Id")]++
		c.mu.Unlock()
	}))
	return c
}

// executed returns the requests so far by run ID.
func (c *runCounter) executed() map[string]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return maps.Clone(c.byRun)
}

// runHookWorker runs worker w1 of f, of concurrency slots, with http
// executors allowed to loopback endpoints and a log of errors only; stop
// ends it and waits until it has returned.
func runHookWorker(t *testing.T, f *fleettest.Fleet, concurrency int) (stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	w, err := worker.New(worker.Config{Token: f.WorkerToken, ID: "w1", ServeHTTP: true, Orchestrators: worker.StaticOrchestrators(f.URLs()...), PollWait: time.Second,
		Concurrency: concurrency, ShutdownTimeout: time.Second, RetryInitial: 50 * time.Millisecond, RetryMax: 500 * time.Millisecond,
		Logger: zaptest.NewLogger(t, zaptest.Level(zap.ErrorLevel)), HTTPPolicy: egress.Policy{Allow: []string{"127.0.0.1"}}})
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { defer close(done); w.Run(ctx) }()
	return func() { cancel(); <-done }
}

// partitionOwner returns the member that owns job id's partition in f.
func partitionOwner(t *testing.T, f *fleettest.Fleet, id string) string {
	t.Helper()
	owners, _, err := f.Owners(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return owners[shard.Partition(id, f.Partitions())].Member
}
