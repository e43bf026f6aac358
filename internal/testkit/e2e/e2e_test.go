package e2e_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	jfapi "github.com/jobfleet/jobfleet/api"

	"github.com/jobfleet/jobfleet/egress"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"

	"github.com/jobfleet/jobfleet/dispatch/worker"
	"github.com/jobfleet/jobfleet/internal/testkit/etcdtest"
	"github.com/jobfleet/jobfleet/internal/testkit/fleettest"
	"github.com/jobfleet/jobfleet/internal/testkit/metrictest"
)

var etcd *etcdtest.Server

func TestMain(m *testing.M) {
	os.Exit(etcdtest.Main(m, &etcd, etcdtest.KeepAliveLeaks()...))
}

// execution is one request the receiver got.
type execution struct {
	job, run, scheduledAt, attempt, body string
}

// receiver is the jobs' HTTP endpoint: it records every execution and
// answers with the status fail(execution) returns (200 if nil).
type receiver struct {
	srv  *httptest.Server
	mu   sync.Mutex
	seen []execution
	fail func(execution) int
}

// unescapeJobID decodes the Jobfleet-Job-Id header (percent-encoded like
// run IDs).
func unescapeJobID(t *testing.T, h string) string {
	id, err := jfapi.UnescapeID(h)
	if err != nil {
		t.Errorf("Jobfleet-Job-Id %q: %v", h, err)
		return h
	}
	return id
}

func newReceiver(t *testing.T) *receiver {
	r := &receiver{}
	r.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		e := execution{
			job:         unescapeJobID(t, req.Header.Get(worker.HeaderJobID)),
			run:         req.Header.Get(worker.HeaderRunID),
			scheduledAt: req.Header.Get(worker.HeaderScheduledAt),
			attempt:     req.Header.Get(worker.HeaderAttempt),
		}
		body, _ := io.ReadAll(req.Body)
		e.body = string(body)
		r.mu.Lock()
		r.seen = append(r.seen, e)
		fail := r.fail
		r.mu.Unlock()
		if fail != nil {
			if code := fail(e); code != 0 {
				w.WriteHeader(code)
				return
			}
		}
		w.WriteHeader(http.StatusOK)
	}))
	t.Cleanup(r.srv.Close)
	return r
}

func (r *receiver) executions() []execution {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.seen)
}

// startWorkers runs n workers polling urls with credential token until
// the test ends.
func startWorkers(t *testing.T, n int, urls []string, token string, lg *zap.Logger) {
	t.Helper()
	startWorkersNamed(t, "w", n, urls, token, lg)
}

// startWorkersNamed is startWorkers of workers named prefix1…prefixN.
func startWorkersNamed(t *testing.T, prefix string, n int, urls []string, token string, lg *zap.Logger) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for i := range n {
		w, err := worker.New(worker.Config{
			ID:              fmt.Sprintf("%s%d", prefix, i+1),
			Orchestrators:   worker.StaticOrchestrators(urls...),
			ServeHTTP:       true,
			Token:           token,
			Concurrency:     8,
			PollWait:        2 * time.Second,
			ShutdownTimeout: 5 * time.Second,
			RetryInitial:    50 * time.Millisecond,
			RetryMax:        500 * time.Millisecond,
			Logger:          lg.Named(fmt.Sprintf("%s%d", prefix, i+1)),
			HTTPPolicy:      egress.Policy{Allow: []string{"127.0.0.1"}}, // the receiver
		})
		if err != nil {
			t.Fatal(err)
		}
		wg.Add(1)
		go func() { defer wg.Done(); w.Run(ctx) }()
	}
	t.Cleanup(func() { cancel(); wg.Wait() })
}

// api calls a member's HTTP API with credential tok.
func api(t *testing.T, tok, method, base, path string, body any, out any) int {
	t.Helper()
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	}
	req, _ := http.NewRequest(method, base+path, rd)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if tok != "" {
		req.Header.Set("Authorization", "Bearer "+tok)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	if out != nil {
		json.NewDecoder(resp.Body).Decode(out)
	}
	return resp.StatusCode
}

