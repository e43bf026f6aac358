package e2e_test

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"

	jfapi "github.com/jobfleet/jobfleet/api"
	"github.com/jobfleet/jobfleet/dispatch/worker"
	"github.com/jobfleet/jobfleet/internal/testkit/fleettest"
)

// runWorker runs one worker until the test ends.
func runWorker(t *testing.T, cfg worker.Config) {
	t.Helper()
	cfg.ServeHTTP = true // as jobfleet worker does
	cfg.PollWait, cfg.ShutdownTimeout = time.Second, 5*time.Second
	cfg.RetryInitial, cfg.RetryMax = 50*time.Millisecond, 500*time.Millisecond
	cfg.Logger = zaptest.NewLogger(t, zaptest.Level(zap.WarnLevel)).Named(cfg.ID)
	w, err := worker.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() { w.Run(ctx) })
	t.Cleanup(func() { cancel(); wg.Wait() })
}

// TestWorkerRegistryListsWorkersAndExplainsWaitingRuns: workers started
// with a static list of orchestrators (no etcd access) are registered and
// listed by every member; a run no live worker can take says why, and the
// reason follows the workers that register; a worker ID cannot be taken
// over by another credential.
func TestWorkerRegistryListsWorkersAndExplainsWaitingRuns(t *testing.T) {
	f := fleettest.New(t, etcd, fleettest.Options{Partitions: 4, Scheduler: true, Quiet: true})
	f.Join("m1")
	f.Join("m2")
	f.WaitSettled(15 * time.Second)
	urls := f.URLs()
	base := urls[0]

	job := jfapi.Job{ID: "ops/needs-shell", Executor: jfapi.Executor{Type: jfapi.ExecutorShell, Command: []string{"true"}}}
	if code := api(t, f.AdminToken, "POST", base, "/v1/jobs", job, nil); code != http.StatusCreated {
		t.Fatalf("create: %d", code)
	}
	runWorker(t, worker.Config{ID: "w-http", Orchestrators: worker.StaticOrchestrators(urls...), Token: f.WorkerToken, Concurrency: 2})

	// Every member lists it.
	for _, u := range urls {
		var l jfapi.WorkerList
		waitFor(t, 10*time.Second, func() bool {
			return api(t, f.AdminToken, "GET", u, "/v1/cluster/workers", nil, &l) == http.StatusOK && len(l.Workers) == 1
		})
		w := l.Workers[0]
		if w.ID != "w-http" || w.Credential == "" || w.Concurrency != 2 || strings.Join(w.Executors, ",") != "http" || len(w.Orchestrators) != 2 ||
			(w.Orchestrator != "m1" && w.Orchestrator != "m2") || w.RegisteredAt.IsZero() || w.LastContact.Before(w.RegisteredAt) {
			t.Fatalf("%s lists %+v", u, w)
		}
	}

	reason := func() (jfapi.Run, string) {
		var l jfapi.RunList
		api(t, f.AdminToken, "GET", base, "/v1/jobs/"+url.PathEscape(job.ID)+"/runs", nil, &l)
		if len(l.Runs) != 1 {
			return jfapi.Run{}, ""
		}
		var one jfapi.Run
		api(t, f.AdminToken, "GET", base, "/v1/runs/"+url.PathEscape(l.Runs[0].ID), nil, &one)
		if one.Reason != l.Runs[0].Reason {
			return jfapi.Run{}, "" // the registry changed between the two reads: read again
		}
		return l.Runs[0], one.Reason
	}
	want := `no live worker serves executor "shell" (start a worker with --allow-shell)`
	waitFor(t, 10*time.Second, func() bool { _, r := reason(); return r == want })

	// A shell worker limited to another prefix does not help, and the
	// reason says so.
	scoped := f.Token(jfapi.RoleWorker, "billing/")
	runWorker(t, worker.Config{ID: "w-billing", Orchestrators: worker.StaticOrchestrators(urls...), Token: scoped, AllowShell: true})
	want = `no live worker serving executor "shell" accepts jobs under this ID: their credentials are limited to the prefixes "billing/"`
	waitFor(t, 10*time.Second, func() bool { _, r := reason(); return r == want })

	// A viewer scoped to ops/ is told the same without billing's prefix,
	// and lists the workers that may serve its jobs, not billing's.
	opsViewer := f.Token(jfapi.RoleViewer, "ops/")
	var scopedRuns jfapi.RunList
	if code := api(t, opsViewer, "GET", base, "/v1/jobs/"+url.PathEscape(job.ID)+"/runs", nil, &scopedRuns); code != http.StatusOK || len(scopedRuns.Runs) != 1 ||
		scopedRuns.Runs[0].Reason != `no live worker serving executor "shell" accepts jobs under this ID: their credentials are limited to other prefixes` {
		t.Fatalf("runs as a viewer scoped to ops/: %d %+v", code, scopedRuns.Runs)
	}
	listed := func(token string) string {
		var l jfapi.WorkerList
		if code := api(t, token, "GET", base, "/v1/cluster/workers", nil, &l); code != http.StatusOK {
			t.Fatalf("GET /v1/cluster/workers: %d", code)
		}
		var ids []string
		for _, w := range l.Workers {
			ids = append(ids, w.ID)
		}
		return strings.Join(ids, " ")
	}
	billingViewer := f.Token(jfapi.RoleViewer, "billing/eu/")
	for _, tt := range []struct{ who, token, want string }{
		{"admin", f.AdminToken, "w-billing w-http"},
		{"viewer of ops/", opsViewer, "w-http"},
		{"viewer of billing/eu/", billingViewer, "w-billing w-http"},
	} {
		if got := listed(tt.token); got != tt.want {
			t.Errorf("workers listed to the %s: %q, want %q", tt.who, got, tt.want)
		}
	}

	// Another credential cannot take the ID over.
	var e struct{ Error string }
	if code := api(t, scoped, "POST", base, jfapi.PathRegister, jfapi.RegisterRequest{Worker: "w-http", Executors: []string{"shell"}, Concurrency: 1}, &e); code != http.StatusConflict ||
		!strings.Contains(e.Error, `worker ID held by another credential: "w-http" is registered with another credential`) {
		t.Fatalf("register w-http under another credential: %d %q, want 409", code, e.Error)
	}
	if code := api(t, scoped, "POST", base, jfapi.PathPoll, jfapi.PollRequest{Worker: "w-http", Executors: []string{"shell"}, Max: 1}, &e); code != http.StatusConflict {
		t.Fatalf("poll as w-http under another credential: %d %q, want 409", code, e.Error)
	}

	// A worker that can take it does, and the run no longer carries a
	// reason.
	runWorker(t, worker.Config{ID: "w-shell", Orchestrators: worker.StaticOrchestrators(urls...), Token: f.WorkerToken, AllowShell: true})
	waitFor(t, 15*time.Second, func() bool { r, _ := reason(); return r.Status == jfapi.RunSucceeded })
	if r, why := reason(); why != "" || r.Reason != "" || r.Attempts[0].Worker != "w-shell" {
		t.Fatalf("succeeded run: reason %q, attempts %+v", why, r.Attempts)
	}
}
