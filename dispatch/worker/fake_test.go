package worker_test

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest"

	"github.com/jobfleet/jobfleet/api"
	"github.com/jobfleet/jobfleet/dispatch/worker"
)

// waitTimeout bounds every wait for an event in these tests. Waits return
// as soon as the event happens; the bound only turns a hang into a failure.
const waitTimeout = 20 * time.Second

// fakeOrch is a test double of one orchestrator's side of the worker
// protocol, in memory: a queue of attempts to hand out, the attempts held
// by workers with lease deadlines on clock, and a record of every request.
// Hooks let a test answer heartbeats and completions differently.
type fakeOrch struct {
	t     testing.TB
	id    string
	srv   *httptest.Server
	clock clockwork.Clock

	mu          sync.Mutex    // guards the fields below
	auth        []string      // "METHOD PATH Authorization-value" of every request
	drains      int           // requests to POST /v1/cluster/drain
	changed     chan struct{} // closed and replaced on every change
	queue       []queued
	held        map[string]*heldAttempt // by runID/attempt
	polls       []api.PollRequest
	pollsActive int
	heartbeats  []api.HeartbeatRequest
	completes   []api.CompleteRequest // accepted (200) completions
	completeReq []api.CompleteRequest // every completion received
	maxHeld     int
	members     []api.Member
	pollStatus  []int // statuses to answer the next polls with, in order
	ignoreMax   bool  // hand out more than the poll's Max (a protocol violation)

	// Hooks, set before the worker runs. A hook that returns status 0
	// leaves the request to the default handling.
	onHeartbeat func(api.HeartbeatRequest) (int, any)
	onComplete  func(api.CompleteRequest) (int, any)
	// onEndPolls, if set, serves POST /v1/worker/poll:end: it is called
	// with the request, then the worker's waiting polls answer with what
	// the queue holds. Without it that path answers 404, as an
	// orchestrator of a version without it.
	onEndPolls func(api.EndPollsRequest)
	endPolls   []api.EndPollsRequest
	endGen     int             // end requests served: a poll waiting when one comes answers
	holding    map[string]bool // workers whose later polls answer at once (an end without KeepPolling)
}

type queued struct {
	a     api.AttemptGrant
	force bool // hand out even if the worker does not advertise the type
}

type heldAttempt struct {
	a        api.AttemptGrant
	worker   string
	deadline time.Time
}

func heldKey(runID string, attempt int) string { return fmt.Sprintf("%s/%d", runID, attempt) }

func newFakeOrch(t testing.TB, id string, clock clockwork.Clock) *fakeOrch {
	t.Helper()
	return newFakeOrchTLS(t, id, clock, nil)
}

// newFakeOrchTLS is newFakeOrch serving HTTPS with tlsCfg (nil: plain
// HTTP).
func newFakeOrchTLS(t testing.TB, id string, clock clockwork.Clock, tlsCfg *tls.Config) *fakeOrch {
	t.Helper()
	if clock == nil {
		clock = clockwork.NewRealClock()
	}
	f := &fakeOrch{t: t, id: id, clock: clock, changed: make(chan struct{}), held: map[string]*heldAttempt{}}
	mux := http.NewServeMux()
	mux.HandleFunc("POST "+api.PathPoll, f.handlePoll)
	mux.HandleFunc("POST "+api.PathHeartbeat, f.handleHeartbeat)
	mux.HandleFunc("POST "+api.PathComplete, f.handleComplete)
	mux.HandleFunc("GET /v1/cluster/members", f.handleMembers)
	mux.HandleFunc("POST "+api.PathEndPolls, f.handleEndPolls)
	mux.HandleFunc("POST /v1/cluster/drain", func(w http.ResponseWriter, _ *http.Request) {
		f.mu.Lock()
		defer f.mu.Unlock()
		f.drains++
		f.notifyLocked()
		writeJSON(w, http.StatusAccepted, map[string]string{})
	})
	f.srv = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		f.mu.Lock()
		f.auth = append(f.auth, r.Method+" "+r.URL.Path+" "+r.Header.Get("Authorization"))
		f.mu.Unlock()
		mux.ServeHTTP(w, r)
	}))
	if tlsCfg != nil {
		f.srv.TLS = tlsCfg
		f.srv.StartTLS()
	} else {
		f.srv.Start()
	}
	t.Cleanup(f.srv.Close)
	return f
}

