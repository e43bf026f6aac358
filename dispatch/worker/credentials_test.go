package worker_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"

	"github.com/jobfleet/jobfleet/api"
	"github.com/jobfleet/jobfleet/dispatch/worker"
	"github.com/jobfleet/jobfleet/internal/testkit/tlstest"
)

// TestTokenSentWithEveryRequest: the worker's token goes with its polls,
// heartbeats, completions and members-list reads, as a bearer token.
func TestTokenSentWithEveryRequest(t *testing.T) {
	const token = "jf_worker.s3cret-token"
	clock := clockwork.NewFakeClock()
	f := newFakeOrch(t, "a", clock)
	f.setMembers(api.Member{ID: "a", Addr: f.URL()})
	d := worker.MembersFrom(f.URL())
	d.Clock = clock
	release := make(chan struct{})
	startWorker(t, worker.Config{Orchestrators: d, Token: token, Clock: clock}, func(w *worker.Worker) {
		mustHandle(t, w, "slow", func(ctx context.Context, _ worker.Run) error {
			<-release
			return nil
		})
	})
	f.enqueue(f.assignment("r1", handlerExec("slow"), ""))
	f.waitFor(t, "the attempt to be held", func() bool { return len(f.held) > 0 })
	blockUntilHeartbeat(t, f, clock, "r1")
	close(release)
	f.waitComplete(t, "r1")

	f.mu.Lock()
	defer f.mu.Unlock()
	seen := map[string]bool{}
	for _, a := range f.auth {
		method, rest, _ := strings.Cut(a, " ")
		path, auth, _ := strings.Cut(rest, " ")
		seen[method+" "+path] = true
		if auth != "Bearer "+token {
			t.Errorf("%s %s carried Authorization %q, want the bearer token", method, path, auth)
		}
	}
	for _, want := range []string{"GET /v1/cluster/members", "POST /v1/worker/poll", "POST /v1/worker/heartbeat", "POST /v1/worker/complete"} {
		if !seen[want] {
			t.Errorf("no %s request seen (saw %v)", want, seen)
		}
	}
}

// blockUntilHeartbeat advances clock until the attempt runID has
// heartbeated once.
func blockUntilHeartbeat(t *testing.T, f *fakeOrch, clock *clockwork.FakeClock, runID string) {
	t.Helper()
	deadline := time.Now().Add(waitTimeout)
	for {
		f.mu.Lock()
		n := f.heartbeatCount(runID)
		f.mu.Unlock()
		if n > 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("no heartbeat for %s", runID)
		}
		clock.Advance(time.Second)
		time.Sleep(time.Millisecond) // let the worker's goroutines see the new time
	}
}

func TestTokenMustBePrintable(t *testing.T) {
	for _, tok := range []string{"a b", "a\nb", "tok\x1b", "é"} {
		_, err := worker.New(worker.Config{ID: "w", Orchestrators: worker.StaticOrchestrators("http://127.0.0.1:1"), Token: tok})
		if err == nil || strings.Contains(err.Error(), tok) {
			t.Errorf("Token %q: New = %v, want an error that does not repeat the token", tok, err)
		}
	}
}

