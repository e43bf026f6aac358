package worker_test

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
	"go.uber.org/goleak"

	"github.com/jobfleet/jobfleet/api"
	"github.com/jobfleet/jobfleet/dispatch/worker"
)

func TestMain(m *testing.M) {
	code := m.Run()
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintln(os.Stderr, "goleak:", err)
			code = 1
		}
	}
	os.Exit(code)
}

func handlerExec(name string) api.Executor { return api.Executor{Type: name} }

func withLease(a api.AttemptGrant, lease time.Duration) api.AttemptGrant {
	a.RunLease = api.Duration(lease)
	return a
}

func TestConfigValidate(t *testing.T) {
	good := worker.DefaultConfig()
	good.ID = "w1"
	good.Orchestrators = worker.StaticOrchestrators("http://127.0.0.1:8080")
	tests := []struct {
		name   string
		mutate func(*worker.Config)
		ok     bool
	}{
		{"default", func(*worker.Config) {}, true},
		{"empty ID", func(c *worker.Config) { c.ID = "" }, false},
		{"ID too long", func(c *worker.Config) { c.ID = strings.Repeat("w", 129) }, false},
		{"ID of 128 bytes", func(c *worker.Config) { c.ID = strings.Repeat("w", 128) }, true},
		{"ID with space", func(c *worker.Config) { c.ID = "w 1" }, false},
		{"no orchestrators", func(c *worker.Config) { c.Orchestrators = nil }, false},
		{"empty static list", func(c *worker.Config) { c.Orchestrators = worker.StaticOrchestrators() }, false},
		{"relative URL", func(c *worker.Config) { c.Orchestrators = worker.StaticOrchestrators("127.0.0.1:8080") }, false},
		{"members list", func(c *worker.Config) { c.Orchestrators = worker.MembersFrom("https://fleet.example") }, true},
		{"members list without seed", func(c *worker.Config) { c.Orchestrators = worker.MembersFrom() }, false},
		{"zero concurrency (the default)", func(c *worker.Config) { c.Concurrency = 0 }, true},
		{"negative concurrency", func(c *worker.Config) { c.Concurrency = -1 }, false},
		{"negative poll wait", func(c *worker.Config) { c.PollWait = -time.Second }, false},
		{"concurrency 1024", func(c *worker.Config) { c.Concurrency = 1024 }, true},
		{"concurrency 1025", func(c *worker.Config) { c.Concurrency = 1025 }, false},
		{"poll wait above max", func(c *worker.Config) { c.PollWait = api.MaxPollWait + time.Second }, false},
		{"negative shutdown timeout", func(c *worker.Config) { c.ShutdownTimeout = -time.Second }, false},
		{"retry max below initial", func(c *worker.Config) { c.RetryMax = c.RetryInitial / 2 }, false},
		{"report timeout below request timeout", func(c *worker.Config) { c.ReportTimeout = c.RequestTimeout / 2 }, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := good
			tt.mutate(&c)
			err := c.Validate()
			if (err == nil) != tt.ok {
				t.Fatalf("Validate() = %v, want ok=%v", err, tt.ok)
			}
			if err != nil && !errors.Is(err, worker.ErrInvalidConfig) {
				t.Fatalf("Validate() = %v, want ErrInvalidConfig", err)
			}
		})
	}
}

func TestNewFillsDefaults(t *testing.T) {
	_, err := worker.New(worker.Config{ID: "w1", Orchestrators: worker.StaticOrchestrators("http://127.0.0.1:1")})
	if err != nil {
		t.Fatalf("New with zero fields: %v, want defaults filled in", err)
	}
	if _, err := worker.New(worker.Config{ID: "w1"}); !errors.Is(err, worker.ErrInvalidConfig) {
		t.Fatalf("New without orchestrators: %v, want ErrInvalidConfig", err)
	}
}

func TestHandleValidation(t *testing.T) {
	w, err := worker.New(worker.Config{ID: "w1", Orchestrators: worker.StaticOrchestrators("http://127.0.0.1:1")})
	if err != nil {
		t.Fatal(err)
	}
	ok := func(context.Context, worker.Run) error { return nil }
	tests := []struct {
		name    string
		handler worker.Handler
		wantErr bool
	}{
		{"send-invoice", ok, false},
		{"billing.v2:charge_card", ok, false},
		{"send-invoice", ok, true}, // duplicate
		{"http", ok, true},
		{"shell", ok, true},
		{"", ok, true},
		{"9lives", ok, true},
		{"has space", ok, true},
		{strings.Repeat("h", 65), ok, true},
		{"nil-handler", nil, true},
	}
	for _, tt := range tests {
		err := w.Handle(tt.name, tt.handler)
		if (err != nil) != tt.wantErr {
			t.Errorf("Handle(%q) = %v, want error %v", tt.name, err, tt.wantErr)
		}
		if err != nil && !errors.Is(err, worker.ErrInvalidHandler) {
			t.Errorf("Handle(%q) = %v, want ErrInvalidHandler", tt.name, err)
		}
	}
}

