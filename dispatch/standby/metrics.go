package standby

import "github.com/prometheus/client_golang/prometheus"

// Metrics are a Standby's Prometheus metrics. A nil *Metrics records
// nothing.
type Metrics struct {
	partitions prometheus.Gauge
	reading    prometheus.Gauge
	bytes      prometheus.Gauge
	catchUp    prometheus.Histogram
	timeouts   prometheus.Counter
	loads      *prometheus.CounterVec
}

// NewMetrics creates the metrics and registers them with reg (nil: not
// registered).
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		partitions: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "jobfleet_standby_partitions", Help: "Partitions this member keeps a warm standby copy of: those it is the heir of, and those the ring gave it whose copy its acquisition has not taken yet.",
		}),
		reading: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "jobfleet_standby_reading", Help: "Standby copies waiting for their first read or being read (each read holds one of the member's load slots).",
		}),
		bytes: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "jobfleet_standby_bytes", Help: "Bytes of keys and values in this member's standby copies.",
		}),
		catchUp: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "jobfleet_standby_catch_up_seconds", Help: "Wait of an acquisition for its standby copy to see every change up to the ownership's epoch, whether the copy was then used or, past the bound, the partition read from etcd (jobfleet_standby_catch_up_timeouts_total).",
			Buckets: prometheus.ExponentialBuckets(0.001, 2, 14),
		}),
		timeouts: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "jobfleet_standby_catch_up_timeouts_total", Help: "Acquisitions whose standby copy did not see every change up to the ownership's epoch within the catch-up bound: the partition was read from etcd after that wait.",
		}),
		loads: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "jobfleet_standby_loads_total", Help: "Partition loads of a member with a standby, by source: warm (built from a standby copy) or cold (read from etcd).",
		}, []string{"source"}),
	}
	if reg != nil {
		reg.MustRegister(m.partitions, m.reading, m.bytes, m.catchUp, m.timeouts, m.loads)
	}
	return m
}

// held records the copies held: how many partitions, how many of them
// not read yet, how many bytes.
func (m *Metrics) held(partitions, reading int, bytes int64) {
	if m == nil {
		return
	}
	m.partitions.Set(float64(partitions))
	m.reading.Set(float64(reading))
	m.bytes.Set(float64(bytes))
}

// caughtUp records an acquisition's wait of waited seconds for its copy:
// in time (the copy is used) or not (the partition is read from etcd).
func (m *Metrics) caughtUp(waited float64, inTime bool) {
	if m == nil {
		return
	}
	m.catchUp.Observe(waited)
	if !inTime {
		m.timeouts.Inc()
	}
}

// loaded records a load: built from a copy (warm) or read from etcd.
func (m *Metrics) loaded(warm bool) {
	if m == nil {
		return
	}
	source := "cold"
	if warm {
		source = "warm"
	}
	m.loads.WithLabelValues(source).Inc()
}
