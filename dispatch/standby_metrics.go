package dispatch

import "github.com/prometheus/client_golang/prometheus"

// StandbyMetrics are a Standby's Prometheus metrics. A nil *StandbyMetrics
// records nothing.
type StandbyMetrics struct {
	partitions prometheus.Gauge
	reading    prometheus.Gauge
	bytes      prometheus.Gauge
	catchUp    prometheus.Histogram
	loads      *prometheus.CounterVec
}

// NewStandbyMetrics creates the metrics and registers them with reg (nil:
// not registered).
func NewStandbyMetrics(reg prometheus.Registerer) *StandbyMetrics {
	m := &StandbyMetrics{
		partitions: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "jobfleet_standby_partitions", Help: "Partitions of other members this member keeps a warm standby copy of (it is their heir).",
		}),
		reading: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "jobfleet_standby_reading", Help: "Standby copies waiting for their first read or being read (each read holds one of the member's load slots).",
		}),
		bytes: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "jobfleet_standby_bytes", Help: "Bytes of keys and values in this member's standby copies.",
		}),
		catchUp: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "jobfleet_standby_catch_up_seconds", Help: "Wait of an acquisition served from a standby copy for the copy to see every change up to the ownership's epoch.",
			Buckets: prometheus.ExponentialBuckets(0.001, 2, 14),
		}),
		loads: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "jobfleet_standby_loads_total", Help: "Partition loads of a member with a standby, by source: warm (built from a standby copy) or cold (read from etcd).",
		}, []string{"source"}),
	}
	if reg != nil {
		reg.MustRegister(m.partitions, m.reading, m.bytes, m.catchUp, m.loads)
	}
	return m
}

// held records the copies held: how many partitions, how many of them
// not read yet, how many bytes.
func (m *StandbyMetrics) held(partitions, reading int, bytes int64) {
	if m == nil {
		return
	}
	m.partitions.Set(float64(partitions))
	m.reading.Set(float64(reading))
	m.bytes.Set(float64(bytes))
}

// took records a load: from a copy after waiting waited seconds for it to
// catch up (warm), or from etcd.
func (m *StandbyMetrics) took(warm bool, waited float64) {
	if m == nil {
		return
	}
	if warm {
		m.loads.WithLabelValues("warm").Inc()
		m.catchUp.Observe(waited)
	} else {
		m.loads.WithLabelValues("cold").Inc()
	}
}
