package e2e_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	jfapi "github.com/jobfleet/jobfleet/api"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"

	"github.com/jobfleet/jobfleet/admin"
	"github.com/jobfleet/jobfleet/internal/testkit/authtest"
	"github.com/jobfleet/jobfleet/internal/testkit/fleettest"
)

// TestForgedReportsRefused: a worker credential other than the one that
// took an attempt cannot heartbeat or complete it, even naming the right
// worker ID; the real worker's result stands and is recorded once.
func TestForgedReportsRefused(t *testing.T) {
	f := fleettest.New(t, etcd, fleettest.Options{Partitions: 4, Scheduler: true, Quiet: true})
	f.Join("m1")
	f.WaitSettled(15 * time.Second)
	base := f.URLs()[0]
	rogue := f.Token(jfapi.RoleWorker, "")

	release := make(chan struct{})
	var executions atomic.Int32
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		executions.Add(1)
		<-release // held until the forgeries are done
		fmt.Fprint(w, "real result")
	}))
	defer hook.Close()
	var once sync.Once
	unblock := func() { once.Do(func() { close(release) }) }
	defer unblock()

	if code := api(t, f.AdminToken, "POST", base, "/v1/jobs", jfapi.Job{ID: "held", Executor: jfapi.Executor{Type: "http", URL: hook.URL}}, nil); code != http.StatusCreated {
		t.Fatalf("create: %d", code)
	}
	startWorkers(t, 1, []string{base}, f.WorkerToken, zaptest.NewLogger(t, zaptest.Level(zap.WarnLevel)))
	var run jfapi.Run
	// The attempt is stored before the scheduler hands it out; once the
	// hook sees the execution, the worker holds it and the scheduler knows
	// it (a report before then is stale, not forged).
	waitFor(t, 10*time.Second, func() bool {
		if executions.Load() == 0 {
			return false
		}
		runs := runsOf(t, f.AdminToken, base, "held")
		if len(runs) == 1 && runs[0].Status == jfapi.RunRunning {
			run = runs[0]
			return true
		}
		return false
	})
	att := run.Attempts[0]
	if att.Worker != "w1" || att.Credential == "" {
		t.Fatalf("attempt %+v: want worker w1 and its credential recorded", att)
	}

	before := runsOf(t, f.AdminToken, base, "held")[0]
	var e struct{ Error string }
	for _, req := range []struct {
		path string
		body any
	}{
		{jfapi.PathHeartbeat, jfapi.HeartbeatRequest{Worker: "w1", RunID: run.ID, Attempt: 1}},
		{jfapi.PathComplete, jfapi.CompleteRequest{Worker: "w1", RunID: run.ID, Attempt: 1, Success: true, Output: "forged success"}},
		{jfapi.PathComplete, jfapi.CompleteRequest{Worker: "w1", RunID: run.ID, Attempt: 1, Success: false, Error: "forged failure"}},
	} {
		if code := api(t, rogue, "POST", base, req.path, req.body, &e); code != http.StatusForbidden {
			t.Fatalf("forged %s: %d (%s), want 403", req.path, code, e.Error)
		}
	}
	// A body naming the credential does not help.
	if code := api(t, rogue, "POST", base, jfapi.PathComplete, map[string]any{"worker": "w1", "run_id": run.ID, "attempt": 1, "success": true, "credential": att.Credential}, &e); code != http.StatusBadRequest {
		t.Fatalf("forged complete naming the credential in the body: %d (%s), want 400", code, e.Error)
	}
	after := runsOf(t, f.AdminToken, base, "held")[0]
	if after.Status != jfapi.RunRunning || len(after.Attempts) != 1 || after.Attempts[0].FinishedAt != before.Attempts[0].FinishedAt {
		t.Fatalf("forgeries changed the run: %+v", after)
	}

	unblock()
	waitFor(t, 10*time.Second, func() bool {
		run = runsOf(t, f.AdminToken, base, "held")[0]
		return run.Status.Final()
	})
	if run.Status != jfapi.RunSucceeded || len(run.Attempts) != 1 || run.Attempts[0].Output != "real result" || executions.Load() != 1 {
		t.Fatalf("run %+v after %d executions: want the real worker's success, once", run, executions.Load())
	}
}

