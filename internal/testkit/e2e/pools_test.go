package e2e_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"

	jfapi "github.com/jobfleet/jobfleet/api"
	"github.com/jobfleet/jobfleet/dispatch/worker"
	"github.com/jobfleet/jobfleet/egress"
	"github.com/jobfleet/jobfleet/internal/testkit/fleettest"
)

// poolWorker is a worker of the tests below, started and stopped at will.
type poolWorker struct {
	id     string
	cancel context.CancelFunc
	done   chan error
}

// startPoolWorker runs a worker (the http executor served, as jobfleet
// worker does, unless cfg says ServeHTTP false through embedded) until
// stop or the end of the test.
func startPoolWorker(t *testing.T, f *fleettest.Fleet, cfg worker.Config, embedded bool) *poolWorker {
	t.Helper()
	cfg.Orchestrators = worker.StaticOrchestrators(f.URLs()...)
	cfg.ServeHTTP = !embedded
	cfg.PollWait, cfg.ShutdownTimeout = time.Second, 5*time.Second
	cfg.RetryInitial, cfg.RetryMax = 50*time.Millisecond, 500*time.Millisecond
	cfg.HTTPPolicy = egress.Policy{Allow: []string{"127.0.0.1"}} // the hook
	if cfg.Logger == nil {
		cfg.Logger = zaptest.NewLogger(t, zaptest.Level(zap.WarnLevel)).Named(cfg.ID)
	}
	w, err := worker.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	pw := &poolWorker{id: cfg.ID, cancel: cancel, done: make(chan error, 1)}
	go func() { pw.done <- w.Run(ctx) }()
	t.Cleanup(pw.stop)
	return pw
}

// stop stops the worker gracefully (it deregisters) and waits for it.
func (w *poolWorker) stop() {
	if w.cancel != nil {
		w.cancel()
		<-w.done
		w.cancel = nil
	}
}

// hook answers the jobs' http executor: 200, or 500 to first attempts on
// /fail-first.
func hook(t *testing.T) *httptest.Server {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/fail-first" && r.Header.Get(worker.HeaderAttempt) == "1" {
			http.Error(w, "first attempts fail here", http.StatusInternalServerError)
			return
		}
		fmt.Fprintln(w, "ok")
	}))
	t.Cleanup(srv.Close)
	return srv
}

func createJob(t *testing.T, f *fleettest.Fleet, j jfapi.Job) {
	t.Helper()
	if code := api(t, f.AdminToken, "POST", f.URLs()[0], "/v1/jobs", j, nil); code != http.StatusCreated {
		t.Fatalf("create %s: status %d", j.ID, code)
	}
}

func placed(selector string) *jfapi.PlacementPolicy {
	return &jfapi.PlacementPolicy{Selector: selector}
}

