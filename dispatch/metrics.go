package dispatch

import (
	"maps"
	"slices"
	"sync/atomic"

	"github.com/jobfleet/jobfleet/api"
	"github.com/jobfleet/jobfleet/dispatch/activity"
	"github.com/prometheus/client_golang/prometheus"
)

// Metrics are the dispatcher's Prometheus metrics. A nil *Metrics records
// nothing.
type Metrics struct {
	fires        *prometheus.CounterVec
	lag          prometheus.Histogram
	finished     *prometheus.CounterVec
	attempts     prometheus.Counter
	lost         prometheus.Counter
	stale        prometheus.Counter
	forbidden    prometheus.Counter
	misfires     *prometheus.CounterVec
	commitErrors prometheus.Counter
	commitTook   prometheus.Histogram
	inFlight     prometheus.Gauge
	window       prometheus.Gauge
	loading      prometheus.Gauge
	loadingJobs  prometheus.Gauge
	loadWaiting  prometheus.Gauge
	loadTook     prometheus.Histogram
	fireWaiting  prometheus.Gauge
	firesHeld    prometheus.Gauge
	trims        *prometheus.CounterVec
	jobsDeleted  prometheus.Counter
	completed    *prometheus.CounterVec
	paused       prometheus.Counter
	overdues     prometheus.Counter
	passedOver   *prometheus.CounterVec
	backfills    prometheus.Counter
	limits       *limitMetrics
	// activity, when set, keeps the last hour per minute (RecordActivity).
	activity *activity.Recorder

	// source reports the state of the partitions owned here; set by the
	// Dispatcher, read at scrape time.
	source atomic.Pointer[func() Stats]
}

