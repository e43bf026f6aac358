package e2e_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"

	jfapi "github.com/jobfleet/jobfleet/api"
	"github.com/jobfleet/jobfleet/dispatch/worker"
	"github.com/jobfleet/jobfleet/internal/testkit/fleettest"
)

// intervals records, on the workers' side, when each execution started
// and ended: what invariant 13 counts.
type intervals struct {
	mu   sync.Mutex
	open map[string]time.Time // by run and attempt
	done [][2]time.Time
	runs map[string]bool // runs that succeeded
}

func newIntervals() *intervals {
	return &intervals{open: map[string]time.Time{}, runs: map[string]bool{}}
}

// handler returns a handler that records its execution and runs for d,
// or until its context ends (then it fails).
func (iv *intervals) handler(d time.Duration) worker.Handler {
	return func(ctx context.Context, r worker.Run) error {
		id := fmt.Sprintf("%s#%d", r.RunID, r.Attempt)
		iv.mu.Lock()
		iv.open[id] = time.Now()
		iv.mu.Unlock()
		var err error
		if d < 0 {
			<-ctx.Done()
			err = ctx.Err()
		} else {
			select {
			case <-time.After(d):
			case <-ctx.Done():
				err = ctx.Err()
			}
		}
		iv.mu.Lock()
		iv.done = append(iv.done, [2]time.Time{iv.open[id], time.Now()})
		delete(iv.open, id)
		if err == nil {
			iv.runs[r.RunID] = true
		}
		iv.mu.Unlock()
		return err
	}
}

// maxOverlap returns the most executions running at one instant, counting
// those still open as running now.
func (iv *intervals) maxOverlap() int {
	iv.mu.Lock()
	defer iv.mu.Unlock()
	type ev struct {
		at    time.Time
		delta int
	}
	var evs []ev
	for _, d := range iv.done {
		evs = append(evs, ev{d[0], 1}, ev{d[1], -1})
	}
	for _, s := range iv.open {
		evs = append(evs, ev{s, 1})
	}
	slices.SortFunc(evs, func(a, b ev) int {
		if c := a.at.Compare(b.at); c != 0 {
			return c
		}
		return a.delta - b.delta // an end before a start at the same instant
	})
	cur, most := 0, 0
	for _, e := range evs {
		cur += e.delta
		most = max(most, cur)
	}
	return most
}

func (iv *intervals) succeeded() int {
	iv.mu.Lock()
	defer iv.mu.Unlock()
	return len(iv.runs)
}

// runHandlerWorker runs a worker of handler "report" until the test ends;
// transport, if set, carries its requests.
func runHandlerWorker(t *testing.T, id string, urls []string, token string, h worker.Handler, transport http.RoundTripper) {
	t.Helper()
	cfg := worker.Config{ID: id, Orchestrators: worker.StaticOrchestrators(urls...), Token: token, Concurrency: 4,
		PollWait: time.Second, ShutdownTimeout: 5 * time.Second, CancelGrace: 100 * time.Millisecond, RequestTimeout: 500 * time.Millisecond,
		RetryInitial: 50 * time.Millisecond, RetryMax: 300 * time.Millisecond,
		Logger: zaptest.NewLogger(t, zaptest.Level(zap.WarnLevel)).Named(id)}
	if transport != nil {
		cfg.HTTPClient = &http.Client{Transport: transport}
	}
	w, err := worker.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Handle("report", h); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() { w.Run(ctx) })
	t.Cleanup(func() { cancel(); wg.Wait() })
}

func putLimit(t *testing.T, f *fleettest.Fleet, base, key, doc string) {
	t.Helper()
	var l jfapi.Limit
	if code := api(t, f.AdminToken, "PUT", base, "/v1/limits/"+key, json.RawMessage(doc), &l); code != http.StatusCreated && code != http.StatusOK {
		t.Fatalf("PUT limit %s: %d", key, code)
	}
}