// TestCredentialsRefused: once the credentials were accepted, polls
// answered 401 are logged once (not per poll), backed off on the worker's
// clock (no spinning), and a change of answer (403) is logged again; so is
// the recovery. Refusals for longer than the start grace do not end a
// worker whose credentials were accepted once.
func TestCredentialsRefused(t *testing.T) {
	clock := clockwork.NewFakeClock()
	f := newFakeOrch(t, "a", clock)
	f.failPolls(0, 401, 401, 401, 403)
	lg, logs := newTestLogger(t)
	tw := startWorker(t, worker.Config{Orchestrators: worker.StaticOrchestrators(f.URL()), Token: "wrong", Clock: clock, Logger: lg, PollWait: 50 * time.Millisecond,
		RetryInitial: time.Second, RetryMax: 4 * time.Second}, nil)
	pollCount := func() int {
		polls, _, _, _ := f.snapshot()
		return len(polls)
	}
	// The first poll is accepted, and answered empty at once: the worker
	// waits RetryInitial on its clock before the next, which is refused.
	deadline := time.Now().Add(waitTimeout)
	for pollCount() < 2 {
		if time.Now().After(deadline) {
			t.Fatal("no second poll")
		}
		clock.Advance(100 * time.Millisecond)
		time.Sleep(time.Millisecond) // let the worker's goroutines see the new time
	}
	logs.wait(t, "refused the worker's credentials; backing off")
	// Backing off: without the clock moving, no further poll. (The other
	// waiter is the registration's: this orchestrator keeps no registry.)
	blockUntil(t, clock, 2)
	if n := pollCount(); n != 2 {
		t.Fatalf("%d polls before the back-off elapsed, want 2", n)
	}
	// Each later poll comes once the clock passes its back-off. The clock
	// moves a second at a time until it does: one jump of the back-off's
	// length could come before the worker set its timer (the waiters
	// counted may be others, such as a poll's own timer not yet stopped).
	for want := 3; want <= 6; want++ {
		deadline := time.Now().Add(waitTimeout)
		for pollCount() < want {
			if time.Now().After(deadline) {
				t.Fatalf("poll %d: none came within %v of moving the clock", want, waitTimeout)
			}
			clock.Advance(time.Second)
			time.Sleep(time.Millisecond) // let the worker's goroutines see the new time
		}
	}
	logs.wait(t, "accepts the worker's credentials again")
	if tw.returned() {
		t.Fatalf("Run returned (%v) after refusals of credentials accepted before, want it to keep running", tw.result())
	}
	logs.mu.Lock()
	defer logs.mu.Unlock()
	refusals := 0
	for _, m := range logs.msgs {
		if strings.Contains(m, "refused the worker's credentials") {
			refusals++
		}
		if strings.Contains(m, "stopping") {
			t.Errorf("logged %q, want no stop for credentials accepted before", m)
		}
	}
	if refusals != 2 {
		t.Errorf("%d refusal lines for 3 refusals with 401 then one with 403, want 2 (once per change)", refusals)
	}
}

// TestCredentialsRefusedAtStart: a worker whose credentials no
// orchestrator ever accepted logs an error line at once, naming the
// orchestrator and the fix, keeps trying through the start grace (a new
// credential may not have reached every orchestrator yet), then stops:
// Run returns ErrCredentialRefused wrapping the orchestrator's
// *CredentialError.
func TestCredentialsRefusedAtStart(t *testing.T) {
	for _, status := range []int{http.StatusUnauthorized, http.StatusForbidden} {
		t.Run(strconv.Itoa(status), func(t *testing.T) {
			clock := clockwork.NewFakeClock()
			f := newFakeOrch(t, "a", clock)
			refusals := make([]int, 1000)
			for i := range refusals {
				refusals[i] = status
			}
			f.failPolls(refusals...)
			lg, logs := newTestLogger(t)
			w, err := worker.New(worker.Config{ID: "w1", Orchestrators: worker.StaticOrchestrators(f.URL()), ServeHTTP: true, Clock: clock, Logger: lg,
				PollWait: 50 * time.Millisecond, RetryInitial: time.Second, RetryMax: 2 * time.Second})
			if err != nil {
				t.Fatal(err)
			}
			done := make(chan error, 1)
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			go func() { done <- w.Run(ctx) }()

			logs.wait(t, "refused the worker's credentials; the worker stops if no orchestrator accepts them")
			logs.mu.Lock()
			first := slices.IndexFunc(logs.msgs, func(m string) bool { return strings.Contains(m, "refused the worker's credentials") })
			line := logs.msgs[first]
			logs.mu.Unlock()
			if !strings.Contains(line, "Config.Token") || !strings.Contains(line, "--token") {
				t.Errorf("refusal line %q, want the fix (Config.Token, --token)", line)
			}
			// Within the grace the worker keeps trying.
			blockUntil(t, clock, 2)
			clock.Advance(4 * time.Second)
			f.waitFor(t, "a poll after the back-off", func() bool { return len(f.polls) >= 2 })
			select {
			case err := <-done:
				t.Fatalf("Run returned %v within the start grace, want it to keep trying", err)
			default:
			}
			// Past it, the next refusal stops the worker.
			var runErr error
			deadline := time.Now().Add(waitTimeout)
		wait:
			for {
				select {
				case runErr = <-done:
					break wait
				default:
				}
				if time.Now().After(deadline) {
					t.Fatal("Run did not return after the start grace")
				}
				clock.Advance(time.Second)
				time.Sleep(time.Millisecond) // let the worker's goroutines see the new time
			}
			var ce *worker.CredentialError
			if !errors.Is(runErr, worker.ErrCredentialRefused) || !errors.As(runErr, &ce) || ce.Status != status {
				t.Fatalf("Run = %v, want ErrCredentialRefused wrapping a *CredentialError with status %d", runErr, status)
			}
			if msg := runErr.Error(); !strings.Contains(msg, f.URL()) || !strings.Contains(msg, "Config.Token") {
				t.Errorf("Run's error %q, want it to name the orchestrator %s and the fix", msg, f.URL())
			}
			logs.wait(t, "no orchestrator accepts the worker's credentials; stopping")
		})
	}
}

