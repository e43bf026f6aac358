package dispatch_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/jobfleet/jobfleet/api"

	"go.uber.org/zap/zaptest"

	"github.com/jobfleet/jobfleet/dispatch"
	"github.com/jobfleet/jobfleet/dispatch/workers"
)

// withRegistry gives the harness's dispatcher a worker registry as member
// member (TTL 2s, etcd's real time), running until the test ends.
func (h *harness) withRegistry(member string) *workers.Registry {
	h.t.Helper()
	reg := h.newRegistry(member)
	h.configure = func(c *dispatch.Config) { c.Workers = reg }
	return reg
}

func (h *harness) newRegistry(member string) *workers.Registry {
	h.t.Helper()
	reg, err := workers.New(h.client, workers.Config{Namespace: h.ns, Member: member, TTL: 2 * time.Second, Clock: h.clock, Logger: zaptest.NewLogger(h.t)})
	if err != nil {
		h.t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); reg.Run(ctx) }()
	h.t.Cleanup(func() { cancel(); <-done })
	return reg
}

func register(t *testing.T, reg *workers.Registry, worker, credential string) {
	t.Helper()
	if _, err := reg.Register(context.Background(), api.RegisterRequest{Worker: worker, Credential: credential, Executors: []string{"http"}, Concurrency: 2}); err != nil {
		t.Fatalf("register %s: %v", worker, err)
	}
}