func (f *fakeOrch) URL() string { return f.srv.URL }

// notifyLocked wakes every waiter; f.mu must be held.
func (f *fakeOrch) notifyLocked() {
	close(f.changed)
	f.changed = make(chan struct{})
}

// assignment returns an attempt of this orchestrator with test defaults.
func (f *fakeOrch) assignment(runID string, ex api.Executor, payload string) api.AttemptGrant {
	a := api.AttemptGrant{
		RunID:       runID,
		JobID:       "job-" + runID,
		Attempt:     1,
		ScheduledAt: time.Date(2026, 12, 1, 2, 0, 0, 0, time.UTC),
		Executor:    ex,
		Timeout:     api.Duration(time.Hour),
		RunLease:    api.Duration(30 * time.Second),
		Owner:       f.id,
		OwnerAddr:   f.URL(),
	}
	if payload != "" {
		a.Payload = json.RawMessage(payload)
	}
	return a
}

// enqueue makes attempts available to the next polls.
func (f *fakeOrch) enqueue(as ...api.AttemptGrant) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, a := range as {
		f.queue = append(f.queue, queued{a: a})
	}
	f.notifyLocked()
}

// enqueueForced makes an attempt available even to workers that do not
// advertise its executor type (a misbehaving orchestrator).
func (f *fakeOrch) enqueueForced(a api.AttemptGrant) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.queue = append(f.queue, queued{a: a, force: true})
	f.notifyLocked()
}

// adopt records a as held by worker, as a new owner finds it in etcd after
// a handoff.
func (f *fakeOrch) adopt(a api.AttemptGrant, worker string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.held[heldKey(a.RunID, a.Attempt)] = &heldAttempt{a: a, worker: worker, deadline: f.clock.Now().Add(a.RunLease.Std())}
	f.notifyLocked()
}

func (f *fakeOrch) setMembers(ms ...api.Member) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.members = ms
	f.notifyLocked()
}