// TestRevocationReachesEveryMember: a token revoked through one member is
// refused by every member of a 3-member fleet within a second.
func TestRevocationReachesEveryMember(t *testing.T) {
	f := fleettest.New(t, etcd, fleettest.Options{Partitions: 8, Scheduler: true, Quiet: true})
	for i := 1; i <= 3; i++ {
		f.Join(fmt.Sprintf("m%d", i))
	}
	f.WaitSettled(15 * time.Second)
	urls := f.URLs()
	var c jfapi.Created
	if code := api(t, f.AdminToken, "POST", urls[0], "/v1/tokens", jfapi.CreateRequest{Role: jfapi.RoleViewer}, &c); code != http.StatusCreated {
		t.Fatalf("create: %d", code)
	}
	status := func(u string) int { return api(t, c.Secret, "GET", u, "/v1/cluster/members", nil, nil) }
	for _, u := range urls { // every member learns of the new credential
		waitFor(t, 5*time.Second, func() bool { return status(u) == http.StatusOK })
	}
	if code := api(t, f.AdminToken, "DELETE", urls[0], "/v1/tokens/"+url.PathEscape(c.ID), nil, nil); code != http.StatusNoContent {
		t.Fatalf("revoke: %d", code)
	}
	revoked := time.Now()
	for _, u := range urls {
		for status(u) != http.StatusUnauthorized {
			if time.Since(revoked) > time.Second {
				t.Fatalf("%s still accepts the revoked token %v after the revocation", u, time.Since(revoked))
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	t.Logf("all 3 members refuse the revoked token %v after the revocation's reply", time.Since(revoked).Round(time.Millisecond))
}

// TestPollCapsKeepRunsFlowing: a credential opening many more long polls
// than the cap gets 429s beyond it, and a real worker is still handed the
// runs.
func TestPollCapsKeepRunsFlowing(t *testing.T) {
	limits := admin.Limits{MaxPolls: 64, MaxPollsPerCredential: 8}
	f := fleettest.New(t, etcd, fleettest.Options{Partitions: 4, Scheduler: true, Quiet: true, APILimits: limits})
	f.Join("m1")
	f.WaitSettled(15 * time.Second)
	base := f.URLs()[0]
	rogue := f.Token(jfapi.RoleWorker, "")

	// The rogue's polls ask for an executor no job uses: they hold their
	// slots for the whole wait and take nothing.
	const polls = 100
	ctx, cancel := context.WithCancel(context.Background())
	client := authtest.Client(t, rogue)
	var refused, other atomic.Int32
	var wg sync.WaitGroup
	for range polls {
		wg.Go(func() {
			body := strings.NewReader(`{"worker":"rogue","executors":["nobody-runs-this"],"max":100,"wait":"30s"}`)
			req, _ := http.NewRequestWithContext(ctx, "POST", base+jfapi.PathPoll, body)
			req.Header.Set("Content-Type", "application/json")
			resp, err := client.Do(req)
			if err != nil {
				return // a held poll, cancelled at the end of the test
			}
			resp.Body.Close()
			switch {
			case resp.StatusCode == http.StatusTooManyRequests && resp.Header.Get("Retry-After") != "":
				refused.Add(1)
			default:
				other.Add(1)
			}
		})
	}
	defer func() { cancel(); wg.Wait() }()
	deadline := time.Now().Add(30 * time.Second)
	for refused.Load() != polls-int32(limits.MaxPollsPerCredential) {
		if time.Now().After(deadline) {
			t.Fatalf("after 30s: %d polls refused, %d otherwise answered, want %d refused", refused.Load(), other.Load(), polls-limits.MaxPollsPerCredential)
		}
		time.Sleep(50 * time.Millisecond)
	}

	rcv := newReceiver(t)
	createEverySecond(t, f.AdminToken, base, "flowing", rcv.srv.URL, nil)
	startWorkers(t, 1, []string{base}, f.WorkerToken, zaptest.NewLogger(t, zaptest.Level(zap.WarnLevel)))
	waitFor(t, 15*time.Second, func() bool {
		n := 0
		for _, r := range runsOf(t, f.AdminToken, base, "flowing") {
			if r.Status == jfapi.RunSucceeded && r.Attempts[0].Worker == "w1" {
				n++
			}
		}
		return n >= 3
	})
	if got := refused.Load(); got != polls-int32(limits.MaxPollsPerCredential) || other.Load() != 0 {
		t.Fatalf("%d polls refused with 429 and Retry-After, %d otherwise answered; want %d refused, none answered", got, other.Load(), polls-limits.MaxPollsPerCredential)
	}
}
