package httpserver

import (
	"errors"

	"github.com/prometheus/client_golang/prometheus"
)

// Reasons of jobfleet_http_connections_closed_total.
const (
	// ReasonPerAddress: a new connection refused (closed at once) because
	// its address held Config.MaxConnectionsPerAddress connections.
	ReasonPerAddress = "per_address"
	// ReasonIdleEvicted: an idle keep-alive connection closed to admit a
	// new one at Config.MaxConnections.
	ReasonIdleEvicted = "idle_evicted"
)

// metrics are one listener's metrics, labelled listener=Config.Name.
type metrics struct {
	open        prometheus.Gauge
	idle        prometheus.Gauge
	closed      *prometheus.CounterVec
	anonRefused prometheus.Counter
}

func newMetrics(name string, reg prometheus.Registerer) *metrics {
	labels := prometheus.Labels{"listener": name}
	m := &metrics{
		open: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "jobfleet_http_connections_open", ConstLabels: labels,
			Help: "Connections the HTTP listener holds open (at most its connection cap).",
		}),
		idle: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "jobfleet_http_connections_idle", ConstLabels: labels,
			Help: "Keep-alive connections of the HTTP listener waiting for their next request: the first closed when the cap is reached.",
		}),
		closed: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "jobfleet_http_connections_closed_total", ConstLabels: labels,
			Help: "Connections the HTTP listener closed to stay fair, by reason: per_address (a new connection refused, its address held its limit), idle_evicted (an idle keep-alive connection closed to admit a new one at the cap).",
		}, []string{"reason"}),
		anonRefused: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "jobfleet_http_anonymous_refused_total", ConstLabels: labels,
			Help: "Requests answered 429 by the per-address limit of requests without a valid credential.",
		}),
	}
	for _, r := range []string{ReasonPerAddress, ReasonIdleEvicted} {
		m.closed.WithLabelValues(r)
	}
	if reg == nil {
		return m
	}
	m.open = register(reg, m.open)
	m.idle = register(reg, m.idle)
	m.closed = register(reg, m.closed)
	m.anonRefused = register(reg, m.anonRefused)
	return m
}

// register registers c with reg, or returns the collector already
// registered under its name and labels (a listener started again with the
// same registry and name).
func register[C prometheus.Collector](reg prometheus.Registerer, c C) C {
	if err := reg.Register(c); err != nil {
		var are prometheus.AlreadyRegisteredError
		if errors.As(err, &are) {
			if existing, ok := are.ExistingCollector.(C); ok {
				return existing
			}
		}
	}
	return c
}