// failPolls makes the next polls answer these statuses (0: as usual).
func (f *fakeOrch) failPolls(statuses ...int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.pollStatus = append(f.pollStatus, statuses...)
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

func errorDoc(msg string) map[string]string { return map[string]string{"error": msg} }

func (f *fakeOrch) handlePoll(w http.ResponseWriter, r *http.Request) {
	var req api.PollRequest
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		writeJSON(w, http.StatusBadRequest, errorDoc(err.Error()))
		return
	}
	switch {
	case req.Worker == "" || len(req.Worker) > 128:
		writeJSON(w, http.StatusBadRequest, errorDoc("worker: 1..128 bytes"))
		return
	case req.Max < 1 || req.Max > 100:
		writeJSON(w, http.StatusBadRequest, errorDoc("max: 1..100"))
		return
	case req.Wait.Std() < 0 || req.Wait.Std() > api.MaxPollWait:
		writeJSON(w, http.StatusBadRequest, errorDoc("wait: at most 30s"))
		return
	}
	f.mu.Lock()
	f.polls = append(f.polls, req)
	if len(f.pollStatus) > 0 {
		status := f.pollStatus[0]
		f.pollStatus = f.pollStatus[1:]
		if status != 0 { // 0: this poll is answered as usual
			f.notifyLocked()
			f.mu.Unlock()
			writeJSON(w, status, errorDoc("injected failure"))
			return
		}
	}
	f.pollsActive++
	gen := f.endGen
	f.notifyLocked()
	f.mu.Unlock()
	defer func() {
		f.mu.Lock()
		f.pollsActive--
		f.notifyLocked()
		f.mu.Unlock()
	}()

	wait := time.NewTimer(req.Wait.Std()) // the real long-poll wait: the network side
	defer wait.Stop()
	for {
		f.mu.Lock()
		if r.Context().Err() != nil {
			// The worker gave up on this poll: hand nothing out.
			f.mu.Unlock()
			return
		}
		var out []api.AttemptGrant
		rest := f.queue[:0]
		for _, q := range f.queue {
			if (len(out) < req.Max || f.ignoreMax) && (q.force || slices.Contains(req.Executors, q.a.Executor.Type)) {
				out = append(out, q.a)
				f.held[heldKey(q.a.RunID, q.a.Attempt)] = &heldAttempt{a: q.a, worker: req.Worker, deadline: f.clock.Now().Add(q.a.RunLease.Std())}
				continue
			}
			rest = append(rest, q)
		}
		f.queue = rest
		if len(out) > 0 {
			f.maxHeld = max(f.maxHeld, len(f.held))
			f.notifyLocked()
			f.mu.Unlock()
			writeJSON(w, http.StatusOK, api.PollResponse{Attempts: out})
			return
		}
		ended := f.endGen != gen || f.holding[req.Worker]
		changed := f.changed
		f.mu.Unlock()
		if ended {
			writeJSON(w, http.StatusOK, api.PollResponse{Attempts: []api.AttemptGrant{}})
			return
		}
		select {
		case <-changed:
		case <-r.Context().Done():
			return
		case <-wait.C:
			writeJSON(w, http.StatusOK, api.PollResponse{Attempts: []api.AttemptGrant{}})
			return
		}
	}
}

func (f *fakeOrch) handleEndPolls(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	hook := f.onEndPolls
	f.mu.Unlock()
	if hook == nil {
		http.NotFound(w, r)
		return
	}
	var req api.EndPollsRequest
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		writeJSON(w, http.StatusBadRequest, errorDoc(err.Error()))
		return
	}
	hook(req)
	f.mu.Lock()
	f.endPolls = append(f.endPolls, req)
	f.endGen++
	if !req.KeepPolling {
		if f.holding == nil {
			f.holding = map[string]bool{}
		}
		f.holding[req.Worker] = true
	}
	f.notifyLocked()
	f.mu.Unlock()
	writeJSON(w, http.StatusOK, struct{}{})
}

func (f *fakeOrch) handleHeartbeat(w http.ResponseWriter, r *http.Request) {
	var req api.HeartbeatRequest
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		writeJSON(w, http.StatusBadRequest, errorDoc(err.Error()))
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.heartbeats = append(f.heartbeats, req)
	f.notifyLocked()
	if f.onHeartbeat != nil {
		if status, body := f.onHeartbeat(req); status != 0 {
			writeJSON(w, status, body)
			return
		}
	}
	h := f.held[heldKey(req.RunID, req.Attempt)]
	if h == nil || h.worker != req.Worker {
		writeJSON(w, http.StatusConflict, errorDoc("stale attempt"))
		return
	}
	if f.clock.Now().After(h.deadline) {
		delete(f.held, heldKey(req.RunID, req.Attempt))
		writeJSON(w, http.StatusConflict, errorDoc("lease expired"))
		return
	}
	h.deadline = f.clock.Now().Add(h.a.RunLease.Std())
	writeJSON(w, http.StatusOK, api.HeartbeatResponse{RunLease: h.a.RunLease})
}

