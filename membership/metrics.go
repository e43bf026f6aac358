package membership

import "github.com/prometheus/client_golang/prometheus"

// Metrics are the lease and registration metrics. A nil *Metrics records
// nothing. Create one per registry with NewMetrics.
type Metrics struct {
	keepaliveFailures prometheus.Counter
	keepaliveSeconds  prometheus.Histogram
	sessionsEnded     *prometheus.CounterVec
	lastRenewal       prometheus.Gauge
}

// NewMetrics creates the metrics and registers them with reg (nil: not
// registered).
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		keepaliveFailures: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "jobfleet_lease_keepalive_failures_total", Help: "Lease keepalive requests that failed.",
		}),
		keepaliveSeconds: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "jobfleet_lease_keepalive_seconds", Help: "Round trip of each lease keepalive request, from its send to its answer or failure; the session fences itself when none succeeds within the renew deadline (3/5 of the lease TTL).",
			Buckets: prometheus.ExponentialBuckets(0.001, 2, 14),
		}),
		sessionsEnded: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "jobfleet_lease_sessions_ended_total", Help: "Lease sessions that ended, by reason (lost, renew_deadline, closed).",
		}, []string{"reason"}),
		lastRenewal: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "jobfleet_lease_last_renewal_timestamp_seconds", Help: "Unix time the latest successful keepalive was sent.",
		}),
	}
	if reg != nil {
		reg.MustRegister(m.keepaliveFailures, m.keepaliveSeconds, m.sessionsEnded, m.lastRenewal)
	}
	return m
}

func (m *Metrics) keepaliveFailed() {
	if m != nil {
		m.keepaliveFailures.Inc()
	}
}

func (m *Metrics) keepaliveTook(seconds float64) {
	if m != nil {
		m.keepaliveSeconds.Observe(seconds)
	}
}

func (m *Metrics) renewed(unixSeconds float64) {
	if m != nil {
		m.lastRenewal.Set(unixSeconds)
	}
}

func (m *Metrics) ended(err error) {
	if m == nil {
		return
	}
	reason := "closed"
	switch err {
	case ErrLeaseLost:
		reason = "lost"
	case ErrRenewDeadline:
		reason = "renew_deadline"
	}
	m.sessionsEnded.WithLabelValues(reason).Inc()
}