func createEverySecond(t *testing.T, tok, base, id, hook string, extra func(*jfapi.Job)) {
	t.Helper()
	j := jfapi.Job{ID: id, Schedule: "@every 1s", Executor: jfapi.Executor{Type: "http", URL: hook}}
	if extra != nil {
		extra(&j)
	}
	if code := api(t, tok, "POST", base, "/v1/jobs", j, nil); code != http.StatusCreated {
		t.Fatalf("create %s: status %d", id, code)
	}
}

func runsOf(t *testing.T, tok, base, id string) []jfapi.Run {
	t.Helper()
	var out struct{ Runs []jfapi.Run }
	if code := api(t, tok, "GET", base, "/v1/jobs/"+url.PathEscape(id)+"/runs?limit=1000", nil, &out); code != http.StatusOK {
		t.Fatalf("runs of %s: status %d", id, code)
	}
	return out.Runs
}

// finalRuns creates jobs through base and waits until each has one run,
// final; it returns those runs by job ID.
func finalRuns(t *testing.T, f *fleettest.Fleet, base string, jobs []jfapi.Job) map[string]jfapi.Run {
	t.Helper()
	for _, j := range jobs {
		if code := api(t, f.AdminToken, "POST", base, "/v1/jobs", j, nil); code != http.StatusCreated {
			t.Fatalf("create %s: status %d", j.ID, code)
		}
	}
	final := map[string]jfapi.Run{}
	waitFor(t, 20*time.Second, func() bool {
		for _, j := range jobs {
			if runs := runsOf(t, f.AdminToken, base, j.ID); len(runs) == 1 && runs[0].Status.Final() {
				final[j.ID] = runs[0]
			}
		}
		return len(final) == len(jobs)
	})
	return final
}

