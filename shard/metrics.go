package shard

import "github.com/prometheus/client_golang/prometheus"

// Metrics are the controller's Prometheus metrics. A nil *Metrics records
// nothing. Create one per registry with NewMetrics.
type Metrics struct {
	owned        prometheus.Gauge
	targeted     prometheus.Gauge
	acquisitions prometheus.Counter
	releases     *prometheus.CounterVec
	fencing      prometheus.Counter
	refences     prometheus.Counter
	acquireWait  prometheus.Histogram
	releaseTime  prometheus.Histogram
	rebalances   prometheus.Counter
}

// NewMetrics creates the metrics and registers them with reg (nil: not
// registered).
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		owned: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "jobfleet_partitions_owned", Help: "Partitions this member owns now.",
		}),
		targeted: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "jobfleet_partitions_targeted", Help: "Partitions the ring assigns to this member now.",
		}),
		acquisitions: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "jobfleet_partition_acquisitions_total", Help: "Partitions acquired.",
		}),
		releases: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "jobfleet_partition_releases_total", Help: "Partitions released, by reason (rebalance, shutdown, lost, lease_lost, work_exited).",
		}, []string{"reason"}),
		fencing: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "jobfleet_fencing_failures_total", Help: "Fenced transactions refused because the owner key was gone or had another epoch.",
		}),
		refences: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "jobfleet_partition_refences_total", Help: "Owner keys rewritten after a write whose outcome was unknown, so that it can no longer apply (Ownership.Refence).",
		}),
		acquireWait: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "jobfleet_handoff_acquire_wait_seconds", Help: "Time from the ring assigning a partition to this member until it owned it.",
			Buckets: prometheus.ExponentialBuckets(0.001, 2, 16),
		}),
		releaseTime: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "jobfleet_handoff_release_seconds", Help: "Time to stop a released partition's work and delete its owner key.",
			Buckets: prometheus.ExponentialBuckets(0.001, 2, 16),
		}),
		rebalances: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "jobfleet_rebalances_total", Help: "Ring recomputations after membership changes.",
		}),
	}
	if reg != nil {
		reg.MustRegister(m.owned, m.targeted, m.acquisitions, m.releases, m.fencing, m.refences, m.acquireWait, m.releaseTime, m.rebalances)
	}
	return m
}

func (m *Metrics) fencingFailure() {
	if m != nil {
		m.fencing.Inc()
	}
}

func (m *Metrics) refenced() {
	if m != nil {
		m.refences.Inc()
	}
}

func (m *Metrics) setOwned(owned, targeted int) {
	if m != nil {
		m.owned.Set(float64(owned))
		m.targeted.Set(float64(targeted))
	}
}

func (m *Metrics) acquired(wait float64) {
	if m != nil {
		m.acquisitions.Inc()
		m.acquireWait.Observe(wait)
	}
}

func (m *Metrics) released(reason string, took float64) {
	if m != nil {
		m.releases.WithLabelValues(reason).Inc()
		m.releaseTime.Observe(took)
	}
}

func (m *Metrics) rebalanced() {
	if m != nil {
		m.rebalances.Inc()
	}
}
