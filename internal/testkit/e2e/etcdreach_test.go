package e2e_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	jfapi "github.com/jobfleet/jobfleet/api"
	"github.com/jobfleet/jobfleet/egress"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"

	"github.com/jobfleet/jobfleet/dispatch/worker"
	"github.com/jobfleet/jobfleet/internal/testkit/fleettest"
)

// TestWorkerWithoutEtcdEndpointsStillDeniesEtcd runs a worker that knows
// only the orchestrator's URL (as with --orchestrators: it was not told
// etcd's endpoints) and allows loopback, where etcd listens. Jobs aimed at
// etcd, directly and through a 307 redirect, must fail with a refusal
// naming etcd's endpoint, which the worker learned from its poll replies,
// before anything is sent; etcd gets no key.
func TestWorkerWithoutEtcdEndpointsStillDeniesEtcd(t *testing.T) {
	f := fleettest.New(t, etcd, fleettest.Options{Partitions: 2, Scheduler: true, Quiet: true})
	f.Join("m1")
	f.WaitSettled(15 * time.Second)
	base := f.URLs()[0]
	etcdURL := etcd.Endpoints()[0]

	redirect := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, etcdURL+"/v3/kv/put", http.StatusTemporaryRedirect)
	}))
	defer redirect.Close()

	ctx, cancel := context.WithCancel(context.Background())
	w, err := worker.New(worker.Config{
		ID: "w1", Orchestrators: worker.StaticOrchestrators(base), ServeHTTP: true, PollWait: time.Second, Token: f.WorkerToken,
		HTTPPolicy: egress.Policy{Allow: []string{"127.0.0.0/8", "::1"}}, // no Fleet: etcd unknown
		Logger:     zaptest.NewLogger(t, zaptest.Level(zap.WarnLevel)),
	})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { defer close(done); w.Run(ctx) }()
	defer func() { cancel(); <-done }()

	key := base64.StdEncoding.EncodeToString([]byte("reached-etcd"))
	put := json.RawMessage(`{"key":"` + key + `","value":"` + key + `"}`)
	jobs := []jfapi.Job{
		{ID: "etcd-put", Executor: jfapi.Executor{Type: "http", URL: etcdURL + "/v3/kv/put", Body: put}},
		{ID: "etcd-redirect", Executor: jfapi.Executor{Type: "http", URL: redirect.URL + "/go", Body: put, FollowRedirects: true}},
	}
	final := finalRuns(t, f, base, jobs)
	want := "refused: fleet etcd endpoint " + etcdURL
	for _, j := range jobs {
		r := final[j.ID]
		if r.Status != jfapi.RunDead || len(r.Attempts) != 1 || !strings.Contains(r.Attempts[0].Error, want) {
			t.Errorf("job %s: run %s %+v, want dead with an error containing %q", j.ID, r.Status, r.Attempts, want)
		}
	}
	if resp, err := etcd.Client(t).Get(context.Background(), "reached-etcd"); err != nil || resp.Count != 0 {
		t.Errorf("etcd key written by a job: %v, %v", resp, err)
	}
}