// settleRuns pauses the jobs, then waits until every run is final, and
// returns each job's runs oldest first.
func settleRuns(t *testing.T, f *fleettest.Fleet, ids []string) map[string][]jfapi.Run {
	t.Helper()
	base := f.URLs()[0]
	for _, id := range ids {
		if code := api(t, f.AdminToken, "POST", base, "/v1/jobs/"+url.PathEscape(id)+"/pause", nil, nil); code != http.StatusOK {
			t.Fatalf("pause %s: status %d", id, code)
		}
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		all := map[string][]jfapi.Run{}
		open := 0
		for _, id := range ids {
			runs := runsOf(t, f.AdminToken, base, id)
			slices.Reverse(runs)
			all[id] = runs
			for _, r := range runs {
				if !r.Status.Final() {
					open++
				}
			}
		}
		if open == 0 {
			return all
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d runs still not final after 30s", open)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// checkExactlyOnce asserts: every job's runs are distinct, consecutive
// scheduled seconds (none fired twice, none lost), all succeeded; and the
// receiver saw no attempt of any run twice.
func checkExactlyOnce(t *testing.T, all map[string][]jfapi.Run, rcv *receiver, minRuns int) {
	t.Helper()
	for id, runs := range all {
		if len(runs) < minRuns {
			t.Errorf("job %s: %d runs, want at least %d", id, len(runs), minRuns)
		}
		for i, r := range runs {
			if r.Status != jfapi.RunSucceeded {
				t.Errorf("job %s: run %s ended %s (%+v)", id, r.ID, r.Status, r.Attempts)
			}
			if i > 0 {
				if gap := r.ScheduledAt.Sub(runs[i-1].ScheduledAt); gap != time.Second {
					t.Errorf("job %s: runs %s and %s are %v apart, want 1s (a fire lost or doubled)", id, runs[i-1].ID, r.ID, gap)
				}
			}
		}
	}
	perAttempt := map[string]int{}
	for _, e := range rcv.executions() {
		perAttempt[e.run+"#"+e.attempt]++
	}
	for k, n := range perAttempt {
		if n > 1 {
			t.Errorf("attempt %s executed %d times", k, n)
		}
	}
}

func TestJobsEverySecondAcrossTheFleet(t *testing.T) {
	f := fleettest.New(t, etcd, fleettest.Options{Partitions: 16, Scheduler: true, Quiet: true})
	for i := 1; i <= 3; i++ {
		f.Join(fmt.Sprintf("m%d", i))
	}
	f.WaitSettled(15 * time.Second)
	rcv := newReceiver(t)
	startWorkers(t, 2, f.URLs(), f.WorkerToken, zaptest.NewLogger(t, zaptest.Level(zap.WarnLevel)))
	ids := []string{"a", "b b", "c/c", "ü", "e"}
	for i, id := range ids {
		createEverySecond(t, f.AdminToken, f.URLs()[i%3], id, rcv.srv.URL, func(j *jfapi.Job) {
			j.Payload = json.RawMessage(`{"job": "payload",  "n": [1, 2]}`)
		})
	}
	time.Sleep(4 * time.Second) // the workload: four seconds of fires
	all := settleRuns(t, f, ids)
	checkExactlyOnce(t, all, rcv, 3)
	for _, runs := range all {
		for _, r := range runs {
			if len(r.Attempts) != 1 {
				t.Errorf("run %s took %d attempts, want 1 (no failure was injected)", r.ID, len(r.Attempts))
			}
		}
	}
	for _, e := range rcv.executions() {
		if want := `{"job":"payload","n":[1,2]}`; e.body != want {
			t.Fatalf("receiver got body %q, want the payload %q", e.body, want)
		}
		if _, err := time.Parse("2006-01-02T15:04:05.000Z", e.scheduledAt); err != nil {
			t.Fatalf("Jobfleet-Scheduled-At %q: %v", e.scheduledAt, err)
		}
	}
	// History is queryable through any member.
	var one jfapi.Run
	r := all["c/c"][0]
	if code := api(t, f.AdminToken, "GET", f.URLs()[2], "/v1/runs/"+url.PathEscape(r.ID), nil, &one); code != http.StatusOK || one.ID != r.ID || len(one.Attempts) != 1 {
		t.Fatalf("GET /v1/runs/%s: %d %+v", r.ID, code, one)
	}
}

func TestJobsSurviveGracefulLeaveAndCrash(t *testing.T) {
	t.Parallel()
	jobsSurviveGracefulLeaveAndCrash(t, false)
}

// TestJobsSurviveGracefulLeaveAndCrashWithWarmStandby: the same with
// every member keeping standby copies; the members that take the
// partitions over build some of them from their copies.
func TestJobsSurviveGracefulLeaveAndCrashWithWarmStandby(t *testing.T) {
	t.Parallel()
	jobsSurviveGracefulLeaveAndCrash(t, true)
}

// fourMembersSixJobs starts a fleet of four members (16 partitions,
// standby copies if warm) with two workers, and six jobs due every second
// reporting to rcv; it returns once they have fired for 2 s.
func fourMembersSixJobs(t *testing.T, warm bool) (*fleettest.Fleet, *receiver, []string) {
	t.Helper()
	f := fleettest.New(t, etcd, fleettest.Options{Partitions: 16, Scheduler: true, Quiet: true, WarmStandby: warm})
	for i := 1; i <= 4; i++ {
		f.Join(fmt.Sprintf("m%d", i))
	}
	f.WaitSettled(15 * time.Second)
	rcv := newReceiver(t)
	startWorkers(t, 2, f.URLs(), f.WorkerToken, zaptest.NewLogger(t, zaptest.Level(zap.WarnLevel)))
	ids := []string{"j1", "j2", "j3", "j4", "j5", "j6"}
	for _, id := range ids {
		createEverySecond(t, f.AdminToken, f.URLs()[0], id, rcv.srv.URL, func(j *jfapi.Job) {
			j.Retry = jfapi.RetryPolicy{MaxAttempts: 5, InitialBackoff: jfapi.Duration(100 * time.Millisecond)}
		})
	}
	time.Sleep(2 * time.Second)
	return f, rcv, ids
}

func jobsSurviveGracefulLeaveAndCrash(t *testing.T, warm bool) {
	f, rcv, ids := fourMembersSixJobs(t, warm)
	f.Leave("m2")
	time.Sleep(2 * time.Second)
	f.Crash("m3") // its partitions move after the 2s lease TTL: within the 5s misfire grace
	f.WaitSettled(15 * time.Second)
	time.Sleep(2 * time.Second)
	all := settleRuns(t, f, ids)
	checkExactlyOnce(t, all, rcv, 5)
	if warm {
		loads := 0.0
		for _, id := range []string{"m1", "m4"} {
			loads += metrictest.Value(t, f.Member(id).Metrics, "jobfleet_standby_loads_total", "source", "warm")
		}
		if loads == 0 {
			t.Fatal("no partition was built from a standby copy after a leave and a crash")
		}
		t.Logf("survivors' loads from standby copies: %v", loads)
	}
}

// TestKilledWorkerAttemptIsRetriedAndLateReportRejected kills a worker
// while it holds an attempt (its connections fail from then on): the
// attempt's lease expires, another worker runs attempt 2, and the killed
// worker's late report is refused.
func TestKilledWorkerAttemptIsRetriedAndLateReportRejected(t *testing.T) {
	t.Parallel()
	f := fleettest.New(t, etcd, fleettest.Options{Partitions: 4, Scheduler: true, RunLease: 2 * time.Second, Quiet: true})
	f.Join("m1")
	f.WaitSettled(15 * time.Second)
	base := f.URLs()[0]

	hook, _, release := hangingHook(t)
	defer release()

	// The doomed worker talks through a transport we can kill.
	var dead atomic.Bool
	transport := &killableTransport{dead: &dead, next: http.DefaultTransport}
	ctx, cancel := context.WithCancel(context.Background())
	doomed, err := worker.New(worker.Config{ID: "doomed", Orchestrators: worker.StaticOrchestrators(base), ServeHTTP: true, PollWait: time.Second,
		HTTPClient: &http.Client{Transport: transport}, Token: f.WorkerToken, ShutdownTimeout: time.Second, CancelGrace: 100 * time.Millisecond, ReportTimeout: time.Second, RequestTimeout: 500 * time.Millisecond,
		RetryInitial: 50 * time.Millisecond, RetryMax: 200 * time.Millisecond, HTTPPolicy: egress.Policy{Allow: []string{"127.0.0.1"}}})
	if err != nil {
		t.Fatal(err)
	}
	doomedDone := make(chan struct{})
	go func() { defer close(doomedDone); doomed.Run(ctx) }()
	defer func() { cancel(); <-doomedDone }()

	if code := api(t, f.AdminToken, "POST", base, "/v1/jobs", jfapi.Job{ID: "once", Executor: jfapi.Executor{Type: "http", URL: hook.URL},
		Retry: jfapi.RetryPolicy{MaxAttempts: 3, InitialBackoff: jfapi.Duration(100 * time.Millisecond)}}, nil); code != http.StatusCreated {
		t.Fatalf("create: %d", code)
	}
	// Wait until the doomed worker holds attempt 1, then kill it.
	var run jfapi.Run
	waitFor(t, 10*time.Second, func() bool {
		runs := runsOf(t, f.AdminToken, base, "once")
		if len(runs) == 1 && runs[0].Status == jfapi.RunRunning {
			run = runs[0]
			return true
		}
		return false
	})
	if run.Attempts[0].Worker != "doomed" {
		t.Fatalf("attempt 1 taken by %s", run.Attempts[0].Worker)
	}
	dead.Store(true)

	startWorkers(t, 1, []string{base}, f.WorkerToken, zaptest.NewLogger(t, zaptest.Level(zap.WarnLevel)))
	waitFor(t, 20*time.Second, func() bool {
		r := runsOf(t, f.AdminToken, base, "once")[0]
		run = r
		return r.Status == jfapi.RunSucceeded
	})
	if len(run.Attempts) != 2 || run.Attempts[0].Error == "" || run.Attempts[1].Worker != "w1" {
		t.Fatalf("attempts = %+v, want attempt 1 lost with a reason and attempt 2 by w1", run.Attempts)
	}
	// The killed worker's late report is refused and changes nothing.
	var e struct{ Error string }
	code := api(t, f.WorkerToken, "POST", base, jfapi.PathComplete, jfapi.CompleteRequest{Worker: "doomed", RunID: run.ID, Attempt: 1, Success: false, Error: "late"}, &e)
	if code != http.StatusConflict {
		t.Fatalf("late report: status %d (%s), want 409", code, e.Error)
	}
	if after := runsOf(t, f.AdminToken, base, "once")[0]; after.Status != jfapi.RunSucceeded || len(after.Attempts) != 2 || after.Attempts[0].Error == "late" {
		t.Fatalf("late report changed the run: %+v", after)
	}
}

// hangingHook serves a hook whose first request of an attempt 1 hangs
// until release is called, at the latest when the test ends (its worker
// is about to die); every other request is answered at once. hung
// reports whether that request has come.
func hangingHook(t *testing.T) (hook *httptest.Server, hung func() bool, release func()) {
	block := make(chan struct{})
	var first atomic.Bool
	hook = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get(worker.HeaderAttempt) == "1" && first.CompareAndSwap(false, true) {
			<-block
		}
	}))
	var once sync.Once
	release = func() { once.Do(func() { close(block) }) }
	t.Cleanup(hook.Close)
	t.Cleanup(release) // before the hook closes: Close waits for the request
	return hook, first.Load, release
}

