package storage

import "github.com/prometheus/client_golang/prometheus"

// Metrics are the Compactor's and Monitor's Prometheus metrics. A nil
// *Metrics records nothing. Create one per registry with NewMetrics.
type Metrics struct {
	compacted   prometheus.Gauge
	compactions *prometheus.CounterVec
	dbSize      prometheus.Gauge
	dbInUse     prometheus.Gauge
	quota       prometheus.Gauge
	highWater   prometheus.Gauge
	noSpace     prometheus.Gauge
	history     prometheus.Gauge
	historyRuns prometheus.Counter
}

// NewMetrics creates the metrics and registers them with reg (nil: not
// registered).
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		compacted: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "jobfleet_etcd_compacted_revision", Help: "The revision the fleet last compacted etcd to, as its compaction record says (0 before the first).",
		}),
		compactions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "jobfleet_etcd_compactions_total", Help: "Compactions this member made, by result (ok, already_compacted, failed).",
		}, []string{"result"}),
		dbSize: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "jobfleet_etcd_db_size_bytes", Help: "etcd's database file size (what its quota counts), largest over the endpoints, at the last check.",
		}),
		dbInUse: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "jobfleet_etcd_db_size_in_use_bytes", Help: "etcd's database size in use (without free pages; defragmenting shrinks the file to about this), largest over the endpoints.",
		}),
		quota: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "jobfleet_etcd_quota_bytes", Help: "etcd's space quota as this member counts it (--etcd-quota-bytes, or what etcd reports).",
		}),
		highWater: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "jobfleet_storage_high_water", Help: "1 while etcd's database is above the high-water mark (new jobs and triggers are refused with 507), else 0.",
		}),
		noSpace: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "jobfleet_etcd_nospace_alarm", Help: "1 while etcd's NOSPACE alarm is raised (writes refused, firing stopped), else 0.",
		}),
		history: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "jobfleet_etcd_history_bytes", Help: "etcd history written since this member's last compaction round, as it measures it: the larger of the bytes its API wrote and the growth of etcd's database in use. A compaction starts when it passes the compaction size.",
		}),
		historyRuns: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "jobfleet_etcd_history_compactions_total", Help: "Compaction rounds this member started before the end of the interval because the history passed the compaction size.",
		}),
	}
	if reg != nil {
		reg.MustRegister(m.compacted, m.compactions, m.dbSize, m.dbInUse, m.quota, m.highWater, m.noSpace, m.history, m.historyRuns)
	}
	return m
}

func (m *Metrics) setHistory(b int64) {
	if m != nil {
		m.history.Set(float64(b))
	}
}

func (m *Metrics) historyRound() {
	if m != nil {
		m.historyRuns.Inc()
	}
}

func (m *Metrics) setCompacted(rev int64) {
	if m != nil {
		m.compacted.Set(float64(rev))
	}
}

func (m *Metrics) compaction(result string) {
	if m != nil {
		m.compactions.WithLabelValues(result).Inc()
	}
}

func (m *Metrics) setState(s State) {
	if m == nil {
		return
	}
	m.dbSize.Set(float64(s.DBSize))
	m.dbInUse.Set(float64(s.DBSizeInUse))
	m.quota.Set(float64(s.Quota))
	m.highWater.Set(b2f(s.AboveHighWater))
	m.noSpace.Set(b2f(s.NoSpace))
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}