func (f *fakeOrch) handleComplete(w http.ResponseWriter, r *http.Request) {
	var req api.CompleteRequest
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		writeJSON(w, http.StatusBadRequest, errorDoc(err.Error()))
		return
	}
	if len(req.Output) > api.MaxOutputBytes {
		writeJSON(w, http.StatusBadRequest, errorDoc("output too long"))
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.completeReq = append(f.completeReq, req)
	f.notifyLocked()
	if f.onComplete != nil {
		if status, body := f.onComplete(req); status != 0 {
			writeJSON(w, status, body)
			return
		}
	}
	key := heldKey(req.RunID, req.Attempt)
	h := f.held[key]
	if h == nil || h.worker != req.Worker {
		writeJSON(w, http.StatusConflict, errorDoc("stale attempt"))
		return
	}
	delete(f.held, key)
	if f.clock.Now().After(h.deadline) {
		writeJSON(w, http.StatusConflict, errorDoc("lease expired"))
		return
	}
	f.completes = append(f.completes, req)
	status := api.RunSucceeded
	if !req.Success {
		status = api.RunDead
	}
	writeJSON(w, http.StatusOK, api.CompleteResponse{Status: status})
}

func (f *fakeOrch) handleMembers(w http.ResponseWriter, _ *http.Request) {
	f.mu.Lock()
	defer f.mu.Unlock()
	writeJSON(w, http.StatusOK, api.View{Revision: int64(len(f.members)) + 1, Members: f.members})
}

// waitFor blocks until cond holds for the orchestrator's state (checked
// with f.mu held) and fails the test if it does not within waitTimeout.
func (f *fakeOrch) waitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.NewTimer(waitTimeout)
	defer deadline.Stop()
	for {
		f.mu.Lock()
		ok := cond()
		changed := f.changed
		f.mu.Unlock()
		if ok {
			return
		}
		select {
		case <-changed:
		case <-deadline.C:
			t.Fatalf("%s: timed out waiting for %s", f.id, what)
		}
	}
}

// waitComplete waits for the accepted completion of runID and returns it.
func (f *fakeOrch) waitComplete(t testing.TB, runID string) api.CompleteRequest {
	t.Helper()
	var got api.CompleteRequest
	f.waitFor(t, "completion of "+runID, func() bool {
		for _, c := range f.completes {
			if c.RunID == runID {
				got = c
				return true
			}
		}
		return false
	})
	return got
}

func (f *fakeOrch) snapshot() (polls []api.PollRequest, heartbeats []api.HeartbeatRequest, completes, completeReqs []api.CompleteRequest) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.polls), slices.Clone(f.heartbeats), slices.Clone(f.completes), slices.Clone(f.completeReq)
}

func (f *fakeOrch) heartbeatCount(runID string) int {
	n := 0
	for _, h := range f.heartbeats {
		if h.RunID == runID {
			n++
		}
	}
	return n
}

// logWatch records the messages logged, so a test can wait for one.
type logWatch struct {
	mu      sync.Mutex
	msgs    []string
	changed chan struct{}
}

// newTestLogger returns a logger that writes to t and to the returned
// logWatch.
func newTestLogger(t testing.TB) (*zap.Logger, *logWatch) {
	lw := &logWatch{changed: make(chan struct{})}
	base := zaptest.NewLogger(t, zaptest.Level(zap.DebugLevel))
	return zap.New(zapcore.NewTee(base.Core(), hookCore{lw.record})), lw
}

func (lw *logWatch) record(e zapcore.Entry) {
	lw.mu.Lock()
	defer lw.mu.Unlock()
	lw.msgs = append(lw.msgs, e.Message)
	close(lw.changed)
	lw.changed = make(chan struct{})
}

// hookCore is a core that calls fn with every entry, at every level.
type hookCore struct{ fn func(zapcore.Entry) }

func (c hookCore) Enabled(zapcore.Level) bool        { return true }
func (c hookCore) With([]zapcore.Field) zapcore.Core { return c }
func (c hookCore) Check(e zapcore.Entry, ce *zapcore.CheckedEntry) *zapcore.CheckedEntry {
	return ce.AddCore(e, c)
}
func (c hookCore) Write(e zapcore.Entry, _ []zapcore.Field) error { c.fn(e); return nil }
func (c hookCore) Sync() error                                    { return nil }

