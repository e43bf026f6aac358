package membership

import "github.com/prometheus/client_golang/prometheus"

// Metrics are the lease and registration metrics. A nil *Metrics records
// nothing. Create one per registry with NewMetrics.
type Metrics struct {
	keepaliveFailures prometheus.Counter
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
		sessionsEnded: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "jobfleet_lease_sessions_ended_total", Help: "Lease sessions that ended, by reason (lost, renew_deadline, closed).",
		}, []string{"reason"}),
		lastRenewal: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "jobfleet_lease_last_renewal_timestamp_seconds", Help: "Unix time the latest successful keepalive was sent.",
		}),
	}
	if reg != nil {
		reg.MustRegister(m.keepaliveFailures, m.sessionsEnded, m.lastRenewal)
	}
	return m
}

func (m *Metrics) keepaliveFailed() {
	if m != nil {
		m.keepaliveFailures.Inc()
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