// TestLimitHoldsAcrossAMemberCrash: 40 jobs on one key of max_running 3,
// executed by four workers of four slots each over three members, one of
// which crashes midway: never more than 3 execute at once, counted on
// the workers' side, and every run succeeds.
func TestLimitHoldsAcrossAMemberCrash(t *testing.T) {
	t.Parallel()
	f := fleettest.New(t, etcd, fleettest.Options{Partitions: 8, Scheduler: true, RunLease: 2 * time.Second, Quiet: true})
	for _, m := range []string{"m1", "m2", "m3"} {
		f.Join(m)
	}
	f.WaitSettled(15 * time.Second)
	urls := f.URLs()
	base := urls[0]
	putLimit(t, f, base, "billing-db", `{"max_running": 3}`)
	iv := newIntervals()
	for i := range 4 {
		runHandlerWorker(t, fmt.Sprintf("w%d", i), urls, f.WorkerToken, iv.handler(100*time.Millisecond), nil)
	}
	const jobs = 40
	for i := range jobs {
		j := jfapi.Job{ID: fmt.Sprintf("report-%02d", i), Executor: jfapi.Executor{Type: "report"}, Limits: []string{"billing-db"},
			Retry: jfapi.RetryPolicy{MaxAttempts: 10, InitialBackoff: jfapi.Duration(50 * time.Millisecond)}}
		if code := api(t, f.AdminToken, "POST", base, "/v1/jobs", j, nil); code != http.StatusCreated {
			t.Fatalf("create %s: %d", j.ID, code)
		}
	}
	waitFor(t, 60*time.Second, func() bool { return iv.succeeded() >= jobs/4 })
	f.Crash("m2")
	waitFor(t, 120*time.Second, func() bool { return iv.succeeded() == jobs })
	if got := iv.maxOverlap(); got > 3 {
		t.Fatalf("%d executions of billing-db ran at once; max_running is 3", got)
	} else {
		t.Logf("at most %d executions at once (max_running 3)", got)
	}
	// Every slot is given back once the runs ended.
	var l jfapi.Limit
	waitFor(t, 20*time.Second, func() bool {
		return api(t, f.AdminToken, "GET", f.URLs()[0], "/v1/limits/billing-db", nil, &l) == http.StatusOK && l.Status != nil && l.Status.Running == 0
	})
}

