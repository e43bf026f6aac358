package notify

import "github.com/prometheus/client_golang/prometheus"

// Results of a notification, as in jobfleet_notifications_total{result}.
const (
	resultDelivered = "delivered" // its URL answered 2xx
	resultFailed    = "failed"    // a try failed; retried with backoff
	resultGivenUp   = "given_up"  // past the max age, refused by the policy, or its run document gone
	resultDropped   = "dropped"   // beyond its job's bound of pending notifications
)

// Metrics are the deliverer's Prometheus metrics. A nil *Metrics records
// nothing. Safe for concurrent use.
type Metrics struct {
	results  *prometheus.CounterVec
	pending  prometheus.Gauge
	inFlight prometheus.Gauge
	open     prometheus.Gauge
}

// NewMetrics returns the metrics, registered with reg unless it is nil.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		results: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "jobfleet_notifications_total",
			Help: "Run notifications by result: delivered (2xx), failed (a try failed; retried with backoff), given_up (not delivered within the notify max age, its destination refused by the policy, or its run document gone), dropped (the oldest beyond its job's bound of pending notifications).",
		}, []string{"result"}),
		pending: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "jobfleet_notifications_pending", Help: "Run notifications of the partitions owned here waiting for delivery (in flight included).",
		}),
		inFlight: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "jobfleet_notifications_in_flight", Help: "Run notification deliveries in flight on this member.",
		}),
		open: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "jobfleet_notification_circuits_open", Help: "Notification destinations whose circuit is open (too many failed tries in a row): nothing is sent there until a probe succeeds.",
		}),
	}
	if reg != nil {
		reg.MustRegister(m.results, m.pending, m.inFlight, m.open)
	}
	return m
}

func (m *Metrics) result(r string, n int) {
	if m != nil && n > 0 {
		m.results.WithLabelValues(r).Add(float64(n))
	}
}

func (m *Metrics) gauges(pending, inFlight, open int) {
	if m != nil {
		m.pending.Set(float64(pending))
		m.inFlight.Set(float64(inFlight))
		m.open.Set(float64(open))
	}
}
