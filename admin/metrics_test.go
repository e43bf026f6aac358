package admin_test

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/jobfleet/jobfleet/admin"
)

func TestMetricsHandlerServesOnlyMetricsAndProbes(t *testing.T) {
	reg := prometheus.NewRegistry()
	c := prometheus.NewCounter(prometheus.CounterOpts{Name: "jobfleet_test_total", Help: "test"})
	reg.MustRegister(c)
	c.Inc()
	m := &fakeMember{ready: true}
	h := admin.MetricsHandler(m, admin.Config{Gatherer: reg})

	for _, tt := range []struct {
		method, path string
		want         int
		body         string
	}{
		{"GET", "/metrics", http.StatusOK, "jobfleet_test_total 1"},
		{"GET", "/healthz", http.StatusOK, `"ok"`},
		{"GET", "/readyz", http.StatusOK, `"ready"`},
		{"GET", "/v1/cluster/members", http.StatusNotFound, "no such endpoint"},
		{"GET", "/v1/jobs", http.StatusNotFound, "no such endpoint"},
		{"POST", "/v1/cluster/drain", http.StatusNotFound, "no such endpoint"},
		{"POST", "/v1/worker/poll", http.StatusNotFound, "no such endpoint"},
		{"POST", "/metrics", http.StatusMethodNotAllowed, "not allowed"},
	} {
		t.Run(tt.method+" "+tt.path, func(t *testing.T) {
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, httptest.NewRequest(tt.method, tt.path, nil))
			if rec.Code != tt.want || !strings.Contains(rec.Body.String(), tt.body) {
				t.Errorf("%s %s: %d %q, want %d containing %q", tt.method, tt.path, rec.Code, rec.Body.String(), tt.want, tt.body)
			}
		})
	}
	if m.drains.Load() != 0 {
		t.Error("the metrics listener drained the member")
	}

	m.healthErr = errors.New("lease not renewed")
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("GET", "/healthz", nil))
	if rec.Code != http.StatusServiceUnavailable {
		t.Errorf("GET /healthz of an unhealthy member: %d, want 503", rec.Code)
	}
}
