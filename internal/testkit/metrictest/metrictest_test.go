package metrictest_test

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/jobfleet/jobfleet/internal/testkit/metrictest"
)

// TestValue sums the series whose labels match, of counters, gauges and
// histograms alike, and is 0 for a metric without such a series.
func TestValue(t *testing.T) {
	reg := prometheus.NewRegistry()
	c := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "c_total"}, []string{"role", "scope"})
	g := prometheus.NewGauge(prometheus.GaugeOpts{Name: "g"})
	h := prometheus.NewHistogram(prometheus.HistogramOpts{Name: "h_seconds"})
	reg.MustRegister(c, g, h)
	c.WithLabelValues("operator", "all").Add(2)
	c.WithLabelValues("operator", "prefix").Add(3)
	c.WithLabelValues("worker", "all").Add(5)
	g.Set(7)
	h.Observe(0.1)
	h.Observe(0.2)
	for _, tt := range []struct {
		name   string
		labels []string
		want   float64
	}{
		{"c_total", nil, 10},
		{"c_total", []string{"role", "operator"}, 5},
		{"c_total", []string{"role", "operator", "scope", "prefix"}, 3},
		{"c_total", []string{"role", "admin"}, 0},
		{"g", nil, 7},
		{"h_seconds", nil, 2},
		{"absent", nil, 0},
	} {
		if got := metrictest.Value(t, reg, tt.name, tt.labels...); got != tt.want {
			t.Errorf("Value(%s, %q) = %v, want %v", tt.name, tt.labels, got, tt.want)
		}
	}
}