// NewMetrics creates the metrics and registers them with reg (nil: not
// registered).
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		fires: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "jobfleet_fires_total", Help: "Runs recorded by fires, by status (pending, skipped).",
		}, []string{"status"}),
		lag: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "jobfleet_schedule_lag_seconds", Help: "Fire time minus scheduled time, for on-time fires.",
			Buckets: prometheus.ExponentialBuckets(0.001, 2, 16),
		}),
		finished: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "jobfleet_runs_finished_total", Help: "Attempts finished, and runs cancelled, by resulting run status (succeeded, failed, dead, cancelled).",
		}, []string{"status"}),
		attempts: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "jobfleet_attempts_started_total", Help: "Attempts handed to workers.",
		}),
		lost: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "jobfleet_attempts_lost_total", Help: "Attempts lost: their run lease expired, they ran past their timeout, or their worker's registration expired.",
		}),
		stale: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "jobfleet_stale_reports_total", Help: "Heartbeats and completions refused because their attempt was no longer current.",
		}),
		forbidden: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "jobfleet_protocol_forbidden_total", Help: "Heartbeats and completions refused because their attempt was handed to another credential.",
		}),
		misfires: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "jobfleet_misfires_total", Help: "Scheduled times missed while their partition had no owner, by fate (fired, skipped, dropped).",
		}, []string{"fate"}),
		commitErrors: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "jobfleet_dispatch_commit_errors_total", Help: "Fenced writes of the scheduler that failed (etcd errors or fencing).",
		}),
		commitTook: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "jobfleet_dispatch_commit_seconds", Help: "Round trip of each fenced write request the scheduler sends to etcd (one write, or a batch of queued writes of several partitions).",
			Buckets: prometheus.ExponentialBuckets(0.001, 2, 14),
		}),
		inFlight: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "jobfleet_dispatch_commits_in_flight", Help: "Fenced write requests of the scheduler in flight to etcd now.",
		}),
		window: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "jobfleet_dispatch_commit_window_ops", Help: "Operations of fenced writes the scheduler may have in flight to etcd now; halved when a request's round trip exceeds the commit latency target, grown while round trips stay within it.",
		}),
		loading: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "jobfleet_dispatch_loads_in_flight", Help: "Partitions this member is loading from etcd now (at most dispatch.Config.LoadsInFlight).",
		}),
		loadingJobs: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "jobfleet_dispatch_load_jobs_in_flight", Help: "Jobs (spec and trigger keys, counted before each load) of the partitions this member is loading now (at most dispatch.Config.LoadJobsInFlight, or one partition's when it alone is larger).",
		}),
		loadWaiting: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "jobfleet_dispatch_loads_waiting", Help: "Partitions owned here that wait for their turn to load (a load slot and room in the jobs budget): not served until loaded.",
		}),
		loadTook: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "jobfleet_dispatch_load_seconds", Help: "Time to load one partition (its reads from etcd or from a standby copy, the wait for the copy to catch up, and their decoding), once it has a load slot.",
			Buckets: prometheus.ExponentialBuckets(0.001, 2, 14),
		}),
		fireWaiting: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "jobfleet_dispatch_fires_waiting", Help: "Partitions owned here with due jobs that wait for room in the member's budget of fires in flight (dispatch.Config.FiresInFlight) before planning their next write.",
		}),
		firesHeld: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "jobfleet_dispatch_fires_in_flight", Help: "Runs of fire writes this member has planned and not yet had answered (at most dispatch.Config.FiresInFlight).",
		}),
		trims: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "jobfleet_runs_trimmed_total", Help: "Final runs deleted from the history, by reason (max_runs, max_age, budget).",
		}, []string{"reason"}),
		jobsDeleted: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "jobfleet_finished_jobs_deleted_total", Help: "Completed jobs (one-off jobs that ran, jobs past not_after or max_fires) deleted after their retention (delete_after).",
		}),
		completed: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "jobfleet_jobs_completed_total", Help: "Jobs that completed, by what ended them (run_at: a one-off ran; not_after; max_fires).",
		}, []string{"reason"}),
		paused: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "jobfleet_jobs_paused_total", Help: "Jobs their owner paused after pause_after_failures runs in a row ended dead.",
		}),
		overdues: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "jobfleet_jobs_overdue_total", Help: "Overdue episodes this member recorded and notified: jobs none of whose runs succeeded within their expect_success_within.",
		}),
		passedOver: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "jobfleet_dispatch_passed_over_total", Help: "Dispatchable runs a worker's poll passed over, by reason: spread (another poll waiting here, of a worker with more free slots, may take it), retry_elsewhere (the poll's worker ran the failed attempt and another live worker may take the retry).",
		}, []string{"reason"}),
		backfills: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "jobfleet_backfill_runs_total", Help: "Runs created by backfills (POST /v1/jobs/{id}/backfill), paced by --backfill-rate.",
		}),
	}
	m.limits = newLimitMetrics()
	for _, r := range []string{passSpread, passRetryElsewhere} {
		m.passedOver.WithLabelValues(r)
	}
	state := &stateCollector{m: m,
		unplaceable:  prometheus.NewDesc("jobfleet_runs_unplaceable", "Waiting runs of the partitions owned here that a live worker could take but for their job's placement.selector, which matches no live worker's labels.", nil, nil),
		waiting:      prometheus.NewDesc("jobfleet_runs_waiting", "Runs of the partitions owned here that wait for a worker (pending, or failed with a retry due). Growing: no worker takes them.", nil, nil),
		running:      prometheus.NewDesc("jobfleet_runs_running", "Runs of the partitions owned here with an attempt held by a worker.", nil, nil),
		runs:         prometheus.NewDesc("jobfleet_history_runs", "Run documents stored for the partitions owned here (active and final).", nil, nil),
		bytes:        prometheus.NewDesc("jobfleet_history_bytes", "Bytes of the run documents stored for the partitions owned here; the fleet's sum stays within --history-budget plus the active runs' documents and the jobs' floors (--history-floor).", nil, nil),
		budget:       prometheus.NewDesc("jobfleet_history_budget_bytes", "The share of the fleet's history budget of the partitions owned here.", nil, nil),
		completedNow: prometheus.NewDesc("jobfleet_jobs_completed", "Completed jobs of the partitions owned here, kept until their delete_after.", nil, nil),
		overdueNow:   prometheus.NewDesc("jobfleet_jobs_overdue", "Jobs of the partitions owned here that are overdue: none of their runs succeeded within their expect_success_within (their state records the episode).", nil, nil),
		unservable:   prometheus.NewDesc("jobfleet_runs_unservable", "Waiting runs of the partitions owned here that no live worker can take (none serves the executor type, or none whose credential's prefix covers the job), by executor type.", []string{"executor"}, nil),
	}
	if reg != nil {
		reg.MustRegister(m.fires, m.lag, m.finished, m.attempts, m.lost, m.stale, m.forbidden, m.misfires, m.commitErrors, m.commitTook, m.inFlight, m.window, m.loading, m.loadingJobs, m.loadWaiting, m.loadTook, m.fireWaiting, m.firesHeld, m.trims, m.jobsDeleted, m.completed, m.paused, m.overdues, m.passedOver, m.backfills, state, m.limits)
	}
	return m
}

