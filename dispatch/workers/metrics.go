package workers

import "github.com/prometheus/client_golang/prometheus"

// Metrics are the registry's Prometheus metrics. A nil *Metrics records
// nothing.
type Metrics struct {
	live    prometheus.Gauge
	writes  *prometheus.CounterVec
	skipped prometheus.Counter
	refused *prometheus.CounterVec

	streams     prometheus.Gauge
	streamsLost prometheus.Counter
	returned    prometheus.Counter
	revoked     prometheus.Counter
	notRevoked  *prometheus.CounterVec
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
		streams: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "jobfleet_worker_presence_streams", Help: "Presence streams of workers this member holds open now (one per worker registered with it).",
		}),
		streamsLost: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "jobfleet_worker_presence_lost_total", Help: "Presence streams that ended without their end (connection closed or reset: the worker's process died, or something cut the connection).",
		}),
		returned: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "jobfleet_worker_presence_returned_total", Help: "Workers whose presence stream broke and that opened a new one within the grace: alive, not revoked.",
		}),
		revoked: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "jobfleet_worker_dead_revocations_total", Help: "Registrations of dead workers this member revoked (presence stream broken, no new one within the grace): their attempts are retried at once.",
		}),
		notRevoked: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "jobfleet_worker_dead_revocations_refused_total", Help: "Revocations of dead workers' registrations not made, by reason (changed: the registration was not the one the stream began under any more).",
		}, []string{"reason"}),
	}
	m.notRevoked.WithLabelValues("changed")
	for _, r := range []string{"invalid", "labels", "rate", "too_many", "id_taken", "store"} {
		m.refused.WithLabelValues(r)
	}
	for _, k := range []string{"create", "change", "update", "bind"} {
		m.writes.WithLabelValues(k)
	}
	if reg != nil {
		reg.MustRegister(m.live, m.writes, m.skipped, m.refused, m.streams, m.streamsLost, m.returned, m.revoked, m.notRevoked)
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

func (m *Metrics) setPresence(n int) {
	if m != nil {
		m.streams.Set(float64(n))
	}
}

func (m *Metrics) presenceLost() {
	if m != nil {
		m.streamsLost.Inc()
	}
}

func (m *Metrics) presenceReturned() {
	if m != nil {
		m.returned.Inc()
	}
}

func (m *Metrics) presenceRevoked() {
	if m != nil {
		m.revoked.Inc()
	}
}

func (m *Metrics) presenceRefused(reason string) {
	if m != nil {
		m.notRevoked.WithLabelValues(reason).Inc()
	}
}