func TestRunTwice(t *testing.T) {
	w, err := worker.New(worker.Config{ID: "w1", Orchestrators: worker.StaticOrchestrators("http://127.0.0.1:1"), ServeHTTP: true})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := w.Run(ctx); err != nil {
		t.Fatalf("first Run = %v, want nil", err)
	}
	if err := w.Run(ctx); !errors.Is(err, worker.ErrAlreadyRun) {
		t.Fatalf("second Run = %v, want ErrAlreadyRun", err)
	}
}

func TestAdvertisedExecutors(t *testing.T) {
	for _, allowShell := range []bool{false, true} {
		t.Run(map[bool]string{false: "without shell", true: "with shell"}[allowShell], func(t *testing.T) {
			f := newFakeOrch(t, "a", nil)
			clock := clockwork.NewFakeClock() // drives the settling window of poll waits only
			startWorker(t, worker.Config{Orchestrators: worker.StaticOrchestrators(f.URL()), Concurrency: 3, AllowShell: allowShell, Clock: clock},
				func(w *worker.Worker) {
					mustHandle(t, w, "zeta", func(context.Context, worker.Run) error { return nil })
					mustHandle(t, w, "alpha", func(context.Context, worker.Run) error { return nil })
				})
			f.waitFor(t, "a poll", func() bool { return len(f.polls) > 0 })
			polls, _, _, _ := f.snapshot()
			want := []string{"http", "alpha", "zeta"}
			if allowShell {
				want = []string{"http", "shell", "alpha", "zeta"}
			}
			p := polls[0]
			if !slices.Equal(p.Executors, want) {
				t.Errorf("executors = %q, want %q", p.Executors, want)
			}
			if p.Worker != "w1" {
				t.Errorf("worker = %q, want w1", p.Worker)
			}
			if p.Max < 1 || p.Max > 3 {
				t.Errorf("max = %d, want 1..3", p.Max)
			}
			// The set of orchestrators has just changed (from none): polls
			// are short until it has settled for a PollWait, then long.
			if w := p.Wait.Std(); w <= 0 || w > time.Second {
				t.Errorf("first poll's wait = %v, want at most 1s while settling", w)
			}
			clock.Advance(worker.DefaultConfig().PollWait + time.Second)
			f.waitFor(t, "a long poll", func() bool { return f.polls[len(f.polls)-1].Wait.Std() == worker.DefaultConfig().PollWait })
		})
	}
}

