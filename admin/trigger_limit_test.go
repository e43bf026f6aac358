package admin_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/jobfleet/jobfleet/admin"
)

// TestJobsTriggerRateLimit: beyond a job's burst, triggers get 429 with a
// Retry-After and store nothing; other jobs are not affected; a token
// comes back at the configured rate.
func TestJobsTriggerRateLimit(t *testing.T) {
	clock := clockwork.NewFakeClock()
	e := newConfiguredEnv(t, clock.Now, func(cfg *admin.Config) {
		cfg.TriggerRate, cfg.TriggerBurst = 2, 3
		cfg.Now = clock.Now
	})
	client, s, srv := e.client, e.store, e.srv
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