type killableTransport struct {
	dead *atomic.Bool
	next http.RoundTripper
}

func (k *killableTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	if k.dead.Load() {
		return nil, errors.New("killed")
	}
	return k.next.RoundTrip(r)
}

func waitFor(t *testing.T, within time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("condition not met within %v", within)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestWarmStandbyTwoCrashesAndAJoin: a member crashes, then, before its
// lease expired, a second one (with standby copies, often the heir of
// some of the first one's partitions: the heir of the heir takes those
// over, its copy made only on the ring change), and a member joins while
// their partitions move. Every fire still happens once, with and without
// standby copies.
func TestWarmStandbyTwoCrashesAndAJoin(t *testing.T) {
	t.Parallel()
	for _, warm := range []bool{false, true} {
		t.Run(fmt.Sprintf("warm=%v", warm), func(t *testing.T) { twoCrashesAndAJoin(t, warm) })
	}
}

func twoCrashesAndAJoin(t *testing.T, warm bool) {
	f, rcv, ids := fourMembersSixJobs(t, warm)
	f.Crash("m2")
	time.Sleep(time.Second) // within the 2s lease TTL
	f.Crash("m3")
	time.Sleep(1500 * time.Millisecond) // m2's partitions are moving
	f.Join("m5")
	f.WaitSettled(15 * time.Second)
	startWorkersNamed(t, "v", 1, f.URLs(), f.WorkerToken, zaptest.NewLogger(t, zaptest.Level(zap.WarnLevel))) // the workers above do not know m5
	time.Sleep(2 * time.Second)
	all := settleRuns(t, f, ids)
	checkExactlyOnce(t, all, rcv, 5)
	if !warm {
		return
	}
	loads := map[string]float64{}
	for _, id := range []string{"m1", "m4", "m5"} {
		for _, src := range []string{"warm", "cold"} {
			loads[id+" "+src] = metrictest.Value(t, f.Member(id).Metrics, "jobfleet_standby_loads_total", "source", src)
		}
	}
	t.Logf("survivors' loads: %v", loads)
}
