package dispatch

import (
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
)

// Metrics are the dispatcher's Prometheus metrics. A nil *Metrics records
// nothing.
type Metrics struct {
	fires        *prometheus.CounterVec
	lag          prometheus.Histogram
	finished     *prometheus.CounterVec
	attempts     prometheus.Counter
	lost         prometheus.Counter
	stale        prometheus.Counter
	misfires     *prometheus.CounterVec
	commitErrors prometheus.Counter

	// active counts the active runs of the partitions owned here, by
	// state; set by the Dispatcher, read at scrape time.
	active atomic.Pointer[func() (waiting, running int)]
}

// NewMetrics creates the metrics and registers them with reg (nil: not
// registered).
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		fires: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "jobfleet_fires_total", Help: "Runs recorded by fires, by status (pending, skipped).",
		}, []string{"status"}),
		lag: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "jobfleet_schedule_lag_seconds", Help: "Fire time minus scheduled time, for on-time fires.",
			Buckets: prometheus.ExponentialBuckets(0.001, 2, 16),
		}),
		finished: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "jobfleet_runs_finished_total", Help: "Attempts finished, by resulting run status (succeeded, failed, dead).",
		}, []string{"status"}),
		attempts: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "jobfleet_attempts_started_total", Help: "Attempts handed to workers.",
		}),
		lost: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "jobfleet_attempts_lost_total", Help: "Attempts whose run lease expired or that ran past their timeout.",
		}),
		stale: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "jobfleet_stale_reports_total", Help: "Heartbeats and completions refused because their attempt was no longer current.",
		}),
		misfires: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "jobfleet_misfires_total", Help: "Scheduled times missed while their partition had no owner, by fate (fired, skipped, dropped).",
		}, []string{"fate"}),
		commitErrors: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "jobfleet_dispatch_commit_errors_total", Help: "Fenced writes of the scheduler that failed (etcd errors or fencing).",
		}),
	}
	active := &activeCollector{m: m,
		waiting: prometheus.NewDesc("jobfleet_runs_waiting", "Runs of the partitions owned here that wait for a worker (pending, or failed with a retry due). Growing: no worker takes them.", nil, nil),
		running: prometheus.NewDesc("jobfleet_runs_running", "Runs of the partitions owned here with an attempt held by a worker.", nil, nil),
	}
	if reg != nil {
		reg.MustRegister(m.fires, m.lag, m.finished, m.attempts, m.lost, m.stale, m.misfires, m.commitErrors, active)
	}
	return m
}

// activeCollector reports the waiting and running gauges from one count
// per scrape.
type activeCollector struct {
	m                *Metrics
	waiting, running *prometheus.Desc
}

func (c *activeCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.waiting
	ch <- c.running
}

func (c *activeCollector) Collect(ch chan<- prometheus.Metric) {
	var waiting, running int
	if f := c.m.active.Load(); f != nil {
		waiting, running = (*f)()
	}
	ch <- prometheus.MustNewConstMetric(c.waiting, prometheus.GaugeValue, float64(waiting))
	ch <- prometheus.MustNewConstMetric(c.running, prometheus.GaugeValue, float64(running))
}

func (m *Metrics) setActiveSource(f func() (waiting, running int)) {
	if m != nil {
		m.active.Store(&f)
	}
}

func (m *Metrics) fired(status string, n int) {
	if m != nil && n > 0 {
		m.fires.WithLabelValues(status).Add(float64(n))
	}
}

func (m *Metrics) observeLag(seconds float64) {
	if m != nil {
		m.lag.Observe(seconds)
	}
}

func (m *Metrics) finishedRun(status string) {
	if m != nil {
		m.finished.WithLabelValues(status).Inc()
	}
}

func (m *Metrics) attemptStarted() {
	if m != nil {
		m.attempts.Inc()
	}
}

func (m *Metrics) attemptLost() {
	if m != nil {
		m.lost.Inc()
	}
}

func (m *Metrics) staleReport() {
	if m != nil {
		m.stale.Inc()
	}
}

func (m *Metrics) misfire(fate string, n int) {
	if m != nil && n > 0 {
		m.misfires.WithLabelValues(fate).Add(float64(n))
	}
}

func (m *Metrics) commitError() {
	if m != nil {
		m.commitErrors.Inc()
	}
}