// waitWorkers waits until reg lists exactly the workers ids.
func waitWorkers(t *testing.T, reg *workers.Registry, ids ...string) []api.Worker {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		ws, err := reg.Workers()
		var got []string
		for _, w := range ws {
			got = append(got, w.ID)
		}
		if err == nil && strings.Join(got, ",") == strings.Join(ids, ",") {
			return ws
		}
		if time.Now().After(deadline) {
			t.Fatalf("registry lists %q after 10s, want %q", got, ids)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// takeAs takes one attempt as worker with credential.
func (h *harness) takeAs(worker, credential string) api.AttemptGrant {
	h.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := h.disp.Poll(ctx, api.PollRequest{Worker: worker, Credential: credential, Executors: []string{"http"}, Max: 1, Wait: api.Duration(api.MaxPollWait)})
	if err != nil || len(resp.Attempts) != 1 {
		h.t.Fatalf("poll as %s: %d attempts, %v", worker, len(resp.Attempts), err)
	}
	return resp.Attempts[0]
}

// TestExpiredRegistrationLosesAttemptsAtOnce: a worker stops refreshing
// its registration (it crashed); when etcd expires it, its running
// attempt is retried without the clock reaching the run lease, and the
// worker's late heartbeat and completion are refused.
func TestExpiredRegistrationLosesAttemptsAtOnce(t *testing.T) {
	h := newHarness(t)
	reg := h.withRegistry("m1")
	h.start("m1")
	h.create(api.Job{ID: "crash", Schedule: "@every 1h", Retry: api.RetryPolicy{MaxAttempts: 3, InitialBackoff: api.Duration(time.Second)}})
	register(t, reg, "w-dies", "cred-a")
	waitWorkers(t, reg, "w-dies")
	h.advance(time.Hour)
	a := h.takeAs("w-dies", "cred-a")

	// The fake clock stands still: only the registration's expiry (etcd's
	// real time, 2s) can end the attempt.
	r := h.waitRun(a.RunID, func(r api.Run) bool { return r.Status != api.RunRunning })
	if r.Status != api.RunFailed || len(r.Attempts) != 1 || !strings.Contains(r.Attempts[0].Error, `worker "w-dies" lost: its registration expired`) {
		t.Fatalf("run after the registration expired: status %s, attempts %+v; want failed with the worker lost", r.Status, r.Attempts)
	}
	// (The owner applies its write in memory just after etcd has it.)
	deadline := time.Now().Add(10 * time.Second)
	for {
		_, err := h.disp.Heartbeat(context.Background(), api.HeartbeatRequest{Worker: "w-dies", Credential: "cred-a", RunID: a.RunID, Attempt: 1})
		if errors.Is(err, dispatch.ErrStaleAttempt) {
			break
		}
		if err != nil || time.Now().After(deadline) {
			t.Fatalf("late heartbeat: %v, want ErrStaleAttempt", err)
		}
		time.Sleep(5 * time.Millisecond)
	}
	if _, err := h.disp.Complete(context.Background(), api.CompleteRequest{Worker: "w-dies", Credential: "cred-a", RunID: a.RunID, Attempt: 1, Success: true}); !errors.Is(err, dispatch.ErrStaleAttempt) {
		t.Fatalf("late completion: %v, want ErrStaleAttempt", err)
	}

	// The retry goes to another worker, once its backoff has passed.
	register(t, reg, "w-new", "cred-a")
	waitWorkers(t, reg, "w-new")
	h.advance(2 * time.Second)
	a2 := h.takeAs("w-new", "cred-a")
	if a2.RunID != a.RunID || a2.Attempt != 2 {
		t.Fatalf("retry = %s attempt %d, want %s attempt 2", a2.RunID, a2.Attempt, a.RunID)
	}
}

// TestLiveAndMovedRegistrationsKeepAttempts: a registration that is
// refreshed, or that moves to another member (the worker's registrar
// stopped answering), keeps its worker's attempts; a worker that never
// registered is left to its run lease. Then a registration removed and
// created again (the worker was cut off, and came back) still loses the
// attempts taken under the old one.
func TestLiveAndMovedRegistrationsKeepAttempts(t *testing.T) {
	h := newHarness(t)
	reg := h.withRegistry("m1")
	other := h.newRegistry("m2")
	h.start("m1")
	h.create(api.Job{ID: "keep-a", Schedule: "@every 1h"})
	h.create(api.Job{ID: "keep-b", Schedule: "@every 1h"})
	register(t, reg, "w-live", "cred-a")
	ws := waitWorkers(t, reg, "w-live")
	h.advance(time.Hour)
	live := h.takeAs("w-live", "cred-a")
	anon := h.takeAs("w-unregistered", "cred-a")

	// Refreshed at m1, then moved to m2 and refreshed there, for twice the
	// TTL: the registration, and so the attempts, live on.
	for i := range 8 {
		r := reg
		if i >= 2 {
			r = other
		}
		register(t, r, "w-live", "cred-a")
		time.Sleep(500 * time.Millisecond)
	}
	moved := waitWorkers(t, reg, "w-live")
	if moved[0].Orchestrator != "m2" || !moved[0].RegisteredAt.Equal(ws[0].RegisteredAt) {
		t.Fatalf("registration after the move: %+v, want held by m2 and registered at %v", moved[0], ws[0].RegisteredAt)
	}
	for _, a := range []api.AttemptGrant{live, anon} {
		if r := h.waitRun(a.RunID, func(api.Run) bool { return true }); r.Status != api.RunRunning {
			t.Fatalf("run %s: %s %+v, want still running", a.RunID, r.Status, r.Attempts)
		}
	}

	// Removed and registered again at once: a new registration.
	if _, err := h.client.Delete(context.Background(), h.store.Keys().Worker("w-live")); err != nil {
		t.Fatal(err)
	}
	register(t, other, "w-live", "cred-a")
	r := h.waitRun(live.RunID, func(r api.Run) bool { return r.Status != api.RunRunning })
	if len(r.Attempts) != 1 || !strings.Contains(r.Attempts[0].Error, "registration expired") {
		t.Fatalf("run of the re-registered worker: %s %+v, want its attempt lost with the worker", r.Status, r.Attempts)
	}
	if r := h.waitRun(anon.RunID, func(api.Run) bool { return true }); r.Status != api.RunRunning {
		t.Fatalf("run of the unregistered worker: %s, want running until its run lease", r.Status)
	}
}

// TestPollUnderAnotherCredentialsWorkerID: while a worker ID is bound to
// a credential, a poll under it with another credential is refused with
// the registry's error, and hands nothing out.
func TestPollUnderAnotherCredentialsWorkerID(t *testing.T) {
	h := newHarness(t)
	reg := h.withRegistry("m1")
	h.start("m1")
	h.create(api.Job{ID: "bound", Schedule: "@every 1h"})
	register(t, reg, "w1", "cred-a")
	waitWorkers(t, reg, "w1")
	h.advance(time.Hour)
	h.waitRuns("bound", 1)
	_, err := h.disp.Poll(context.Background(), api.PollRequest{Worker: "w1", Credential: "cred-b", Executors: []string{"http"}, Max: 1})
	if !errors.Is(err, workers.ErrIDTaken) || !strings.Contains(err.Error(), `worker ID held by another credential: "w1" is bound to another credential`) {
		t.Fatalf("poll under another credential: %v, want ErrIDTaken naming the ID", err)
	}
	if a := h.takeAs("w1", "cred-a"); a.JobID != "bound" {
		t.Fatalf("the ID's own credential took %+v, want the run of bound", a)
	}
}

// TestWhyPending: the reason names what is missing: any worker, the
// executor type (with the flag or handler that serves it), or a worker
// whose credential's prefix covers the job.
func TestWhyPending(t *testing.T) {
	h := newHarness(t)
	reg := h.withRegistry("m1")
	h.start("m1")
	waitWorkers(t, reg) // loaded: before that, the registry says nothing
	if got := reg.WhyPending("a/job", "http", "", ""); got != "no live worker is registered (start one: jobfleet worker)" {
		t.Fatalf("no workers: %q", got)
	}
	for _, w := range []api.RegisterRequest{
		{Worker: "w-ops", Credential: "ops", Prefix: "ops/", Executors: []string{"http", "shell"}, Concurrency: 1},
		{Worker: "w-all", Credential: "all", Executors: []string{"http", "resize"}, Concurrency: 1},
	} {
		if _, err := reg.Register(context.Background(), w); err != nil {
			t.Fatal(err)
		}
	}
	waitWorkers(t, reg, "w-all", "w-ops")
	for _, tt := range []struct{ job, executor, want string }{
		{"a/job", "http", ""},
		{"a/job", "resize", ""},
		{"ops/x", "shell", ""},
		{"a/job", "shell", `no live worker serving executor "shell" accepts jobs under this ID: their credentials are limited to the prefixes "ops/"`},
		{"ops/x", "thumbnail", `no live worker serves handler "thumbnail" (run a program that registers it with the worker library's Handle)`},
	} {
		if got := reg.WhyPending(tt.job, tt.executor, "", ""); got != tt.want {
			t.Errorf("WhyPending(%q, %q) = %q, want %q", tt.job, tt.executor, got, tt.want)
		}
	}
	// A reader scoped to a prefix is not told the other prefixes.
	if got, want := reg.WhyPending("a/job", "shell", "", "a/"), `no live worker serving executor "shell" accepts jobs under this ID: their credentials are limited to other prefixes`; got != want {
		t.Errorf("WhyPending for a reader scoped to a/ = %q, want %q", got, want)
	}
	if err := reg.Deregister(context.Background(), api.DeregisterRequest{Worker: "w-ops", Credential: "ops"}); err != nil {
		t.Fatal(err)
	}
	waitWorkers(t, reg, "w-all")
	if got, want := reg.WhyPending("ops/x", "shell", "", ""), `no live worker serves executor "shell" (start a worker with --allow-shell)`; got != want {
		t.Fatalf("after the shell worker left: %q, want %q", got, want)
	}

	// The gauge counts the waiting runs nobody can take, by executor type.
	h.create(api.Job{ID: "ops/x", Schedule: "@every 1h", Executor: api.Executor{Type: "shell", Command: []string{"true"}}})
	h.create(api.Job{ID: "ops/y", Schedule: "@every 1h"})
	h.advance(time.Hour)
	h.waitRuns("ops/x", 1)
	h.waitRuns("ops/y", 1)
	// The partition counts a run once its write's answer is in, a moment
	// after the run is in etcd.
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		got := h.disp.Stats().Unservable
		if len(got) == 1 && got["shell"] == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("unservable runs %v, want shell: 1", got)
		}
	}
	if _, err := reg.Register(context.Background(), api.RegisterRequest{Worker: "w-shell", Executors: []string{"shell"}, Concurrency: 1}); err != nil {
		t.Fatal(err)
	}
	waitWorkers(t, reg, "w-all", "w-shell")
	if got := h.disp.Stats().Unservable; len(got) != 0 {
		t.Fatalf("unservable runs %v once a shell worker registered, want none", got)
	}
}
