package worker

import "github.com/prometheus/client_golang/prometheus"

// Metrics are the worker's Prometheus metrics. A nil *Metrics records
// nothing. Create one per registry with NewMetrics.
type Metrics struct {
	started       prometheus.Counter
	finished      *prometheus.CounterVec
	inFlight      prometheus.Gauge
	reportsFailed prometheus.Counter
	pollErrors    prometheus.Counter
}

// NewMetrics creates the metrics and registers them with reg (nil: not
// registered).
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		started: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "jobfleet_worker_attempts_started_total", Help: "Attempts this worker took from orchestrators.",
		}),
		finished: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "jobfleet_worker_attempts_finished_total", Help: "Attempts this worker finished, by result (succeeded, failed, stale: dropped without a report).",
		}, []string{"result"}),
		inFlight: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "jobfleet_worker_attempts_in_flight", Help: "Attempts this worker holds now.",
		}),
		reportsFailed: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "jobfleet_worker_reports_failed_total", Help: "Completions that could not be delivered; the orchestrator retries those runs after their lease.",
		}),
		pollErrors: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "jobfleet_worker_poll_errors_total", Help: "Polls that failed (network error, 503, bad reply).",
		}),
	}
	if reg != nil {
		reg.MustRegister(m.started, m.finished, m.inFlight, m.reportsFailed, m.pollErrors)
	}
	return m
}

func (m *Metrics) attemptStarted() {
	if m != nil {
		m.started.Inc()
		m.inFlight.Inc()
	}
}

// attemptEnded records the end of an attempt; result is "succeeded",
// "failed" or "stale".
func (m *Metrics) attemptEnded(result string) {
	if m != nil {
		m.finished.WithLabelValues(result).Inc()
		m.inFlight.Dec()
	}
}

func (m *Metrics) reportFailed() {
	if m != nil {
		m.reportsFailed.Inc()
	}
}

func (m *Metrics) pollFailed() {
	if m != nil {
		m.pollErrors.Inc()
	}
}
