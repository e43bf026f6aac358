package admin_test

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap/zaptest"

	"github.com/jobfleet/jobfleet/admin"
	"github.com/jobfleet/jobfleet/internal/orchestrator"
	"github.com/jobfleet/jobfleet/internal/testkit/etcdtest"
)

// TestMemberOfBeforeStart: the Member of an orchestrator that has not
// joined the cluster has no job store and no worker protocol yet (nil
// interfaces, not typed nils, and ErrNotStarted), and the API answers 503
// saying so; its worker registry and credentials are there from the
// start, so requests are authenticated while it joins.
func TestMemberOfBeforeStart(t *testing.T) {
	o, err := orchestrator.New(etcd.Client(t), orchestrator.Config{
		ID: "m1", Advertise: "http://m1.invalid", Namespace: etcdtest.Namespace(t), Partitions: 1, LeaseTTL: 5 * time.Second,
		Logger: zaptest.NewLogger(t),
	})
	if err != nil {
		t.Fatal(err)
	}
	m := admin.MemberOf(o)
	if s, err := m.JobStore(); s != nil || !errors.Is(err, admin.ErrNotStarted) {
		t.Errorf("JobStore before start = %v (nil: %v), %v; want a nil interface and ErrNotStarted", s, s == nil, err)
	}
	if p, err := m.WorkerProtocol(); p != nil || !errors.Is(err, admin.ErrNotStarted) {
		t.Errorf("WorkerProtocol before start = %v (nil: %v), %v; want a nil interface and ErrNotStarted", p, p == nil, err)
	}
	if m.WorkerRegistry() == nil || m.Authenticator() == nil {
		t.Errorf("WorkerRegistry, Authenticator before start: %v, %v; want the orchestrator's", m.WorkerRegistry(), m.Authenticator())
	}
	h := admin.Handler(m, admin.Config{Gatherer: prometheus.NewRegistry(), Insecure: true})
	for path, want := range map[string]string{
		"/v1/jobs":             "jobs are not available on this member yet: it has not joined the cluster yet",
		"/v1/cluster/overview": "this member has not joined the cluster yet",
	} {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest("GET", path, nil))
		if rec.Code != http.StatusServiceUnavailable {
			t.Errorf("GET %s: %d %s, want 503", path, rec.Code, rec.Body)
			continue
		}
		if got := errorMessage(t, rec.Body.Bytes()); got != want {
			t.Errorf("GET %s: message %q, want %q", path, got, want)
		}
	}
}
