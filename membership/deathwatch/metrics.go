package deathwatch

import "github.com/prometheus/client_golang/prometheus"

// Metrics are the detector's Prometheus metrics. A nil *Metrics records
// nothing. Create one per registry with NewMetrics; safe for concurrent
// use.
type Metrics struct {
	probes      *prometheus.CounterVec
	detections  prometheus.Counter
	revocations prometheus.Counter
	refused     *prometheus.CounterVec
	took        prometheus.Histogram
}

// NewMetrics creates the metrics and registers them with reg (nil: not
// registered).
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		probes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "jobfleet_dead_member_probes_total", Help: "TCP probes of other members' advertised addresses, by result (connected, refused, failed: a timeout or an unreachable host, which is no evidence).",
		}, []string{"result"}),
		detections: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "jobfleet_dead_member_detections_total", Help: "Members found dead: their address refused two probes apart after it had accepted one under the same lease.",
		}),
		revocations: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "jobfleet_dead_member_revocations_total", Help: "Leases of dead members this member revoked (their registration and owner keys went with them).",
		}),
		refused: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "jobfleet_dead_member_revocations_refused_total", Help: "Revocations not made after a detection, by reason (lease_changed: the registration no longer carries the lease; lease_gone: it expired or another member revoked it first).",
		}, []string{"reason"}),
		took: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "jobfleet_dead_member_revocation_seconds", Help: "From a dead member's first refused probe until its lease was revoked.",
			Buckets: prometheus.ExponentialBuckets(0.005, 2, 12),
		}),
	}
	for _, r := range []outcome{connected, refused, failed} {
		m.probes.WithLabelValues(r.String())
	}
	for _, r := range []string{"lease_changed", "lease_gone"} {
		m.refused.WithLabelValues(r)
	}
	if reg != nil {
		reg.MustRegister(m.probes, m.detections, m.revocations, m.refused, m.took)
	}
	return m
}

func (m *Metrics) probed(o outcome) {
	if m != nil {
		m.probes.WithLabelValues(o.String()).Inc()
	}
}

func (m *Metrics) detected() {
	if m != nil {
		m.detections.Inc()
	}
}

func (m *Metrics) revoked(seconds float64) {
	if m != nil {
		m.revocations.Inc()
		m.took.Observe(seconds)
	}
}

func (m *Metrics) refusedRevocation(reason string) {
	if m != nil {
		m.refused.WithLabelValues(reason).Inc()
	}
}
