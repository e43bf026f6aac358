// Package metrictest reads a component's Prometheus metrics in tests:
// the value of a metric, over the series whose labels a test names.
package metrictest

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

// Value returns the value of the metric name in g, summed over its
// series whose labels include every pair of labels (a label's name, then
// its value: "result", "ok"): a counter's or gauge's value, a
// histogram's or summary's count of observations. It is 0 where name has
// no such series; a failed gather fails t.
func Value(t testing.TB, g prometheus.Gatherer, name string, labels ...string) float64 {
	t.Helper()
	if len(labels)%2 != 0 {
		t.Fatalf("metrictest.Value(%s): labels %q are not name and value pairs", name, labels)
	}
	mfs, err := g.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var sum float64
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			if has(m, labels) {
				sum += value(m)
			}
		}
	}
	return sum
}

// has reports whether m carries every name and value pair of labels.
func has(m *dto.Metric, labels []string) bool {
	for i := 0; i+1 < len(labels); i += 2 {
		found := false
		for _, lp := range m.GetLabel() {
			if lp.GetName() == labels[i] && lp.GetValue() == labels[i+1] {
				found = true
				break
			}
		}
		if !found {
			return false
		}
	}
	return true
}

// value is a series' value: a counter's or gauge's, or a histogram's or
// summary's count of observations.
func value(m *dto.Metric) float64 {
	switch {
	case m.GetCounter() != nil:
		return m.GetCounter().GetValue()
	case m.GetGauge() != nil:
		return m.GetGauge().GetValue()
	case m.GetUntyped() != nil:
		return m.GetUntyped().GetValue()
	case m.GetHistogram() != nil:
		return float64(m.GetHistogram().GetSampleCount())
	case m.GetSummary() != nil:
		return float64(m.GetSummary().GetSampleCount())
	}
	return 0
}
