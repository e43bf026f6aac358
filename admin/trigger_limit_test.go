package admin_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/jobfleet/jobfleet/api"

	"github.com/jonboulle/clockwork"
	"github.com/prometheus/client_golang/prometheus"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap/zaptest"

	"github.com/jobfleet/jobfleet/admin"
	"github.com/jobfleet/jobfleet/internal/testkit/admintest"
	"github.com/jobfleet/jobfleet/internal/testkit/etcdtest"
	"github.com/jobfleet/jobfleet/store"
)

// TestJobsTriggerRateLimit: beyond a job's burst, triggers get 429 with a
// Retry-After and store nothing; other jobs are not affected; a token
// comes back at the configured rate.
func TestJobsTriggerRateLimit(t *testing.T) {
	client := etcd.Client(t)
	ns := etcdtest.Namespace(t)
	clock := clockwork.NewFakeClock()
	s := store.NewEtcd(client, ns, testPartitions, api.DefaultLimits(), clock.Now)
	h := admin.Handler(admintest.Member{Jobs: s, Auth: testAuth}, admin.Config{
		Gatherer:     prometheus.NewRegistry(),
		Logger:       zaptest.NewLogger(t),
		TriggerRate:  2,
		TriggerBurst: 3,
		Now:          clock.Now,
		Limits:       admin.Limits{Rate: -1},
	})
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	e := &jobsEnv{t: t, client: client, ns: ns, store: s, srv: srv}
	e.doJSON("POST", "/v1/jobs", httpJob("hot", ""), http.StatusCreated, nil)
	e.doJSON("POST", "/v1/jobs", httpJob("cold", ""), http.StatusCreated, nil)

	for range 3 {
		e.doJSON("POST", jobPath("hot", "trigger"), "", http.StatusAccepted, nil)
	}
	req, _ := http.NewRequest("POST", srv.URL+jobPath("hot", "trigger"), nil)
	req.Header.Set("Authorization", "Bearer "+adminToken)
	resp, err := srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusTooManyRequests || resp.Header.Get("Retry-After") != "1" {
		t.Fatalf("4th trigger: %d, Retry-After %q; want 429 with Retry-After 1", resp.StatusCode, resp.Header.Get("Retry-After"))
	}
	count := func(id string) int64 {
		r, err := client.Get(context.Background(), s.Keys().TriggerPrefix(s.Partition(id), id), clientv3.WithPrefix(), clientv3.WithCountOnly())
		if err != nil {
			t.Fatal(err)
		}
		return r.Count
	}
	if n := count("hot"); n != 3 {
		t.Fatalf("%d trigger requests stored, want the 3 accepted", n)
	}
	e.doJSON("POST", jobPath("cold", "trigger"), "", http.StatusAccepted, nil)
	clock.Advance(500 * time.Millisecond)
	e.doJSON("POST", jobPath("hot", "trigger"), "", http.StatusAccepted, nil)
	e.doJSON("POST", jobPath("hot", "trigger"), "", http.StatusTooManyRequests, nil)
}
