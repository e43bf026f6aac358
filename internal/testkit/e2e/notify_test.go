package e2e_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	jfapi "github.com/jobfleet/jobfleet/api"
	"github.com/jobfleet/jobfleet/egress"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"

	"github.com/jobfleet/jobfleet/dispatch/worker"
	"github.com/jobfleet/jobfleet/internal/orchestrator"
	"github.com/jobfleet/jobfleet/internal/testkit/fleettest"
	"github.com/jobfleet/jobfleet/shard"
)

// notice is one notification a receiver got.
type notice struct{ job, event, attempt string }

// notifyReceiver records notifications; it answers 503 while down.
type notifyReceiver struct {
	srv  *httptest.Server
	down atomic.Bool
	mu   sync.Mutex
	got  []notice
}

func newNotifyReceiver(t *testing.T) *notifyReceiver {
	r := &notifyReceiver{}
	r.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		r.mu.Lock()
		r.got = append(r.got, notice{unescapeJobID(t, req.Header.Get(worker.HeaderJobID)), req.Header.Get("Jobfleet-Notify-Event"), req.Header.Get(worker.HeaderAttempt)})
		r.mu.Unlock()
		if r.down.Load() {
			w.WriteHeader(http.StatusServiceUnavailable)
		}
	}))
	t.Cleanup(r.srv.Close)
	return r
}

func (r *notifyReceiver) of(job string) []notice {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []notice
	for _, n := range r.got {
		if n.job == job {
			out = append(out, n)
		}
	}
	return out
}

func outboxLen(t *testing.T, f *fleettest.Fleet) int64 {
	t.Helper()
	resp, err := f.Client.Get(context.Background(), f.NS+"outbox/", clientv3.WithPrefix(), clientv3.WithCountOnly())
	if err != nil {
		t.Fatal(err)
	}
	return resp.Count
}

// TestNotificationsAreDeliveredOnceThroughRetriesAndCrashes: on a
// two-member fleet with a worker, a run that fails twice and then
// succeeds notifies its succeeded subscriber once; a dead run notifies
// its dead subscriber once; and a notification whose receiver is down
// when its run succeeds is delivered by the next owner after the owner
// crashes.
func TestNotificationsAreDeliveredOnceThroughRetriesAndCrashes(t *testing.T) {
	t.Parallel()
	f := fleettest.New(t, etcd, fleettest.Options{Partitions: 4, Scheduler: true, Quiet: true,
		Notify: orchestrator.NotifyConfig{Policy: egress.Policy{Allow: []string{"127.0.0.1"}}}})
	f.Join("m1")
	f.Join("m2")
	f.WaitSettled(15 * time.Second)
	base := f.URLs()[0]
	rcv := newNotifyReceiver(t)
	var hookTries sync.Map // job ID → *atomic.Int32
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id := unescapeJobID(t, r.Header.Get(worker.HeaderJobID))
		n, _ := hookTries.LoadOrStore(id, new(atomic.Int32))
		try := n.(*atomic.Int32).Add(1)
		if id == "notify/dead" || (id == "notify/flaky" && try <= 2) {
			w.WriteHeader(http.StatusInternalServerError)
		}
	}))
	defer hook.Close()
	startWorkers(t, 1, f.URLs(), f.WorkerToken, zaptest.NewLogger(t, zaptest.Level(zap.WarnLevel)))

	sub := func(on ...jfapi.RunStatus) []jfapi.Notification {
		return []jfapi.Notification{{On: on, URL: rcv.srv.URL + "/notify"}}
	}
	retry := jfapi.RetryPolicy{MaxAttempts: 3, InitialBackoff: jfapi.Duration(100 * time.Millisecond), MaxBackoff: jfapi.Duration(100 * time.Millisecond)}
	for _, j := range []jfapi.Job{
		{ID: "notify/flaky", Executor: jfapi.Executor{Type: "http", URL: hook.URL}, Retry: retry, Notify: sub(jfapi.RunSucceeded, jfapi.RunDead)},
		{ID: "notify/dead", Executor: jfapi.Executor{Type: "http", URL: hook.URL}, Retry: retry, Notify: sub(jfapi.RunDead)},
	} {
		if code := api(t, f.AdminToken, "POST", base, "/v1/jobs", j, nil); code != http.StatusCreated {
			t.Fatalf("create %s: %d", j.ID, code)
		}
	}
	waitFor(t, 20*time.Second, func() bool {
		return len(rcv.of("notify/flaky")) >= 1 && len(rcv.of("notify/dead")) >= 1 && outboxLen(t, f) == 0
	})
	if got := rcv.of("notify/flaky"); len(got) != 1 || got[0] != (notice{"notify/flaky", "succeeded", "3"}) {
		t.Errorf("notify/flaky notified %+v, want succeeded at attempt 3 once", got)
	}
	if got := rcv.of("notify/dead"); len(got) != 1 || got[0] != (notice{"notify/dead", "dead", "3"}) {
		t.Errorf("notify/dead notified %+v, want dead at attempt 3 once", got)
	}

	// The receiver is down when the run succeeds; the owner crashes
	// before it comes back.
	rcv.down.Store(true)
	id := "notify/handoff"
	if code := api(t, f.AdminToken, "POST", base, "/v1/jobs", jfapi.Job{ID: id, Executor: jfapi.Executor{Type: "http", URL: hook.URL}, Notify: sub(jfapi.RunSucceeded)}, nil); code != http.StatusCreated {
		t.Fatalf("create %s: %d", id, code)
	}
	waitFor(t, 20*time.Second, func() bool { return len(rcv.of(id)) >= 1 })
	table, _, err := f.Owners(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	owner := table[shard.Partition(id, f.Partitions())].Member
	survivor := map[string]string{"m1": "m2", "m2": "m1"}[owner]
	f.Crash(owner)
	rcv.down.Store(false)
	waitFor(t, 30*time.Second, func() bool { return outboxLen(t, f) == 0 })
	got := rcv.of(id)
	if last := got[len(got)-1]; last != (notice{id, "succeeded", "1"}) {
		t.Fatalf("%s notified %+v, want succeeded at attempt 1 last", id, got)
	}
	t.Logf("the notification of %s was tried %d times; delivered after %s crashed (by %s)", id, len(got), owner, survivor)
}