// wait blocks until a message containing substr has been logged.
func (lw *logWatch) wait(t testing.TB, substr string) {
	t.Helper()
	deadline := time.NewTimer(waitTimeout)
	defer deadline.Stop()
	for {
		lw.mu.Lock()
		found := slices.ContainsFunc(lw.msgs, func(m string) bool { return strings.Contains(m, substr) })
		changed := lw.changed
		lw.mu.Unlock()
		if found {
			return
		}
		select {
		case <-changed:
		case <-deadline.C:
			t.Fatalf("timed out waiting for log %q", substr)
		}
	}
}

// testWorker is a running worker.
type testWorker struct {
	w        *worker.Worker
	cancel   context.CancelFunc
	finished chan struct{} // closed when Run has returned
	err      error         // Run's result, set before finished is closed
}

// result waits for Run to return and returns its error.
func (tw *testWorker) result() error {
	select {
	case <-tw.finished:
		return tw.err
	case <-time.After(waitTimeout):
		return errors.New("Run did not return")
	}
}

// returned reports whether Run has returned.
func (tw *testWorker) returned() bool {
	select {
	case <-tw.finished:
		return true
	default:
		return false
	}
}

// stop cancels Run's context and waits for it to return.
func (tw *testWorker) stop() error {
	tw.cancel()
	return tw.result()
}

// startWorker creates a worker from cfg (with test defaults for the ID and
// logger), lets setup register handlers, runs it, and stops it at the end
// of the test.
func startWorker(t *testing.T, cfg worker.Config, setup func(*worker.Worker)) *testWorker {
	t.Helper()
	cfg.ServeHTTP = true // as jobfleet worker does; see startEmbedded
	return startConfigured(t, cfg, setup)
}

// startEmbedded starts a worker configured by cfg as a program embedding
// the library would: ServeHTTP as cfg says.
func startEmbedded(t *testing.T, cfg worker.Config, setup func(*worker.Worker)) *testWorker {
	t.Helper()
	return startConfigured(t, cfg, setup)
}

func startConfigured(t *testing.T, cfg worker.Config, setup func(*worker.Worker)) *testWorker {
	t.Helper()
	if cfg.ID == "" {
		cfg.ID = "w1"
	}
	if cfg.Logger == nil {
		cfg.Logger, _ = newTestLogger(t)
	}
	if cfg.HTTPPolicy.Allow == nil {
		// The test receivers listen on loopback, which is denied by
		// default. A test of the default sets Allow to an empty slice.
		cfg.HTTPPolicy.Allow = []string{"127.0.0.0/8"}
	}
	w, err := worker.New(cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	if setup != nil {
		setup(w)
	}
	ctx, cancel := context.WithCancel(context.Background())
	tw := &testWorker{w: w, cancel: cancel, finished: make(chan struct{})}
	go func() {
		tw.err = w.Run(ctx)
		close(tw.finished)
	}()
	t.Cleanup(func() {
		if err := tw.stop(); err != nil {
			t.Errorf("Run: %v", err)
		}
	})
	return tw
}

func mustHandle(t *testing.T, w *worker.Worker, name string, h worker.Handler) {
	t.Helper()
	if err := w.Handle(name, h); err != nil {
		t.Fatalf("Handle(%q): %v", name, err)
	}
}

// blockUntil waits until clock has n waiters (timers, tickers, sleepers).
func blockUntil(t *testing.T, clock *clockwork.FakeClock, n int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	if err := clock.BlockUntilContext(ctx, n); err != nil {
		t.Fatalf("waiting for %d clock waiters: %v", n, err)
	}
}

// recv receives from ch or fails the test after waitTimeout.
func recv[T any](t *testing.T, ch <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(waitTimeout):
		t.Fatalf("timed out waiting for %s", what)
		panic("unreachable")
	}
}
