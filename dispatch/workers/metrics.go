package workers

import "github.com/prometheus/client_golang/prometheus"

// Metrics are the registry's Prometheus metrics. A nil *Metrics records
// nothing.
type Metrics struct {
	live    prometheus.Gauge
	writes  *prometheus.CounterVec
	skipped prometheus.Counter
	refused *prometheus.CounterVec
}

// NewMetrics creates the metrics and registers them with reg (nil: not
// registered).
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		live: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "jobfleet_worker_registrations", Help: "Live worker registrations, as this member's copy of the registry shows them.",
		}),
		writes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "jobfleet_worker_registration_writes_total", Help: "Worker registration writes this member made, by kind: create (a new registration), change (its executors, concurrency, orchestrators or labels changed), update (its active count or the member it registers with), bind (an ID bound to its credential apart from a create).",
		}, []string{"kind"}),
		skipped: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "jobfleet_worker_registration_updates_skipped_total", Help: "Updates of a registration's active count or member not stored: beyond the credential's write rate, or while the store is above its high-water mark. The registration was renewed.",
		}),
		refused: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "jobfleet_worker_registrations_refused_total", Help: "Worker registrations and deregistrations refused, by reason: invalid (400), labels (403: outside the credential's worker labels), rate (429), too_many (429), id_taken (409), store (507 or 503).",
		}, []string{"reason"}),
	}
	for _, r := range []string{"invalid", "labels", "rate", "too_many", "id_taken", "store"} {
		m.refused.WithLabelValues(r)
	}
	for _, k := range []string{"create", "change", "update", "bind"} {
		m.writes.WithLabelValues(k)
	}
	if reg != nil {
		reg.MustRegister(m.live, m.writes, m.skipped, m.refused)
	}
	return m
}

func (m *Metrics) setLive(n int) {
	if m != nil {
		m.live.Set(float64(n))
	}
}

func (m *Metrics) wrote(kind string) {
	if m != nil {
		m.writes.WithLabelValues(kind).Inc()
	}
}

func (m *Metrics) skip() {
	if m != nil {
		m.skipped.Inc()
	}
}

func (m *Metrics) refuse(reason string) {
	if m != nil {
		m.refused.WithLabelValues(reason).Inc()
	}
}