// TestCredentialsAcceptedWithinStartGrace: a credential refused at first
// (not yet known to the orchestrator) and accepted within the grace keeps
// the worker running, and it runs attempts.
func TestCredentialsAcceptedWithinStartGrace(t *testing.T) {
	clock := clockwork.NewFakeClock()
	f := newFakeOrch(t, "a", clock)
	f.failPolls(401, 401)
	lg, logs := newTestLogger(t)
	tw := startWorker(t, worker.Config{Orchestrators: worker.StaticOrchestrators(f.URL()), Token: "new", Clock: clock, Logger: lg,
		PollWait: 50 * time.Millisecond, RetryInitial: time.Second, RetryMax: 2 * time.Second}, func(w *worker.Worker) { okHandler(w, t) })
	logs.wait(t, "refused the worker's credentials")
	for i := 0; !logsHave(logs, "accepts the worker's credentials again"); i++ {
		if i > 1000 {
			t.Fatal("the worker never polled again")
		}
		clock.Advance(500 * time.Millisecond)
		time.Sleep(time.Millisecond)
	}
	f.enqueue(f.assignment("r1", handlerExec("ok"), ""))
	if c := f.waitComplete(t, "r1"); !c.Success {
		t.Fatalf("completion %+v, want success", c)
	}
	if tw.returned() {
		t.Fatalf("Run returned %v, want it running", tw.result())
	}
}

// logsHave reports whether a message containing substr was logged.
func logsHave(lw *logWatch, substr string) bool {
	lw.mu.Lock()
	defer lw.mu.Unlock()
	return slices.ContainsFunc(lw.msgs, func(m string) bool { return strings.Contains(m, substr) })
}

// TestTLSWithClientCertificate: with Config.TLS the worker verifies the
// orchestrator against the given CA and presents its client certificate.
func TestTLSWithClientCertificate(t *testing.T) {
	ca := tlstest.NewCA(t, "workers")
	clientCert := ca.Client(t, "worker-1").TLS(t)
	serverTLS := &tls.Config{ClientAuth: tls.RequireAndVerifyClientCert, ClientCAs: ca.Pool()}
	f := newFakeOrchTLS(t, "a", nil, serverTLS)
	roots := x509.NewCertPool()
	roots.AddCert(f.srv.Certificate())
	startWorker(t, worker.Config{Orchestrators: worker.StaticOrchestrators(f.URL()),
		TLS: &tls.Config{RootCAs: roots, Certificates: []tls.Certificate{clientCert}}}, func(w *worker.Worker) {
		mustHandle(t, w, "ok", func(context.Context, worker.Run) error { return nil })
	})
	f.enqueue(f.assignment("r1", handlerExec("ok"), ""))
	if c := f.waitComplete(t, "r1"); !c.Success {
		t.Errorf("completion %+v, want success over TLS", c)
	}
}

// TestTLSUnknownServerRefused: without the orchestrator's CA the worker
// does not talk to it.
func TestTLSUnknownServerRefused(t *testing.T) {
	f := newFakeOrchTLS(t, "a", nil, &tls.Config{})
	lg, logs := newTestLogger(t)
	startWorker(t, worker.Config{Orchestrators: worker.StaticOrchestrators(f.URL()), TLS: &tls.Config{RootCAs: x509.NewCertPool()}, Logger: lg}, nil)
	logs.wait(t, "poll failed")
	if polls, _, _, _ := f.snapshot(); len(polls) != 0 {
		t.Errorf("%d polls reached an orchestrator whose certificate is not trusted", len(polls))
	}
}

var _ = http.StatusOK
