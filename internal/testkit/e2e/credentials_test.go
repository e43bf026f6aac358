package e2e_test

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	jfapi "github.com/jobfleet/jobfleet/api"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/jobfleet/jobfleet/dispatch/worker"
	"github.com/jobfleet/jobfleet/internal/testkit/fleettest"
)

// TestWorkerWithoutValidCredentialStops: against a real fleet, a worker
// with no token, an unknown token or a credential of another role logs an
// error line naming the orchestrator and the fix, and Run returns
// ErrCredentialRefused (wrapping the orchestrator's 401 or 403) instead of
// retrying silently forever; a worker with a worker credential made a
// moment before it starts is accepted and keeps running. So with a fixed
// list of orchestrators as with the members list (MembersFrom, without a
// logger of its own): a viewer or operator may read the members list, and
// that read must not count as the credential accepted.
func TestWorkerWithoutValidCredentialStops(t *testing.T) {
	f := fleettest.New(t, etcd, fleettest.Options{Partitions: 4, Scheduler: true, Quiet: true, LeaseTTL: 5 * time.Second})
	f.Join("m1")
	f.WaitSettled(30 * time.Second)
	base := f.URLs()[0]

	// start runs a worker with token until the test ends; done receives
	// Run's result.
	start := func(t *testing.T, discover bool, token string) (done <-chan error, logs *observer.ObservedLogs) {
		t.Helper()
		core, logs := observer.New(zapcore.DebugLevel)
		var orchestrators worker.Discovery = worker.StaticOrchestrators(base)
		if discover {
			orchestrators = worker.MembersFrom(base)
		}
		w, err := worker.New(worker.Config{ID: "w-" + strings.ReplaceAll(t.Name(), "/", "-"), Orchestrators: orchestrators, ServeHTTP: true, Token: token,
			PollWait: time.Second, ShutdownTimeout: time.Second, RetryInitial: 50 * time.Millisecond, RetryMax: 500 * time.Millisecond,
			Logger: zap.New(core)})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		ch := make(chan error, 1)
		finished := make(chan struct{})
		go func() { defer close(finished); ch <- w.Run(ctx) }()
		t.Cleanup(func() {
			cancel()
			select {
			case <-finished:
			case <-time.After(30 * time.Second):
				t.Error("Run did not return")
			}
		})
		return ch, logs
	}

	for _, tc := range []struct {
		name, token string
		status      int
	}{
		{"no token", "", http.StatusUnauthorized},
		{"unknown token", "jf_0123456789ab_" + strings.Repeat("x", 43), http.StatusUnauthorized},
		{"viewer credential", f.Token(jfapi.RoleViewer, ""), http.StatusForbidden},
		{"operator credential", f.Token(jfapi.RoleOperator, ""), http.StatusForbidden},
	} {
		for _, discover := range []bool{false, true} {
			t.Run(tc.name+"/"+discoveryName(discover), func(t *testing.T) {
				t.Parallel()
				done, logs := start(t, discover, tc.token)
				var err error
				select {
				case err = <-done:
				case <-time.After(time.Minute):
					t.Fatal("Run did not return: the worker retries a refused credential forever")
				}
				var ce *worker.CredentialError
				if !errors.Is(err, worker.ErrCredentialRefused) || !errors.As(err, &ce) || ce.Status != tc.status {
					t.Fatalf("Run = %v, want ErrCredentialRefused wrapping a %d", err, tc.status)
				}
				if !strings.Contains(err.Error(), base) {
					t.Errorf("Run's error %q does not name the orchestrator %s", err, base)
				}
				refusals := logs.FilterMessageSnippet("refused the worker's credentials").AllUntimed()
				if len(refusals) == 0 {
					t.Fatalf("no log line about the refusal; logged %v", logs.AllUntimed())
				}
				first := refusals[0]
				if first.Level != zapcore.ErrorLevel || first.ContextMap()["orchestrator"] != base || !strings.Contains(first.Message, "--token") {
					t.Errorf("first refusal line %+v, want an error naming the orchestrator %s and the fix (--token)", first, base)
				}
				if logs.FilterMessageSnippet("stopping").FilterLevelExact(zapcore.ErrorLevel).Len() != 1 {
					t.Errorf("want one error line saying the worker stops; logged %v", logs.AllUntimed())
				}
			})
		}
	}

	for _, discover := range []bool{false, true} {
		t.Run("worker credential/"+discoveryName(discover), func(t *testing.T) {
			t.Parallel()
			done, logs := start(t, discover, f.Token(jfapi.RoleWorker, ""))
			deadline := time.Now().Add(time.Minute)
			for logs.FilterMessage("polled").Len() == 0 {
				if time.Now().After(deadline) {
					t.Fatalf("the worker never polled; logged %v", logs.AllUntimed())
				}
				time.Sleep(10 * time.Millisecond)
			}
			select {
			case err := <-done:
				t.Fatalf("Run returned %v, want it running", err)
			default:
			}
		})
	}
}

// discoveryName names a subtest by how its worker finds the orchestrators.
func discoveryName(discover bool) string {
	if discover {
		return "members list"
	}
	return "static"
}