// stateCollector reports the gauges of the partitions owned here from one
// Stats per scrape.
type stateCollector struct {
	m                                                                                        *Metrics
	waiting, running, runs, bytes, budget, completedNow, overdueNow, unservable, unplaceable *prometheus.Desc
}

func (c *stateCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.waiting, c.running, c.runs, c.bytes, c.budget, c.completedNow, c.overdueNow, c.unservable, c.unplaceable} {
		ch <- d
	}
}

func (c *stateCollector) Collect(ch chan<- prometheus.Metric) {
	var st Stats
	if f := c.m.source.Load(); f != nil {
		st = (*f)()
	}
	ch <- prometheus.MustNewConstMetric(c.waiting, prometheus.GaugeValue, float64(st.Waiting))
	ch <- prometheus.MustNewConstMetric(c.running, prometheus.GaugeValue, float64(st.Running))
	ch <- prometheus.MustNewConstMetric(c.runs, prometheus.GaugeValue, float64(st.HistoryRuns))
	ch <- prometheus.MustNewConstMetric(c.bytes, prometheus.GaugeValue, float64(st.HistoryBytes))
	ch <- prometheus.MustNewConstMetric(c.budget, prometheus.GaugeValue, float64(st.HistoryBudget))
	ch <- prometheus.MustNewConstMetric(c.completedNow, prometheus.GaugeValue, float64(st.Completed))
	ch <- prometheus.MustNewConstMetric(c.overdueNow, prometheus.GaugeValue, float64(st.Overdue))
	ch <- prometheus.MustNewConstMetric(c.unplaceable, prometheus.GaugeValue, float64(st.Unplaceable))
	for _, ex := range slices.Sorted(maps.Keys(st.Unservable)) {
		ch <- prometheus.MustNewConstMetric(c.unservable, prometheus.GaugeValue, float64(st.Unservable[ex]), ex)
	}
}

func (m *Metrics) setSource(f func() Stats) {
	if m != nil {
		m.source.Store(&f)
	}
}

// The reasons of jobfleet_dispatch_passed_over_total.
const (
	passSpread         = "spread"
	passRetryElsewhere = "retry_elsewhere"
)

func (m *Metrics) passOver(reason string) {
	if m != nil {
		m.passedOver.WithLabelValues(reason).Inc()
	}
}

func (m *Metrics) trimmed(reason string, n int) {
	if m != nil && n > 0 {
		m.trims.WithLabelValues(reason).Add(float64(n))
	}
}

// overdue counts n overdue episodes begun.
func (m *Metrics) overdue(n int) {
	if m != nil && n > 0 {
		m.overdues.Add(float64(n))
	}
}

func (m *Metrics) jobCompleted(reason string) {
	if m != nil {
		m.completed.WithLabelValues(reason).Inc()
	}
}