// TestPoolsRunOnlyOnTheirWorkers: gpu jobs run only on gpu workers, cpu
// jobs only on cpu workers, and jobs without a selector on any, while
// workers of both pools come and go; every recorded attempt is checked.
// Workers hold credentials limited to their pool's labels: a cpu
// credential cannot register a worker claiming the gpu pool (the worker
// stops, saying why), and a gpu credential is refused registering pool=cpu
// (403 naming the rule).
func TestPoolsRunOnlyOnTheirWorkers(t *testing.T) {
	t.Parallel()
	f := fleettest.New(t, etcd, fleettest.Options{Partitions: 8, Scheduler: true, Quiet: true})
	f.Join("m1")
	f.Join("m2")
	f.WaitSettled(15 * time.Second)
	base := f.URLs()[0]
	rcv := hook(t)
	gpuTok := f.TokenFor(jfapi.CreateRequest{Role: jfapi.RoleWorker, WorkerLabels: "pool=gpu"})
	cpuTok := f.TokenFor(jfapi.CreateRequest{Role: jfapi.RoleWorker, WorkerLabels: "pool in (cpu)"})

	// Refusals first: nothing runs on them.
	var e struct{ Error string }
	if code := api(t, gpuTok, "POST", base, jfapi.PathRegister, jfapi.RegisterRequest{Worker: "w-sneaky", Executors: []string{"http"}, Concurrency: 1, Labels: map[string]string{"pool": "cpu"}}, &e); code != http.StatusForbidden ||
		!strings.Contains(e.Error, `only with labels matching "pool=gpu"`) || !strings.Contains(e.Error, "pool=cpu") {
		t.Fatalf("a gpu credential registering pool=cpu: %d %q; want 403 naming the rule", code, e.Error)
	}
	evil := startPoolWorker(t, f, worker.Config{ID: "w-evil", Token: cpuTok, Labels: map[string]string{"pool": "gpu"}}, false)
	select {
	case err := <-evil.done:
		evil.cancel = nil
		if !errors.Is(err, worker.ErrLabelsRefused) || !strings.Contains(err.Error(), `"pool in (cpu)"`) {
			t.Fatalf("a worker claiming pool=gpu with a cpu credential ended with %v; want ErrLabelsRefused naming its credential's labels", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("a worker claiming pool=gpu with a cpu credential still runs after 20s")
	}

	gpu := []string{"gpu-1", "gpu-2"}
	cpu := []string{"cpu-1", "cpu-2"}
	start := func(id string) *poolWorker {
		tok, pool := cpuTok, "cpu"
		if strings.HasPrefix(id, "gpu") {
			tok, pool = gpuTok, "gpu"
		}
		return startPoolWorker(t, f, worker.Config{ID: id, Token: tok, Concurrency: 4, Labels: map[string]string{"pool": pool, "host": id}}, false)
	}
	running := map[string]*poolWorker{"gpu-1": start("gpu-1"), "cpu-1": start("cpu-1")}
	var ids []string
	for i := range 3 {
		for _, pool := range []string{"gpu", "cpu"} {
			id := fmt.Sprintf("%s/job-%d", pool, i)
			ids = append(ids, id)
			createJob(t, f, jfapi.Job{ID: id, Schedule: "@every 1s", Executor: jfapi.Executor{Type: "http", URL: rcv.URL + "/ok"}, Placement: placed("pool=" + pool)})
		}
	}
	ids = append(ids, "any/job")
	createJob(t, f, jfapi.Job{ID: "any/job", Schedule: "@every 1s", Executor: jfapi.Executor{Type: "http", URL: rcv.URL + "/ok"}})

	// Workers come and go; each pool keeps one worker at least.
	for _, step := range []struct{ start, stop string }{{"gpu-2", ""}, {"cpu-2", "cpu-1"}, {"", "gpu-1"}, {"cpu-1", "cpu-2"}, {"gpu-1", "gpu-2"}} {
		time.Sleep(1500 * time.Millisecond) // let a few fires run on the current workers
		if step.start != "" {
			running[step.start] = start(step.start)
		}
		if step.stop != "" {
			running[step.stop].stop()
			delete(running, step.stop)
		}
	}
	time.Sleep(1500 * time.Millisecond)

	all := settleRuns(t, f, ids)
	ranOn := map[string]map[string]bool{}
	for id, runs := range all {
		pool := strings.Split(id, "/")[0]
		ranOn[pool] = map[string]bool{}
		for _, r := range runs {
			if r.Status != jfapi.RunSucceeded {
				t.Errorf("run %s ended %s: %+v", r.ID, r.Status, r.Attempts)
			}
			for _, a := range r.Attempts {
				ranOn[pool][a.Worker] = true
				switch {
				case pool == "gpu" && !slices.Contains(gpu, a.Worker), pool == "cpu" && !slices.Contains(cpu, a.Worker):
					t.Errorf("attempt %d of %s ran on %s, not a %s worker", a.Attempt, r.ID, a.Worker, pool)
				case a.Worker == "w-evil":
					t.Errorf("attempt %d of %s ran on the refused worker", a.Attempt, r.ID)
				}
			}
		}
	}
	// The churn was real: each pool's runs went to both of its workers.
	for pool, want := range map[string][]string{"gpu": gpu, "cpu": cpu} {
		for _, w := range want {
			if !ranOn[pool][w] {
				t.Errorf("no %s run ran on %s (ran on %v)", pool, w, ranOn[pool])
			}
		}
	}

	// The registry lists the workers with their labels, and filters them.
	var l jfapi.WorkerList
	if code := api(t, f.AdminToken, "GET", base, "/v1/cluster/workers?selector="+url.QueryEscape("pool=gpu"), nil, &l); code != http.StatusOK {
		t.Fatalf("workers of pool=gpu: %d", code)
	}
	for _, w := range l.Workers {
		if w.Labels["pool"] != "gpu" || !slices.Contains(gpu, w.ID) {
			t.Errorf("GET /v1/cluster/workers?selector=pool=gpu lists %s with %v", w.ID, w.Labels)
		}
	}
}

// TestUnplaceableRunWaitsWithItsReason: a run whose selector no live
// worker matches waits, says so, and is counted by the owner's
// jobfleet_runs_unplaceable, until a matching worker comes; then it runs.
func TestUnplaceableRunWaitsWithItsReason(t *testing.T) {
	f := fleettest.New(t, etcd, fleettest.Options{Partitions: 4, Scheduler: true, Quiet: true})
	f.Join("m1")
	f.Join("m2")
	f.WaitSettled(15 * time.Second)
	base := f.URLs()[0]
	rcv := hook(t)
	startPoolWorker(t, f, worker.Config{ID: "w-gpu", Token: f.WorkerToken, Labels: map[string]string{"pool": "gpu"}}, false)
	createJob(t, f, jfapi.Job{ID: "train", Executor: jfapi.Executor{Type: "http", URL: rcv.URL + "/ok"}, Placement: placed("pool=tpu")})

	reason := func() (jfapi.Run, bool) {
		var l jfapi.RunList
		api(t, f.AdminToken, "GET", base, "/v1/jobs/train/runs", nil, &l)
		if len(l.Runs) != 1 {
			return jfapi.Run{}, false
		}
		return l.Runs[0], true
	}
	waitFor(t, 15*time.Second, func() bool {
		r, ok := reason()
		return ok && r.Status == jfapi.RunPending && strings.HasPrefix(r.Reason, "no live worker matches pool=tpu")
	})
	unplaceable := func() float64 {
		sum := 0.0
		for _, id := range f.Live() {
			mfs, err := f.Member(id).Metrics.Gather()
			if err != nil {
				t.Fatal(err)
			}
			for _, mf := range mfs {
				if mf.GetName() == "jobfleet_runs_unplaceable" {
					sum += mf.GetMetric()[0].GetGauge().GetValue()
				}
			}
		}
		return sum
	}
	waitFor(t, 10*time.Second, func() bool { return unplaceable() == 1 })

	startPoolWorker(t, f, worker.Config{ID: "w-tpu", Token: f.WorkerToken, Labels: map[string]string{"pool": "tpu"}}, false)
	waitFor(t, 15*time.Second, func() bool { r, _ := reason(); return r.Status == jfapi.RunSucceeded })
	if r, _ := reason(); r.Attempts[0].Worker != "w-tpu" || r.Reason != "" {
		t.Fatalf("the run ran on %s with reason %q; want w-tpu, and no reason", r.Attempts[0].Worker, r.Reason)
	}
	waitFor(t, 10*time.Second, func() bool { return unplaceable() == 0 })
}

// TestRetriesGoToAnotherWorker: with two workers of a pool, every retry
// of a failed attempt runs on the other worker; with retry_elsewhere
// false, retries go to either.
func TestRetriesGoToAnotherWorker(t *testing.T) {
	t.Parallel()
	f := fleettest.New(t, etcd, fleettest.Options{Partitions: 4, Scheduler: true, Quiet: true, RunLease: 10 * time.Second})
	f.Join("m1")
	f.WaitSettled(15 * time.Second)
	rcv := hook(t)
	for _, id := range []string{"w-a", "w-b"} {
		startPoolWorker(t, f, worker.Config{ID: id, Token: f.WorkerToken, Concurrency: 8, Labels: map[string]string{"pool": "p"}}, false)
	}
	retry := jfapi.RetryPolicy{MaxAttempts: 3, InitialBackoff: jfapi.Duration(10 * time.Millisecond)}
	var ids []string
	for i := range 4 {
		id := fmt.Sprintf("flaky-%d", i)
		ids = append(ids, id)
		createJob(t, f, jfapi.Job{ID: id, Schedule: "@every 1s", Executor: jfapi.Executor{Type: "http", URL: rcv.URL + "/fail-first"}, Retry: retry, Placement: placed("pool=p")})
	}
	time.Sleep(4 * time.Second)
	all := settleRuns(t, f, ids)
	retried := 0
	for _, runs := range all {
		for _, r := range runs {
			if r.Status != jfapi.RunSucceeded || len(r.Attempts) != 2 {
				t.Errorf("run %s: %s after %d attempts, want succeeded after 2", r.ID, r.Status, len(r.Attempts))
				continue
			}
			retried++
			if r.Attempts[0].Worker == r.Attempts[1].Worker {
				t.Errorf("run %s: its retry ran on %s, the worker whose attempt failed", r.ID, r.Attempts[1].Worker)
			}
		}
	}
	if retried < 4 {
		t.Fatalf("%d runs retried, want some of every job", retried)
	}
}

// TestEmbeddedWorkerTakesOnlyItsHandlers: a program embedding the worker
// library for its own handler takes none of the fleet's http runs; a
// worker serving http takes them, and the registry says what each
// serves.
func TestEmbeddedWorkerTakesOnlyItsHandlers(t *testing.T) {
	f := fleettest.New(t, etcd, fleettest.Options{Partitions: 4, Scheduler: true, Quiet: true})
	f.Join("m1")
	f.Join("m2")
	f.WaitSettled(15 * time.Second)
	base := f.URLs()[0]
	rcv := hook(t)
	var mu sync.Mutex
	invoices := 0
	// Embedded without a handler, a worker serves nothing: Run says so.
	idle := startPoolWorker(t, f, worker.Config{ID: "billing-1", Token: f.WorkerToken, Concurrency: 8}, true)
	if err := <-idle.done; !errors.Is(err, worker.ErrNothingToServe) {
		t.Fatalf("Run of an embedded worker without handlers = %v, want ErrNothingToServe", err)
	}
	idle.cancel()
	idle.cancel = nil
	// Handlers are registered before Run: start it by hand.
	w, err := worker.New(worker.Config{ID: "billing-2", Token: f.WorkerToken, Orchestrators: worker.StaticOrchestrators(f.URLs()...), PollWait: time.Second,
		RetryInitial: 50 * time.Millisecond, RetryMax: 500 * time.Millisecond, Logger: zaptest.NewLogger(t, zaptest.Level(zap.WarnLevel))})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Handle("send-invoice", func(context.Context, worker.Run) error { mu.Lock(); invoices++; mu.Unlock(); return nil }); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })

	createJob(t, f, jfapi.Job{ID: "invoices", Schedule: "@every 1s", Executor: jfapi.Executor{Type: "send-invoice"}})
	createJob(t, f, jfapi.Job{ID: "other-team/hook", Schedule: "@every 1s", Executor: jfapi.Executor{Type: "http", URL: rcv.URL + "/ok"}})
	// Only the embedded workers are up: the http runs wait, and say why.
	waitFor(t, 15*time.Second, func() bool {
		var l jfapi.RunList
		api(t, f.AdminToken, "GET", base, "/v1/jobs/"+url.PathEscape("other-team/hook")+"/runs", nil, &l)
		return len(l.Runs) > 0 && l.Runs[len(l.Runs)-1].Reason == `no live worker serves executor "http"`
	})
	startPoolWorker(t, f, worker.Config{ID: "w-http", Token: f.WorkerToken}, false)
	time.Sleep(3 * time.Second)
	all := settleRuns(t, f, []string{"invoices", "other-team/hook"})
	for id, runs := range all {
		for _, r := range runs {
			if r.Status != jfapi.RunSucceeded {
				t.Errorf("run %s ended %s", r.ID, r.Status)
			}
			for _, a := range r.Attempts {
				if (id == "invoices") != (a.Worker == "billing-2") {
					t.Errorf("attempt %d of %s ran on %s", a.Attempt, r.ID, a.Worker)
				}
			}
		}
	}
	mu.Lock()
	n := invoices
	mu.Unlock()
	if n == 0 {
		t.Error("the handler never ran")
	}
	var l jfapi.WorkerList
	api(t, f.AdminToken, "GET", base, "/v1/cluster/workers", nil, &l)
	serves := map[string]string{}
	for _, w := range l.Workers {
		serves[w.ID] = strings.Join(w.Executors, ",")
	}
	if serves["billing-2"] != "send-invoice" || serves["w-http"] != "http" {
		t.Errorf("the registry says the workers serve %v", serves)
	}
	if _, ok := serves["billing-1"]; ok {
		t.Errorf("billing-1, which serves nothing, is registered: %v", serves)
	}
}
