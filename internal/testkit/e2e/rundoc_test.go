package e2e_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	jfapi "github.com/jobfleet/jobfleet/api"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"

	"github.com/jobfleet/jobfleet/dispatch/worker"
	"github.com/jobfleet/jobfleet/internal/testkit/fleettest"
	"github.com/jobfleet/jobfleet/store"
)

// TestLargeOutputsKeepTheRunDocumentBounded runs a job whose first 39
// attempts fail with 64 KiB of output each and whose 40th succeeds, on a
// real worker: 40 attempts of full output are far beyond etcd's request
// limit. The stored run stays within its budget, the success is recorded,
// and the executor ran exactly 40 times, even after a run lease has
// passed.
func TestLargeOutputsKeepTheRunDocumentBounded(t *testing.T) {
	t.Parallel()
	const attempts = 40
	f := fleettest.New(t, etcd, fleettest.Options{Partitions: 4, Scheduler: true, RunLease: 3 * time.Second, Quiet: true})
	f.Join("m1")
	f.WaitSettled(15 * time.Second)
	base := f.URLs()[0]

	var executions atomic.Int32
	body := strings.Repeat("o", 64<<10)
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		executions.Add(1)
		if r.Header.Get(worker.HeaderAttempt) != strconv.Itoa(attempts) {
			w.WriteHeader(http.StatusInternalServerError)
		}
		w.Write([]byte(body))
	}))
	defer hook.Close()
	startWorkers(t, 1, []string{base}, f.WorkerToken, zaptest.NewLogger(t, zaptest.Level(zap.WarnLevel)))

	job := jfapi.Job{ID: "noisy", Executor: jfapi.Executor{Type: "http", URL: hook.URL},
		Retry: jfapi.RetryPolicy{MaxAttempts: attempts, InitialBackoff: jfapi.Duration(time.Millisecond), MaxBackoff: jfapi.Duration(time.Millisecond)}}
	if code := api(t, f.AdminToken, "POST", base, "/v1/jobs", job, nil); code != http.StatusCreated {
		t.Fatalf("create: %d", code)
	}
	var run jfapi.Run
	waitFor(t, 60*time.Second, func() bool {
		runs := runsOf(t, f.AdminToken, base, "noisy")
		if len(runs) == 1 {
			run = runs[0]
		}
		return run.Status.Final()
	})
	if run.Status != jfapi.RunSucceeded || len(run.Attempts) != attempts {
		t.Fatalf("run ended %s after %d attempts, want succeeded after %d", run.Status, len(run.Attempts), attempts)
	}
	resp, err := f.Client.Get(context.Background(), store.Keys{NS: f.NS}.Run(run.Partition, "noisy", run.ScheduledAt))
	if err != nil || len(resp.Kvs) != 1 {
		t.Fatalf("read the stored run: %v", err)
	}
	if size := len(resp.Kvs[0].Value); size > store.DefaultMaxRunBytes {
		t.Fatalf("stored run is %d bytes, budget %d", size, store.DefaultMaxRunBytes)
	}
	first, last := run.Attempts[0], run.Attempts[attempts-1]
	if first.Output == "" || last.Output == "" || run.Attempts[1].Output != "" || run.Attempts[1].DroppedBytes < 64<<10 {
		t.Fatalf("outputs of attempts 1, 2 and %d: %d, %d (%d bytes dropped), %d bytes; want the first and last kept and the others dropped and counted",
			attempts, len(first.Output), len(run.Attempts[1].Output), run.Attempts[1].DroppedBytes, len(last.Output))
	}
	// A run lease later, nothing ran again.
	time.Sleep(4 * time.Second)
	if n := executions.Load(); n != attempts {
		t.Fatalf("the executor ran %d times, want %d", n, attempts)
	}
}