// TestEmbeddedWorkerServesOnlyWhatItDeclares: a worker embedded without
// ServeHTTP advertises only its handlers (and shell, if allowed), refuses
// an http attempt it is handed all the same, registers and polls with its
// labels and free slots, and Run refuses a worker that serves nothing.
func TestEmbeddedWorkerServesOnlyWhatItDeclares(t *testing.T) {
	f := newFakeOrch(t, "a", nil)
	labels := map[string]string{"team": "billing", "region": "eu-west"}
	startEmbedded(t, worker.Config{Orchestrators: worker.StaticOrchestrators(f.URL()), Concurrency: 5, Labels: labels}, func(w *worker.Worker) {
		mustHandle(t, w, "send-invoice", func(context.Context, worker.Run) error { return nil })
	})
	labels["team"] = "changed after New" // the worker keeps its own copy
	f.enqueueForced(f.assignment("r-http", api.Executor{Type: "http", URL: "http://127.0.0.1:9/hook"}, ""))
	if got := f.waitComplete(t, "r-http"); got.Success || !strings.Contains(got.Error, "http executor refused") {
		t.Errorf("http attempt handed to an embedded worker: %+v, want refused", got)
	}
	polls, _, _, _ := f.snapshot()
	if p := polls[0]; !slices.Equal(p.Executors, []string{"send-invoice"}) || p.Free < p.Max || p.Free > 5 {
		t.Errorf("poll = executors %q, max %d, free %d; want only the handler, free slots of 5", p.Executors, p.Max, p.Free)
	}

	// Its registration says the same, with its labels.
	o := newRegistrarOrch(t, http.StatusOK)
	startEmbedded(t, worker.Config{ID: "w-labels", Orchestrators: worker.StaticOrchestrators(o.srv.URL), Labels: map[string]string{"pool": "gpu"}, AllowShell: true}, func(w *worker.Worker) {
		mustHandle(t, w, "train", func(context.Context, worker.Run) error { return nil })
	})
	deadline := time.Now().Add(waitTimeout)
	for {
		if n, _, last := o.counts(); n > 0 {
			if !slices.Equal(last.Executors, []string{"shell", "train"}) || !maps.Equal(last.Labels, map[string]string{"pool": "gpu"}) {
				t.Errorf("registration = executors %q, labels %v; want shell and the handler, pool=gpu", last.Executors, last.Labels)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("no registration")
		}
		time.Sleep(5 * time.Millisecond)
	}

	w, err := worker.New(worker.Config{ID: "w-idle", Orchestrators: worker.StaticOrchestrators(f.URL())})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Run(context.Background()); !errors.Is(err, worker.ErrNothingToServe) {
		t.Errorf("Run of a worker that serves nothing = %v, want ErrNothingToServe", err)
	}
	for _, bad := range []map[string]string{{"-pool": "gpu"}, {"pool": "g p u"}} {
		if _, err := worker.New(worker.Config{ID: "w", Orchestrators: worker.StaticOrchestrators(f.URL()), Labels: bad}); !errors.Is(err, worker.ErrInvalidConfig) || !strings.Contains(err.Error(), "labels") {
			t.Errorf("New with labels %v = %v, want ErrInvalidConfig naming labels", bad, err)
		}
	}
}

func TestNamedHandlers(t *testing.T) {
	f := newFakeOrch(t, "a", nil)
	gotRun := make(chan worker.Run, 1)
	startWorker(t, worker.Config{Orchestrators: worker.StaticOrchestrators(f.URL())}, func(w *worker.Worker) {
		mustHandle(t, w, "ok", func(_ context.Context, r worker.Run) error { gotRun <- r; return nil })
		mustHandle(t, w, "fail", func(context.Context, worker.Run) error { return errors.New("card declined") })
		mustHandle(t, w, "boom", func(context.Context, worker.Run) error { panic("nil map") })
	})
	okA := f.assignment("r-ok", handlerExec("ok"), `{"invoice":42}`)
	okA.Attempt = 2
	okA.ScheduledAt = time.Date(2026, 12, 1, 2, 0, 0, 123e6, time.UTC)
	f.enqueue(okA, f.assignment("r-fail", handlerExec("fail"), ""), f.assignment("r-boom", handlerExec("boom"), ""))
	f.enqueueForced(f.assignment("r-unknown", handlerExec("unknown"), ""))

	tests := []struct {
		run, wantErr string
	}{
		{"r-ok", ""},
		{"r-fail", "card declined"},
		{"r-boom", "handler panicked: nil map"},
		{"r-unknown", `no handler registered for executor type "unknown"`},
	}
	for _, tt := range tests {
		c := f.waitComplete(t, tt.run)
		if c.Success != (tt.wantErr == "") || !strings.Contains(c.Error, tt.wantErr) || (tt.wantErr == "" && c.Error != "") {
			t.Errorf("%s: success=%v error=%q, want error containing %q", tt.run, c.Success, c.Error, tt.wantErr)
		}
		if c.Worker != "w1" || c.Attempt < 1 {
			t.Errorf("%s: worker=%q attempt=%d", tt.run, c.Worker, c.Attempt)
		}
	}
	r := recv(t, gotRun, "handler call")
	if r.JobID != "job-r-ok" || r.RunID != "r-ok" || r.Attempt != 2 || !r.ScheduledAt.Equal(okA.ScheduledAt) || string(r.Payload) != `{"invoice":42}` {
		t.Errorf("handler got %+v, want the assignment's fields", r)
	}
}

// TestHeartbeatKeepsLongAttemptAlive runs an attempt for four times its
// lease; the fake orchestrator expires leases on the fake clock, so the
// completion is accepted only if the heartbeats kept extending it.
func TestHeartbeatKeepsLongAttemptAlive(t *testing.T) {
	clock := clockwork.NewFakeClock()
	f := newFakeOrch(t, "a", clock)
	started, release := make(chan struct{}), make(chan struct{})
	startWorker(t, worker.Config{Orchestrators: worker.StaticOrchestrators(f.URL()), Concurrency: 1, Clock: clock},
		func(w *worker.Worker) {
			mustHandle(t, w, "long", func(ctx context.Context, _ worker.Run) error {
				close(started)
				select {
				case <-release:
					return nil
				case <-ctx.Done():
					return ctx.Err()
				}
			})
		})
	f.enqueue(f.assignment("r1", handlerExec("long"), "")) // lease 30s: a heartbeat every 10s
	recv(t, started, "attempt start")
	for i := 1; i <= 12; i++ {
		blockUntil(t, clock, 3) // the attempt's timeout, its heartbeat timer and the registration's retry
		clock.Advance(10 * time.Second)
		f.waitFor(t, "heartbeat", func() bool { return f.heartbeatCount("r1") == i })
	}
	close(release)
	c := f.waitComplete(t, "r1")
	if !c.Success {
		t.Fatalf("completion %+v, want success accepted after 120s of a 30s lease", c)
	}
	_, hbs, _, _ := f.snapshot()
	for _, h := range hbs {
		if h.Worker != "w1" || h.RunID != "r1" || h.Attempt != 1 {
			t.Errorf("heartbeat %+v, want worker w1, run r1, attempt 1", h)
		}
	}
}

// heartbeatOnce starts a worker with a "wait" handler that returns when its
// context is cancelled (or when release is closed), enqueues one attempt
// and sends its first heartbeat. It returns the handler's context error.
func heartbeatOnce(t *testing.T, fakes []*fakeOrch, clock *clockwork.FakeClock, release chan struct{}) (*testWorker, <-chan error) {
	t.Helper()
	started := make(chan struct{})
	ended := make(chan error, 1)
	var addrs []string
	for _, f := range fakes {
		addrs = append(addrs, f.URL())
	}
	tw := startWorker(t, worker.Config{Orchestrators: worker.StaticOrchestrators(addrs...), Concurrency: len(fakes), Clock: clock},
		func(w *worker.Worker) {
			mustHandle(t, w, "wait", func(ctx context.Context, _ worker.Run) error {
				close(started)
				select {
				case <-ctx.Done():
					ended <- ctx.Err()
					return ctx.Err()
				case <-release:
					ended <- nil
					return nil
				}
			})
		})
	fakes[0].enqueue(fakes[0].assignment("r1", handlerExec("wait"), ""))
	recv(t, started, "attempt start")
	blockUntil(t, clock, 3) // the attempt's timeout, its heartbeat timer and the registration's retry
	clock.Advance(10 * time.Second)
	return tw, ended
}

func TestHeartbeatConflictCancelsWithoutReport(t *testing.T) {
	clock := clockwork.NewFakeClock()
	f := newFakeOrch(t, "a", clock)
	f.onHeartbeat = func(api.HeartbeatRequest) (int, any) {
		return http.StatusConflict, errorDoc("attempt superseded")
	}
	tw, ended := heartbeatOnce(t, []*fakeOrch{f}, clock, nil)
	if err := recv(t, ended, "handler end"); !errors.Is(err, context.Canceled) {
		t.Fatalf("handler ended with %v, want its context cancelled", err)
	}
	if err := tw.stop(); err != nil {
		t.Fatal(err)
	}
	if _, _, _, reqs := f.snapshot(); len(reqs) != 0 {
		t.Fatalf("completions sent for a stale attempt: %+v, want none", reqs)
	}
}

func TestHeartbeatCancelRequested(t *testing.T) {
	clock := clockwork.NewFakeClock()
	f := newFakeOrch(t, "a", clock)
	f.onHeartbeat = func(api.HeartbeatRequest) (int, any) {
		return http.StatusOK, api.HeartbeatResponse{RunLease: api.Duration(30 * time.Second), Cancel: true}
	}
	_, ended := heartbeatOnce(t, []*fakeOrch{f}, clock, nil)
	recv(t, ended, "handler end")
	c := f.waitComplete(t, "r1")
	if c.Success || c.Error != "cancelled by the orchestrator" {
		t.Fatalf("completion success=%v error=%q, want failure %q", c.Success, c.Error, "cancelled by the orchestrator")
	}
}

func TestHeartbeatRedirect(t *testing.T) {
	clock := clockwork.NewFakeClock()
	a, b := newFakeOrch(t, "a", clock), newFakeOrch(t, "b", clock)
	a.onHeartbeat = func(req api.HeartbeatRequest) (int, any) {
		return http.StatusMisdirectedRequest, api.NotOwner{Error: "not the owner", Owner: "b", OwnerAddr: b.URL()}
	}
	a.onComplete = func(api.CompleteRequest) (int, any) {
		return http.StatusMisdirectedRequest, api.NotOwner{Error: "not the owner", Owner: "b", OwnerAddr: b.URL()}
	}
	release := make(chan struct{})
	b.adopt(a.assignment("r1", handlerExec("wait"), ""), "w1")
	_, ended := heartbeatOnce(t, []*fakeOrch{a, b}, clock, release)
	b.waitFor(t, "heartbeat at the new owner", func() bool { return b.heartbeatCount("r1") == 1 })
	// The next heartbeat goes straight to the new owner.
	blockUntil(t, clock, 3)
	clock.Advance(10 * time.Second)
	b.waitFor(t, "second heartbeat at the new owner", func() bool { return b.heartbeatCount("r1") == 2 })
	close(release)
	recv(t, ended, "handler end")
	if c := b.waitComplete(t, "r1"); !c.Success {
		t.Fatalf("completion at new owner %+v, want success", c)
	}
	_, hbs, _, reqs := a.snapshot()
	if len(hbs) != 1 || len(reqs) != 0 {
		t.Errorf("old owner got %d heartbeats and %d completions, want 1 and 0", len(hbs), len(reqs))
	}
}

func TestCompleteRedirect(t *testing.T) {
	a, b := newFakeOrch(t, "a", nil), newFakeOrch(t, "b", nil)
	a.onComplete = func(api.CompleteRequest) (int, any) {
		return http.StatusMisdirectedRequest, api.NotOwner{Error: "not the owner", Owner: "b", OwnerAddr: b.URL()}
	}
	startWorker(t, worker.Config{Orchestrators: worker.StaticOrchestrators(a.URL())}, func(w *worker.Worker) {
		mustHandle(t, w, "ok", func(context.Context, worker.Run) error { return nil })
	})
	asg := a.assignment("r1", handlerExec("ok"), "")
	b.adopt(asg, "w1")
	a.enqueue(asg)
	if c := b.waitComplete(t, "r1"); !c.Success || c.Worker != "w1" {
		t.Fatalf("completion at the new owner %+v, want success from w1", c)
	}
	if _, _, done, reqs := a.snapshot(); len(reqs) != 1 || len(done) != 0 {
		t.Errorf("old owner got %d completion requests (%d accepted), want 1 (0)", len(reqs), len(done))
	}
}

func TestCompleteRetriesUnavailable(t *testing.T) {
	f := newFakeOrch(t, "a", nil)
	var calls atomic.Int32
	f.onComplete = func(api.CompleteRequest) (int, any) {
		if calls.Add(1) <= 2 {
			return http.StatusServiceUnavailable, errorDoc("etcd unreachable")
		}
		return 0, nil
	}
	startWorker(t, worker.Config{Orchestrators: worker.StaticOrchestrators(f.URL()), RetryInitial: time.Millisecond, RetryMax: 5 * time.Millisecond},
		func(w *worker.Worker) {
			mustHandle(t, w, "ok", func(context.Context, worker.Run) error { return nil })
		})
	f.enqueue(f.assignment("r1", handlerExec("ok"), ""))
	f.waitComplete(t, "r1")
	if n := calls.Load(); n != 3 {
		t.Errorf("completion requests = %d, want 3 (two 503s, then accepted)", n)
	}
}

func TestCompleteConflictIsDropped(t *testing.T) {
	f := newFakeOrch(t, "a", nil)
	f.onComplete = func(api.CompleteRequest) (int, any) { return http.StatusConflict, errorDoc("stale") }
	lg, logs := newTestLogger(t)
	tw := startWorker(t, worker.Config{Orchestrators: worker.StaticOrchestrators(f.URL()), Logger: lg}, func(w *worker.Worker) {
		mustHandle(t, w, "ok", func(context.Context, worker.Run) error { return nil })
	})
	f.enqueue(f.assignment("r1", handlerExec("ok"), ""))
	logs.wait(t, "report refused as stale")
	if err := tw.stop(); err != nil {
		t.Fatal(err)
	}
	if _, _, _, reqs := f.snapshot(); len(reqs) != 1 {
		t.Errorf("completion requests = %d, want 1 (a 409 is not retried)", len(reqs))
	}
}

func TestPollRetriesUnavailableAndDeadOrchestrators(t *testing.T) {
	f := newFakeOrch(t, "a", nil)
	f.failPolls(http.StatusServiceUnavailable, http.StatusServiceUnavailable)
	// 127.0.0.1:1 refuses connections: polling it must not hold up f.
	startWorker(t, worker.Config{
		Orchestrators: worker.StaticOrchestrators("http://127.0.0.1:1", f.URL()),
		RetryInitial:  time.Millisecond, RetryMax: 5 * time.Millisecond,
	}, func(w *worker.Worker) {
		mustHandle(t, w, "ok", func(context.Context, worker.Run) error { return nil })
	})
	f.enqueue(f.assignment("r1", handlerExec("ok"), ""))
	f.waitComplete(t, "r1")
	if polls, _, _, _ := f.snapshot(); len(polls) < 3 {
		t.Errorf("polls = %d, want at least 3 (two refused with 503)", len(polls))
	}
}

// TestConcurrencyNeverExceeded runs 20 attempts from two orchestrators on a
// worker with 3 slots and checks, inside the handler, that no more than 3
// ever run at once, and at the orchestrators that no poll asks for more
// than 3 and no more than 3 are held.
func TestConcurrencyNeverExceeded(t *testing.T) {
	const slots, perOrch = 3, 10
	a, b := newFakeOrch(t, "a", nil), newFakeOrch(t, "b", nil)
	var running, peak atomic.Int32
	started, release := make(chan struct{}), make(chan struct{})
	startWorker(t, worker.Config{Orchestrators: worker.StaticOrchestrators(a.URL(), b.URL()), Concurrency: slots},
		func(w *worker.Worker) {
			mustHandle(t, w, "count", func(context.Context, worker.Run) error {
				n := running.Add(1)
				for p := peak.Load(); n > p && !peak.CompareAndSwap(p, n); p = peak.Load() {
				}
				started <- struct{}{}
				<-release
				running.Add(-1)
				return nil
			})
		})
	var runs []string
	for i := range perOrch {
		for _, f := range []*fakeOrch{a, b} {
			id := f.id + "-" + string(rune('a'+i))
			runs = append(runs, id)
			f.enqueue(f.assignment(id, handlerExec("count"), ""))
		}
	}
	for range slots {
		recv(t, started, "attempt start")
	}
	for range 2*perOrch - slots {
		release <- struct{}{}
		recv(t, started, "attempt start")
	}
	for range slots {
		release <- struct{}{}
	}
	for _, id := range runs {
		f := a
		if strings.HasPrefix(id, "b-") {
			f = b
		}
		f.waitComplete(t, id)
	}
	if p := peak.Load(); p != slots {
		t.Errorf("peak concurrent attempts = %d, want %d", p, slots)
	}
	for _, f := range []*fakeOrch{a, b} {
		polls, _, _, _ := f.snapshot()
		for _, p := range polls {
			if p.Max > slots {
				t.Errorf("%s: poll asked for %d attempts, want at most %d", f.id, p.Max, slots)
			}
		}
		// An attempt whose executor returned gives its slot back and
		// reports its result in one of as many report places as slots:
		// the orchestrators see up to twice as many attempts not yet
		// completed as run at once (peak, above), never more.
		f.mu.Lock()
		if f.maxHeld > 2*slots {
			t.Errorf("%s: %d attempts not completed at once, want at most %d (%d running, %d reporting)", f.id, f.maxHeld, 2*slots, slots, slots)
		}
		f.mu.Unlock()
	}
}

// TestFewerSlotsThanOrchestrators: with one slot and three orchestrators,
// the idle long polls are short, so every orchestrator gets its turn.
func TestFewerSlotsThanOrchestrators(t *testing.T) {
	fakes := []*fakeOrch{newFakeOrch(t, "a", nil), newFakeOrch(t, "b", nil), newFakeOrch(t, "c", nil)}
	startWorker(t, worker.Config{
		Orchestrators: worker.StaticOrchestrators(fakes[0].URL(), fakes[1].URL(), fakes[2].URL()), Concurrency: 1,
	}, func(w *worker.Worker) { okHandler(w, t) })
	for _, f := range fakes {
		f.enqueue(f.assignment("r-"+f.id, handlerExec("ok"), ""))
	}
	for _, f := range fakes {
		f.waitComplete(t, "r-"+f.id)
		polls, _, _, _ := f.snapshot()
		for _, p := range polls {
			if p.Max != 1 || p.Wait.Std() > time.Second {
				t.Errorf("%s: poll max %d wait %v, want max 1, wait at most 1s", f.id, p.Max, p.Wait.Std())
			}
		}
	}
}

// TestGracefulShutdown cancels Run with two attempts in flight: the one that
// finishes within the shutdown timeout is reported as it ended; the other
// is cancelled when the timeout ends and reported failed with "worker
// shutting down".
func TestGracefulShutdown(t *testing.T) {
	clock := clockwork.NewFakeClock()
	f := newFakeOrch(t, "a", clock)
	lg, logs := newTestLogger(t)
	started, release := make(chan string, 2), make(chan struct{})
	tw := startWorker(t, worker.Config{
		Orchestrators: worker.StaticOrchestrators(f.URL()), Concurrency: 2, Clock: clock, Logger: lg,
		ShutdownTimeout: 30 * time.Second,
	}, func(w *worker.Worker) {
		mustHandle(t, w, "slow", func(ctx context.Context, r worker.Run) error {
			started <- r.RunID
			<-ctx.Done()
			return ctx.Err()
		})
		mustHandle(t, w, "quick", func(_ context.Context, r worker.Run) error {
			started <- r.RunID
			<-release
			return nil
		})
	})
	// Leases longer than the test's fake time, so heartbeat timing does not matter.
	f.enqueue(withLease(f.assignment("slow", handlerExec("slow"), ""), time.Hour), withLease(f.assignment("quick", handlerExec("quick"), ""), time.Hour))
	recv(t, started, "attempt start")
	recv(t, started, "attempt start")

	tw.cancel()
	logs.wait(t, "waiting for in-flight attempts") // the shutdown timer is set
	f.waitFor(t, "polling to stop", func() bool { return f.pollsActive == 0 })
	close(release)
	if c := f.waitComplete(t, "quick"); !c.Success {
		t.Errorf("attempt finishing during shutdown: %+v, want success", c)
	}
	if tw.returned() {
		t.Fatalf("Run returned (%v) before the shutdown timeout with an attempt in flight", tw.err)
	}
	clock.Advance(30 * time.Second)
	c := f.waitComplete(t, "slow")
	if c.Success || c.Error != "worker shutting down" {
		t.Errorf("attempt in flight at the shutdown timeout: success=%v error=%q, want failure %q", c.Success, c.Error, "worker shutting down")
	}
	if err := tw.result(); err != nil {
		t.Errorf("Run = %v, want nil", err)
	}
}

// TestStopReadsThePollItEnds: a worker stopping with a poll waiting asks
// the orchestrator to end it and reads its reply, instead of cutting it:
// an attempt the orchestrator recorded for the poll in that instant (here
// at the end request itself) reaches the worker, which runs it and
// reports it before Run returns. A worker that cut the poll would never
// see the attempt, and its run would wait for the worker's registration
// to end and then count the attempt lost.
func TestStopReadsThePollItEnds(t *testing.T) {
	f := newFakeOrch(t, "a", nil)
	ran := make(chan string, 1)
	tw := startWorker(t, worker.Config{Orchestrators: worker.StaticOrchestrators(f.URL()), Concurrency: 1}, func(w *worker.Worker) {
		mustHandle(t, w, "ok", func(_ context.Context, r worker.Run) error { ran <- r.RunID; return nil })
	})
	f.mu.Lock()
	f.onEndPolls = func(api.EndPollsRequest) { f.enqueue(f.assignment("granted-last", handlerExec("ok"), "")) }
	f.mu.Unlock()
	f.waitFor(t, "a poll to wait", func() bool { return f.pollsActive > 0 })
	tw.cancel()
	if err := tw.result(); err != nil {
		t.Fatalf("Run = %v, want nil", err)
	}
	f.mu.Lock()
	ends := slices.Clone(f.endPolls)
	f.mu.Unlock()
	if len(ends) != 1 || ends[0].Worker != tw.w.ID() {
		t.Fatalf("end requests = %+v, want one of worker %q", ends, tw.w.ID())
	}
	select {
	case id := <-ran:
		if id != "granted-last" {
			t.Fatalf("ran %q, want granted-last", id)
		}
	default:
		t.Fatal("the attempt handed out as the worker ended its poll never ran")
	}
	if c := f.waitComplete(t, "granted-last"); !c.Success {
		t.Errorf("completion %+v, want success", c)
	}
}

// chanDiscovery is a Discovery fed by a test: each list sent replaces
// the worker's orchestrators.
type chanDiscovery chan []string

func (c chanDiscovery) Watch(ctx context.Context, update func([]string)) error {
	for {
		select {
		case <-ctx.Done():
			return nil
		case a := <-c:
			update(a)
		}
	}
}

// TestRemovedOrchestratorsPollIsEndedWithoutAHold: an orchestrator that
// leaves the worker's list (gracefully leaving the fleet, it deletes its
// registration before it hands its partitions over) may still record an
// attempt for the worker's poll: the poll is ended and its reply read, so
// the attempt runs, and the end says the worker keeps polling, so that
// the orchestrator holds none of its later polls should it come back.
func TestRemovedOrchestratorsPollIsEndedWithoutAHold(t *testing.T) {
	a, b := newFakeOrch(t, "a", nil), newFakeOrch(t, "b", nil)
	for _, f := range []*fakeOrch{a, b} {
		f.mu.Lock()
		f.onEndPolls = func(api.EndPollsRequest) {}
		f.mu.Unlock()
	}
	b.mu.Lock()
	b.onEndPolls = func(api.EndPollsRequest) { b.enqueue(b.assignment("left-last", handlerExec("ok"), "")) }
	b.mu.Unlock()
	ran := make(chan string, 1)
	disc := make(chanDiscovery, 1)
	disc <- []string{a.URL(), b.URL()}
	tw := startWorker(t, worker.Config{Orchestrators: disc, Concurrency: 4}, func(w *worker.Worker) {
		mustHandle(t, w, "ok", func(_ context.Context, r worker.Run) error { ran <- r.RunID; return nil })
	})
	b.waitFor(t, "a poll at b", func() bool { return b.pollsActive > 0 })
	disc <- []string{a.URL()}
	if c := b.waitComplete(t, "left-last"); !c.Success {
		t.Errorf("the attempt b handed out as the worker ended its poll: %+v, want success", c)
	}
	if id := recv(t, ran, "the attempt to run"); id != "left-last" {
		t.Errorf("ran %q, want left-last", id)
	}
	b.mu.Lock()
	ends := slices.Clone(b.endPolls)
	b.mu.Unlock()
	if len(ends) != 1 || !ends[0].KeepPolling {
		t.Errorf("end requests at b: %+v, want one saying the worker keeps polling", ends)
	}
	if tw.returned() {
		t.Errorf("the worker stopped (%v) when one orchestrator left its list", tw.err)
	}
}

// TestShutdownStubbornHandler: a handler that ignores its context is still
// reported ("never silently held") CancelGrace after the cancellation, and
// Run waits for it to return.
func TestShutdownStubbornHandler(t *testing.T) {
	clock := clockwork.NewFakeClock()
	f := newFakeOrch(t, "a", clock)
	lg, logs := newTestLogger(t)
	started, release := make(chan struct{}), make(chan struct{})
	tw := startWorker(t, worker.Config{
		Orchestrators: worker.StaticOrchestrators(f.URL()), Concurrency: 1, Clock: clock, Logger: lg,
		ShutdownTimeout: 30 * time.Second, CancelGrace: 5 * time.Second,
	}, func(w *worker.Worker) {
		mustHandle(t, w, "stubborn", func(context.Context, worker.Run) error {
			close(started)
			<-release
			return nil
		})
	})
	f.enqueue(withLease(f.assignment("r1", handlerExec("stubborn"), ""), time.Hour))
	recv(t, started, "attempt start")
	tw.cancel()
	logs.wait(t, "waiting for in-flight attempts")
	clock.Advance(30 * time.Second)
	logs.wait(t, "waiting for the executor to return") // the grace timer is set
	clock.Advance(5 * time.Second)
	c := f.waitComplete(t, "r1")
	if c.Success || c.Error != "worker shutting down" {
		t.Errorf("completion success=%v error=%q, want failure %q", c.Success, c.Error, "worker shutting down")
	}
	if tw.returned() {
		t.Fatalf("Run returned (%v) while a handler was still running", tw.err)
	}
	close(release)
	if err := tw.result(); err != nil {
		t.Errorf("Run = %v, want nil", err)
	}
}

// TestMoreAttemptsThanAsked: an orchestrator that hands out more than Max
// breaks the protocol; the extra attempts are reported failed, not run, so
// the concurrency bound holds.
func TestMoreAttemptsThanAsked(t *testing.T) {
	f := newFakeOrch(t, "a", nil)
	f.ignoreMax = true
	f.enqueue(f.assignment("r1", handlerExec("ok"), ""), f.assignment("r2", handlerExec("ok"), ""), f.assignment("r3", handlerExec("ok"), ""))
	var ran atomic.Int32
	startWorker(t, worker.Config{Orchestrators: worker.StaticOrchestrators(f.URL()), Concurrency: 1}, func(w *worker.Worker) {
		mustHandle(t, w, "ok", func(context.Context, worker.Run) error { ran.Add(1); return nil })
	})
	var ok, refused int
	for _, id := range []string{"r1", "r2", "r3"} {
		c := f.waitComplete(t, id)
		switch {
		case c.Success:
			ok++
		case strings.Contains(c.Error, "no free slot"):
			refused++
		default:
			t.Errorf("%s: unexpected completion %+v", id, c)
		}
	}
	if ok != 1 || refused != 2 || ran.Load() != 1 {
		t.Errorf("succeeded %d, refused %d, handler ran %d times; want 1, 2, 1", ok, refused, ran.Load())
	}
}

// TestCompleteFallsBackWhenOwnerUnreachable: the orchestrator that handed
// the attempt out dies before the completion; the worker asks the other
// known orchestrator, which owns the partition by now.
func TestCompleteFallsBackWhenOwnerUnreachable(t *testing.T) {
	a, b := newFakeOrch(t, "a", nil), newFakeOrch(t, "b", nil)
	started, release := make(chan struct{}), make(chan struct{})
	startWorker(t, worker.Config{Orchestrators: worker.StaticOrchestrators(a.URL(), b.URL()), RetryInitial: time.Millisecond, RetryMax: 5 * time.Millisecond},
		func(w *worker.Worker) {
			mustHandle(t, w, "slow", func(ctx context.Context, _ worker.Run) error {
				close(started)
				select {
				case <-release:
				case <-ctx.Done():
				}
				return nil
			})
		})
	asg := a.assignment("r1", handlerExec("slow"), "")
	b.adopt(asg, "w1")
	a.enqueue(asg)
	select { // the worker has the attempt (not merely handed out)
	case <-started:
	case <-time.After(waitTimeout):
		t.Fatal("attempt not started")
	}
	a.srv.CloseClientConnections()
	a.srv.Listener.Close() // a crashed: its address refuses connections
	close(release)
	if c := b.waitComplete(t, "r1"); !c.Success || c.Worker != "w1" {
		t.Fatalf("completion at the surviving orchestrator %+v, want success from w1", c)
	}
}
