package dispatch

import (
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
)

// limitMetrics are the metrics of limit keys.
type limitMetrics struct {
	conflicts prometheus.Counter
	running   *prometheus.Desc
	waiting   *prometheus.Desc
	src       atomic.Pointer[func() (running, waiting map[string]int)] // set by the Dispatcher; read at scrape time
}

func newLimitMetrics() *limitMetrics {
	return &limitMetrics{
		conflicts: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "jobfleet_limit_grant_conflicts_total", Help: "Grants under limit keys that did not apply because another grant under one of the keys applied first, or that found no room any more; the runs wait for a later poll.",
		}),
		running: prometheus.NewDesc("jobfleet_limit_running", "Slots of each limit key held by attempts of the partitions owned here (their sum over the members is the key's running count).", []string{"key"}, nil),
		waiting: prometheus.NewDesc("jobfleet_limit_waiting", "Runs and items of the partitions owned here that could start but for a limit key, by the key they wait for.", []string{"key"}, nil),
	}
}

func (l *limitMetrics) Describe(ch chan<- *prometheus.Desc) {
	l.conflicts.Describe(ch)
	ch <- l.running
	ch <- l.waiting
}

func (l *limitMetrics) Collect(ch chan<- prometheus.Metric) {
	l.conflicts.Collect(ch)
	src := l.src.Load()
	if src == nil {
		return
	}
	running, waiting := (*src)()
	for k, n := range running {
		ch <- prometheus.MustNewConstMetric(l.running, prometheus.GaugeValue, float64(n), k)
	}
	for k, n := range waiting {
		ch <- prometheus.MustNewConstMetric(l.waiting, prometheus.GaugeValue, float64(n), k)
	}
}

func (m *Metrics) limitConflict() {
	if m != nil {
		m.limits.conflicts.Inc()
	}
}

func (m *Metrics) setLimitSource(f func() (running, waiting map[string]int)) {
	if m != nil {
		m.limits.src.Store(&f)
	}
}