// TestKilledWorkersSlotIsFreed: the worker holding the only slot of a key
// is cut off (its requests fail from then on): it stops the execution
// once no heartbeat succeeded for a run lease, the owner frees the slot a
// run lease after the attempt is lost, and another worker runs the retry;
// the two executions never overlap.
func TestKilledWorkersSlotIsFreed(t *testing.T) {
	f := fleettest.New(t, etcd, fleettest.Options{Partitions: 4, Scheduler: true, RunLease: 2 * time.Second, Quiet: true})
	f.Join("m1")
	f.WaitSettled(15 * time.Second)
	base := f.URLs()[0]
	putLimit(t, f, base, "one", `{"max_running": 1}`)
	iv := newIntervals()
	var dead atomic.Bool
	runHandlerWorker(t, "doomed", []string{base}, f.WorkerToken, iv.handler(-1), &killableTransport{dead: &dead, next: http.DefaultTransport})
	t.Cleanup(func() { dead.Store(false) }) // before the worker stops: it deregisters at once
	j := jfapi.Job{ID: "hold", Executor: jfapi.Executor{Type: "report"}, Limits: []string{"one"},
		Retry: jfapi.RetryPolicy{MaxAttempts: 3, InitialBackoff: jfapi.Duration(50 * time.Millisecond)}}
	if code := api(t, f.AdminToken, "POST", base, "/v1/jobs", j, nil); code != http.StatusCreated {
		t.Fatalf("create: %d", code)
	}
	waitFor(t, 10*time.Second, func() bool {
		runs := runsOf(t, f.AdminToken, base, "hold")
		return len(runs) == 1 && runs[0].Status == jfapi.RunRunning
	})
	// A second job on the key waits, and says for what.
	j2 := j
	j2.ID = "hold-2"
	if code := api(t, f.AdminToken, "POST", base, "/v1/jobs", j2, nil); code != http.StatusCreated {
		t.Fatalf("create: %d", code)
	}
	want := `waiting for limit key "one"`
	waitFor(t, 10*time.Second, func() bool {
		runs := runsOf(t, f.AdminToken, base, "hold-2")
		return len(runs) == 1 && strings.Contains(runs[0].Reason, want)
	})
	var l jfapi.Limit
	if code := api(t, f.AdminToken, "GET", base, "/v1/limits/one", nil, &l); code != http.StatusOK || l.Status == nil || l.Status.Running != 1 || l.Status.Waiting != 1 {
		t.Fatalf("GET /v1/limits/one: %d %+v, want 1 running and 1 waiting", code, l.Status)
	}
	dead.Store(true)
	killed := time.Now()
	runHandlerWorker(t, "rescuer", []string{base}, f.WorkerToken, iv.handler(50*time.Millisecond), nil)
	waitFor(t, 30*time.Second, func() bool { return iv.succeeded() == 2 })
	t.Logf("slot taken again %v after the worker was cut off (run lease 2s)", time.Since(killed).Round(100*time.Millisecond))
	if got := iv.maxOverlap(); got > 1 {
		t.Fatalf("%d executions held the key at once; max_running is 1", got)
	}
	// The handler's end is recorded before the worker's report is.
	waitFor(t, 10*time.Second, func() bool {
		runs := runsOf(t, f.AdminToken, base, "hold")
		return len(runs) == 1 && runs[0].Status.Final()
	})
	runs := runsOf(t, f.AdminToken, base, "hold")
	if len(runs) != 1 || runs[0].Status != jfapi.RunSucceeded || len(runs[0].Attempts) != 2 || runs[0].Attempts[1].Worker != "rescuer" {
		t.Fatalf("runs %+v, want attempt 1 lost and attempt 2 by the rescuer", runs)
	}
}

// TestRateLimitNeverExceeded: a key of 4 starts per 2s over 12 jobs: no
// window of 2s holds more than 4 starts, as the grants record them.
func TestRateLimitNeverExceeded(t *testing.T) {
	f := fleettest.New(t, etcd, fleettest.Options{Partitions: 4, Scheduler: true, Quiet: true})
	f.Join("m1")
	f.Join("m2")
	f.WaitSettled(15 * time.Second)
	urls := f.URLs()
	putLimit(t, f, urls[0], "partner-api", `{"rate": {"count": 4, "per": "2s"}}`)
	iv := newIntervals()
	runHandlerWorker(t, "w0", urls, f.WorkerToken, iv.handler(10*time.Millisecond), nil)
	runHandlerWorker(t, "w1", urls, f.WorkerToken, iv.handler(10*time.Millisecond), nil)
	const jobs = 12
	for i := range jobs {
		j := jfapi.Job{ID: fmt.Sprintf("call-%02d", i), Executor: jfapi.Executor{Type: "report"}, Limits: []string{"partner-api"}}
		if code := api(t, f.AdminToken, "POST", urls[0], "/v1/jobs", j, nil); code != http.StatusCreated {
			t.Fatalf("create %s: %d", j.ID, code)
		}
	}
	waitFor(t, 60*time.Second, func() bool { return iv.succeeded() == jobs })
	var starts []time.Time
	for i := range jobs {
		for _, r := range runsOf(t, f.AdminToken, urls[0], fmt.Sprintf("call-%02d", i)) {
			for _, a := range r.Attempts {
				starts = append(starts, a.StartedAt)
			}
		}
	}
	slices.SortFunc(starts, time.Time.Compare)
	for i := range starts {
		if i+4 < len(starts) && starts[i+4].Sub(starts[i]) < 2*time.Second {
			t.Fatalf("starts %d to %d within %v: more than 4 in a window of 2s: %v", i, i+4, starts[i+4].Sub(starts[i]), starts)
		}
	}
}
