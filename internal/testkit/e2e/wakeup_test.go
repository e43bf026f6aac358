package e2e_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	jfapi "github.com/jobfleet/jobfleet/api"
	"github.com/jobfleet/jobfleet/egress"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"

	"github.com/jobfleet/jobfleet/dispatch/worker"
	"github.com/jobfleet/jobfleet/dispatch/worker/etcddiscovery"
	"github.com/jobfleet/jobfleet/internal/testkit/fleettest"
	"github.com/jobfleet/jobfleet/shard"
)

// TestFirstRunsReachWorkersStartedAroundAcquisition starts a worker
// (following the members in etcd, as `jobfleet dev`'s workers do) before,
// during and after the members join and acquire their partitions, then
// creates jobs that only the later members own, and checks that their
// first runs are handed out promptly. The worker's long polls may be held
// 30 s: a poll that took every slot while the worker knew one member, and
// waits at a member that owns none of the runs, must not keep the other
// members' runs waiting that long.
func TestFirstRunsReachWorkersStartedAroundAcquisition(t *testing.T) {
	for _, phase := range []string{"before", "during", "after"} {
		t.Run(phase, func(t *testing.T) {
			f := fleettest.New(t, etcd, fleettest.Options{Partitions: 16, Scheduler: true, Quiet: true})
			lg := zaptest.NewLogger(t, zaptest.Level(zap.WarnLevel))
			startWorker := func() {
				w, err := worker.New(worker.Config{Token: f.WorkerToken, ID: "w-" + phase, Orchestrators: etcddiscovery.New(f.Client, f.NS), ServeHTTP: true,
					Concurrency: 4, PollWait: 30 * time.Second, ShutdownTimeout: time.Second,
					RetryInitial: 50 * time.Millisecond, RetryMax: 500 * time.Millisecond, Logger: lg,
					HTTPPolicy: egress.Policy{Allow: []string{"127.0.0.1"}}}) // the hook
				if err != nil {
					t.Fatal(err)
				}
				ctx, cancel := context.WithCancel(context.Background())
				done := make(chan struct{})
				go func() { defer close(done); w.Run(ctx) }()
				t.Cleanup(func() { cancel(); <-done })
			}
			if phase == "before" {
				startWorker()
			}
			for i := 1; i <= 3; i++ {
				f.Join(fmt.Sprintf("m%d", i))
				f.WaitSettled(15 * time.Second)
				if phase == "during" && i == 1 {
					startWorker()
				}
			}
			if phase == "after" {
				startWorker()
			}

			hook := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
			defer hook.Close()
			table, _, err := f.Owners(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			var ids []string
			for i := 0; len(ids) < 4 && i < 1000; i++ {
				id := fmt.Sprintf("job-%d", i)
				if table[shard.Partition(id, f.Partitions())].Member != "m1" {
					ids = append(ids, id)
				}
			}
			base := f.URLs()[0]
			for _, id := range ids {
				// Neither schedule nor run_at: it runs once, now.
				if code := api(t, f.AdminToken, "POST", base, "/v1/jobs", jfapi.Job{ID: id, Executor: jfapi.Executor{Type: "http", URL: hook.URL}}, nil); code != http.StatusCreated {
					t.Fatalf("create %s: %d", id, code)
				}
			}
			for _, id := range ids {
				waitFor(t, 10*time.Second, func() bool {
					runs := runsOf(t, f.AdminToken, base, id)
					return len(runs) == 1 && len(runs[0].Attempts) > 0
				})
			}
		})
	}
}
