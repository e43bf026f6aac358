package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"sync"
	"time"

	"github.com/jobfleet/jobfleet/api"
	"github.com/jobfleet/jobfleet/egress"

	"go.uber.org/zap"

	"github.com/jobfleet/jobfleet/dispatch/worker"
	"github.com/jobfleet/jobfleet/internal/httpserver"
	"github.com/jobfleet/jobfleet/internal/orchestrator"
	"github.com/jobfleet/jobfleet/store"
)

// startEchoServer starts `jobfleet dev`'s built-in job receiver: POST
// /echo answers 200 with the body it got; POST /flaky fails attempts 1 and
// 2 and lets the third succeed, so a retrying job is visible in the log
// and the run history. It listens on host:port, the same address on
// every start so that jobs a user aims at it keep working across
// restarts, or on a port of the system's choosing (logged) when that one
// is taken or out of range.
func startEchoServer(lg *zap.Logger, host string, port int, cfg httpserver.Config) (*httpserver.Server, error) {
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
	// The workers call it without credentials, as fast as jobs fire.
	cfg.Name, cfg.Registry, cfg.AnonymousRate = "echo", nil, -1
	if port > 0 && port <= 65535 {
		srv, err := httpserver.Start(net.JoinHostPort(host, strconv.Itoa(port)), mux, cfg)
		if err == nil {
			return srv, nil
		}
		lg.Warn("the echo endpoint's port is taken: listening on another one; jobs aimed at the usual URL fail until it is free at a restart",
			zap.Int("port", port), zap.Error(err))
	}
	return httpserver.Start(net.JoinHostPort(host, "0"), mux, cfg)
}

// exampleJobs are the jobs `jobfleet dev` creates when they are absent:
// one over HTTP every few seconds, one shell job, one that fails twice
// before it succeeds.
func exampleJobs(echoURL string) []api.Job {
	return []api.Job{
		{
			ID:       "example-echo",
			Schedule: "@every 5s",
			Executor: api.Executor{Type: api.ExecutorHTTP, URL: echoURL + "/echo", Method: "POST"},
			Payload:  json.RawMessage(`{"hello":"jobfleet"}`),
		},
		{
			ID:       "example-shell",
			Schedule: "*/10 * * * * *",
			Executor: api.Executor{Type: api.ExecutorShell, Command: []string{"sh", "-c", `echo "hello from $JOBFLEET_JOB_ID, scheduled at $JOBFLEET_SCHEDULED_AT, payload: $(cat)"`}},
			Payload:  json.RawMessage(`{"from":"stdin"}`),
		},
		{
			ID:       "example-flaky",
			Schedule: "@every 30s",
			Executor: api.Executor{Type: api.ExecutorHTTP, URL: echoURL + "/flaky", Method: "POST"},
			Retry:    api.RetryPolicy{MaxAttempts: 3, InitialBackoff: api.Duration(time.Second), MaxBackoff: api.Duration(5 * time.Second)},
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
			storeExamples(ctx, lg, jobs, echoURL)
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

// exampleStore is what storeExamples needs of the job store.
type exampleStore interface {
	Create(ctx context.Context, j api.Job) (api.Job, error)
	Get(ctx context.Context, id string) (api.Job, error)
	Put(ctx context.Context, j api.Job) (api.Job, bool, error)
}

// storeExamples creates the example jobs that are absent. An example that
// exists is the user's: it is kept as it is (paused, edited), except that
// an HTTP example still aimed at the built-in echo endpoint of an earlier
// run, whose port changes on every start, is pointed at this run's; that
// write names the revision read, so it never undoes a concurrent edit.
func storeExamples(ctx context.Context, lg *zap.Logger, jobs exampleStore, echoURL string) {
	for _, j := range exampleJobs(echoURL) {
		_, err := jobs.Create(ctx, j)
		switch {
		case err == nil:
			lg.Info("example job created", zap.String("job_id", j.ID), zap.String("schedule", j.Schedule))
			continue
		case !errors.Is(err, store.ErrExists):
			lg.Warn("creating an example job failed", zap.String("job_id", j.ID), zap.Error(err))
			continue
		}
		old, err := jobs.Get(ctx, j.ID)
		if err != nil {
			lg.Warn("reading an example job failed", zap.String("job_id", j.ID), zap.Error(err))
			continue
		}
		if !staleEchoURL(old.Executor, j.Executor) {
			lg.Info("example job exists; kept as it is", zap.String("job_id", j.ID), zap.Bool("paused", old.Paused))
			continue
		}
		old.Executor.URL = j.Executor.URL
		if _, _, err := jobs.Put(ctx, old); err != nil {
			lg.Warn("pointing an example job at this run's echo endpoint failed", zap.String("job_id", j.ID), zap.Error(err))
			continue
		}
		lg.Info("example job exists; kept, with this run's echo endpoint", zap.String("job_id", j.ID), zap.Bool("paused", old.Paused), zap.String("url", j.Executor.URL))
	}
}

// staleEchoURL reports whether an existing HTTP executor is aimed at the
// echo endpoint of an earlier dev run: the same host and path as the
// example's, another port.
func staleEchoURL(existing, example api.Executor) bool {
	if existing.Type != api.ExecutorHTTP || example.Type != api.ExecutorHTTP || existing.URL == example.URL {
		return false
	}
	was, err1 := url.Parse(existing.URL)
	now, err2 := url.Parse(example.URL)
	return err1 == nil && err2 == nil && was.Scheme == now.Scheme && was.Hostname() == now.Hostname() && was.Path == now.Path && was.RawQuery == ""
}

// runDevWorkers runs n workers until ctx ends, finding the orchestrators
// through src (all members of the fleet, including ones started outside
// dev), and returns when they have shut down.
//
// Their http executor may call loopback (the echo endpoint, receivers a
// developer runs on this machine), but never the fleet's orchestrators nor
// etcd's client (found through src) and peer (fleet) endpoints. They share
// dev's worker credential, token.
func runDevWorkers(ctx context.Context, lg *zap.Logger, n int, src worker.Discovery, fleet []string, token string) error {
	var wg sync.WaitGroup
	errs := make([]error, n)
	for i := range n {
		w, err := worker.New(worker.Config{
			ID:              fmt.Sprintf("worker-%d", i+1),
			Orchestrators:   src,
			ServeHTTP:       true,
			Concurrency:     8,
			AllowShell:      true, // dev runs on the developer's own machine
			ShutdownTimeout: 10 * time.Second,
			HTTPPolicy:      egress.Policy{Allow: []string{"127.0.0.0/8", "::1"}, Fleet: fleet},
			Token:           token,
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