// TestNotifyURLTheFleetRefusesIsRefusedWhenSaved: a job whose notify URL
// the members' destination policy would refuse to deliver to is refused
// when it is saved (create, PUT, batch), naming the entry's url and the
// flag that would allow it; nothing is stored. One the policy permits is
// saved.
func TestNotifyURLTheFleetRefusesIsRefusedWhenSaved(t *testing.T) {
	f := fleettest.New(t, etcd, fleettest.Options{Partitions: 2, Scheduler: true, Quiet: true,
		Notify: orchestrator.NotifyConfig{Policy: egress.Policy{Deny: []string{"hooks.denied.example"}}}})
	f.Join("m1")
	f.WaitSettled(15 * time.Second)
	base := f.URLs()[0]
	job := func(id, url string) jfapi.Job {
		return jfapi.Job{ID: id, Schedule: "@daily", Executor: jfapi.Executor{Type: "http", URL: "https://svc.example/run"},
			Notify: []jfapi.Notification{{On: []jfapi.RunStatus{jfapi.RunDead}, URL: "https://hooks.example/ok"}, {On: []jfapi.RunStatus{jfapi.RunDead}, URL: url}}}
	}
	for _, tc := range []struct{ name, url, want string }{
		{"loopback", "http://127.0.0.1:9000/hook", "--notify-allow"},
		{"link-local", "http://169.254.169.254/latest", "--notify-allow"},
		{"deny list", "https://hooks.denied.example/x", "deny list"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var reply struct {
				Error string `json:"error"`
			}
			id := "refused/" + strings.ReplaceAll(tc.name, " ", "-")
			if code := api(t, f.AdminToken, "POST", base, "/v1/jobs", job(id, tc.url), &reply); code != http.StatusBadRequest ||
				!strings.Contains(reply.Error, "notify[1].url") || !strings.Contains(reply.Error, tc.want) {
				t.Errorf("create: %d %q, want 400 naming notify[1].url and %s", code, reply.Error, tc.want)
			}
			if code := api(t, f.AdminToken, "PUT", base, "/v1/jobs/"+url.PathEscape(id), job(id, tc.url), &reply); code != http.StatusBadRequest ||
				!strings.Contains(reply.Error, "notify[1].url") {
				t.Errorf("put: %d %q, want 400 naming notify[1].url", code, reply.Error)
			}
			var batch jfapi.BatchReply
			raw, _ := json.Marshal(job(id, tc.url))
			if code := api(t, f.AdminToken, "POST", base, "/v1/jobs:batch", jfapi.BatchRequest{Jobs: []json.RawMessage{raw}}, &batch); code != http.StatusBadRequest ||
				len(batch.Results) != 1 || !strings.Contains(batch.Results[0].Error, "notify[1].url") {
				t.Errorf("batch: %d %+v, want 400 naming notify[1].url", code, batch)
			}
			if code := api(t, f.AdminToken, "GET", base, "/v1/jobs/"+url.PathEscape(id), nil, nil); code != http.StatusNotFound {
				t.Errorf("get after the refusals: %d, want 404 (nothing stored)", code)
			}
		})
	}
	if code := api(t, f.AdminToken, "POST", base, "/v1/jobs", job("permitted", "https://hooks.example/also"), nil); code != http.StatusCreated {
		t.Fatalf("create with permitted notify URLs: %d, want 201", code)
	}
}
