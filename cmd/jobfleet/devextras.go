package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/jobfleet/jobfleet/dispatch/worker"
	"github.com/jobfleet/jobfleet/internal/httpserver"
	"github.com/jobfleet/jobfleet/internal/orchestrator"
	"github.com/jobfleet/jobfleet/store"
)

// echoServer is `jobfleet dev`'s built-in job receiver: POST /echo answers
// 200 with the body it got; POST /flaky fails attempts 1 and 2 and lets the
// third succeed, so a retrying job is visible in the log and the run
// history.
func startEchoServer(lg *zap.Logger, host string, cfg httpserver.Config) (*httpserver.Server, error) {
	lg = lg.Named("echo")
	mux := http.NewServeMux()
	mux.HandleFunc("/echo", func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(io.LimitReader(r.Body, 1<<20))
		lg.Info("echo received a job", zap.String("job_id", r.Header.Get(worker.HeaderJobID)),
			zap.String("run_id", r.Header.Get(worker.HeaderRunID)), zap.String("attempt", r.Header.Get(worker.HeaderAttempt)),
			zap.ByteString("body", body))
		w.Header().Set("Content-Type", "application/json")
		w.Write(body)
	})
	mux.HandleFunc("/flaky", func(w http.ResponseWriter, r *http.Request) {
		attempt, _ := strconv.Atoi(r.Header.Get(worker.HeaderAttempt))
		if attempt < 3 {
			lg.Info("flaky endpoint failing on purpose", zap.String("run_id", r.Header.Get(worker.HeaderRunID)), zap.Int("attempt", attempt))
			http.Error(w, fmt.Sprintf("simulated failure of attempt %d; attempt 3 will succeed", attempt), http.StatusInternalServerError)
			return
		}
		fmt.Fprintf(w, "succeeded at attempt %d\n", attempt)
	})
	return httpserver.Start(net.JoinHostPort(host, "0"), mux, cfg)
}

// exampleJobs are the jobs `jobfleet dev` loads (replacing earlier
// versions): one over HTTP every few seconds, one shell job, one that fails
// twice before it succeeds.
func exampleJobs(echoURL string) []store.Job {
	return []store.Job{
		{
			ID:       "example-echo",
			Schedule: "@every 5s",
			Executor: store.Executor{Type: store.ExecutorHTTP, URL: echoURL + "/echo", Method: "POST"},
			Payload:  json.RawMessage(`{"hello":"jobfleet"}`),
		},
		{
			ID:       "example-shell",
			Schedule: "*/10 * * * * *",
			Executor: store.Executor{Type: store.ExecutorShell, Command: []string{"sh", "-c", `echo "hello from $JOBFLEET_JOB_ID, scheduled at $JOBFLEET_SCHEDULED_AT, payload: $(cat)"`}},
			Payload:  json.RawMessage(`{"from":"stdin"}`),
		},
		{
			ID:       "example-flaky",
			Schedule: "@every 30s",
			Executor: store.Executor{Type: store.ExecutorHTTP, URL: echoURL + "/flaky", Method: "POST"},
			Retry:    store.RetryPolicy{MaxAttempts: 3, InitialBackoff: store.Duration(time.Second), MaxBackoff: store.Duration(5 * time.Second)},
		},
	}
}

// loadExamples stores the example jobs once the member has joined.
func loadExamples(ctx context.Context, lg *zap.Logger, orch *orchestrator.Orchestrator, echoURL string) {
	t := time.NewTicker(100 * time.Millisecond)
	defer t.Stop()
	for {
		jobs, err := orch.Jobs()
		if err == nil {
			for _, j := range exampleJobs(echoURL) {
				if _, _, err := jobs.Put(ctx, j); err != nil {
					lg.Warn("loading an example job failed", zap.String("job_id", j.ID), zap.Error(err))
					continue
				}
				lg.Info("example job loaded", zap.String("job_id", j.ID), zap.String("schedule", j.Schedule))
			}
			return
		}
		if !errors.Is(err, orchestrator.ErrNotStarted) {
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// runDevWorkers runs n workers until ctx ends, finding the orchestrators
// through src (all members of the fleet, including ones started outside
// dev), and returns when they have shut down.
func runDevWorkers(ctx context.Context, lg *zap.Logger, n int, src worker.Discovery) error {
	var wg sync.WaitGroup
	errs := make([]error, n)
	for i := range n {
		w, err := worker.New(worker.Config{
			ID:              fmt.Sprintf("worker-%d", i+1),
			Orchestrators:   src,
			Concurrency:     8,
			AllowShell:      true, // dev runs on the developer's own machine
			ShutdownTimeout: 10 * time.Second,
			Logger:          lg.Named("worker"),
		})
		if err != nil {
			return err
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = w.Run(ctx)
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}