func (m *Metrics) jobPaused() {
	if m != nil {
		m.paused.Inc()
	}
}

func (m *Metrics) jobDeleted() {
	if m != nil {
		m.jobsDeleted.Inc()
	}
}

func (m *Metrics) backfilled(n int) {
	if m != nil && n > 0 {
		m.backfills.Add(float64(n))
	}
}

func (m *Metrics) fired(status string, n int) {
	if m != nil && n > 0 {
		m.fires.WithLabelValues(status).Add(float64(n))
		m.activity.Fired(api.RunStatus(status), n)
	}
}

func (m *Metrics) observeLag(seconds float64) {
	if m != nil {
		m.lag.Observe(seconds)
		m.activity.Lag(seconds)
	}
}

func (m *Metrics) finishedRun(status string) {
	if m != nil {
		m.finished.WithLabelValues(status).Inc()
		m.activity.Finished(api.RunStatus(status))
	}
}

// RecordActivity makes m count fires, lags and outcomes in r too, per
// minute (see package activity). Call it before the dispatcher starts;
// it is not safe to call concurrently with the recording.
func (m *Metrics) RecordActivity(r *activity.Recorder) {
	if m != nil {
		m.activity = r
	}
}

func (m *Metrics) attemptStarted() {
	if m != nil {
		m.attempts.Inc()
	}
}

func (m *Metrics) attemptLost() {
	if m != nil {
		m.lost.Inc()
	}
}

func (m *Metrics) staleReport() {
	if m != nil {
		m.stale.Inc()
	}
}

func (m *Metrics) forbiddenReport() {
	if m != nil {
		m.forbidden.Inc()
	}
}

func (m *Metrics) misfire(fate string, n int) {
	if m != nil && n > 0 {
		m.misfires.WithLabelValues(fate).Add(float64(n))
	}
}

func (m *Metrics) commitError() {
	if m != nil {
		m.commitErrors.Inc()
	}
}

// commitSent is told of each request the committer sends, and returns
// the function to call with its round trip when it returns.
func (m *Metrics) commitSent() func(seconds float64) {
	if m == nil {
		return func(float64) {}
	}
	return inFlight(m.inFlight, m.commitTook)
}

func (m *Metrics) commitWindow(ops float64) {
	if m != nil {
		m.window.Set(ops)
	}
}

// loadWaits is told of a partition waiting for a load slot, and returns
// the function to call when it has one (or gave up).
func (m *Metrics) loadWaits() func() {
	if m == nil {
		return func() {}
	}
	m.loadWaiting.Inc()
	return m.loadWaiting.Dec
}

// loadStarts is told of a partition starting its load, of jobs of the
// load budget (0 without one), and returns the function to call with the
// load's duration when it ends.
func (m *Metrics) loadStarts(jobs int64) func(seconds float64) {
	if m == nil {
		return func(float64) {}
	}
	m.loadingJobs.Add(float64(jobs))
	done := inFlight(m.loading, m.loadTook)
	return func(seconds float64) {
		m.loadingJobs.Sub(float64(jobs))
		done(seconds)
	}
}

// fireWaits is told of a partition waiting for room to plan a write of
// fires, and returns the function to call when it has it (or gave up).
func (m *Metrics) fireWaits() func() {
	if m == nil {
		return func() {}
	}
	m.fireWaiting.Inc()
	return m.fireWaiting.Dec
}

// firesInFlight adds runs (negative: removes them) to the runs of fire
// writes planned and not yet answered.
func (m *Metrics) firesInFlight(runs float64) {
	if m != nil {
		m.firesHeld.Add(runs)
	}
}

// inFlight counts one more operation in gauge and returns the function
// that, given the operation's duration in seconds, counts it out and
// records the duration in took.
func inFlight(gauge prometheus.Gauge, took prometheus.Observer) func(seconds float64) {
	gauge.Inc()
	return func(seconds float64) {
		gauge.Dec()
		took.Observe(seconds)
	}
}
