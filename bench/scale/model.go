package scale

import (
	"fmt"
	"runtime"

	"github.com/jobfleet/jobfleet/bench/report"
)

// Model predicts the fire throughput and the job capacity of a fleet whose
// partitions are mapped onto K store shards (K etcd clusters, each holding
// its partitions' owner keys and data, so that a fenced write never spans
// two of them), from figures measured on one store. It is a bound, not a
// simulation: a fire costs the store a share of its limit and the
// members CPU time, and the fleet goes as fast as the scarcer of the two.
type Model struct {
	// StoreLimit is what one store takes, in runs/s: fenced batched
	// transactions of the scheduler's shape written as fast as it takes
	// them (measured).
	StoreLimit float64 `json:"store_limit_runs_per_sec"`
	// MemberCPU is the CPU time the members spend per run fired, all
	// members together, and StoreCPU that of the store's process (with
	// the bench's watch and clients), in seconds per run (measured in the
	// herd).
	MemberCPU float64 `json:"member_cpu_seconds_per_run"`
	StoreCPU  float64 `json:"store_cpu_seconds_per_run"`
	// Cores is the number of cores of the machine the measurement ran on,
	// shared by the store, the members and the bench.
	Cores float64 `json:"cores"`
	// JobBytes is etcd's in-use growth per job (measured); Quota the
	// space quota of each store and HighWater the fraction of it where
	// the fleet stops taking work (0.8); HistoryBudget the run documents
	// the fleet keeps (its --history-budget, spread over the shards).
	JobBytes      float64 `json:"job_bytes"`
	Quota         float64 `json:"quota_bytes"`
	HighWater     float64 `json:"high_water"`
	HistoryBudget float64 `json:"history_budget_bytes"`
	// FireBytes is etcd's in-use growth per run fired (measured in the
	// herd: the run, its queue entry and the job's state, in the
	// revisions that wrote them); the store keeps up to two compaction
	// intervals of such revisions (CompactionInterval, the fleet's
	// default 5 minutes).
	FireBytes          float64 `json:"fire_bytes"`
	CompactionInterval float64 `json:"compaction_interval_seconds"`
}

// Prediction is the model's answer for K shards and M members.
type Prediction struct {
	Shards  int `json:"shards"`
	Members int `json:"members"`
	// StoreBound is K × StoreLimit; MemberBound what M members of
	// CoresPerMember cores each fire given MemberCPU; FiresPerSec the
	// smaller, and Bound names it ("store" or "members").
	StoreBound  float64 `json:"store_bound_runs_per_sec"`
	MemberBound float64 `json:"member_bound_runs_per_sec"`
	FiresPerSec float64 `json:"fires_per_sec"`
	Bound       string  `json:"bound"`
	// Jobs is how many jobs the K stores hold below their high-water
	// mark, the history budget kept.
	Jobs float64 `json:"jobs"`
	// QuotaBound is the fires/s the K stores sustain with Resident jobs
	// without their revisions between compactions reaching the
	// high-water mark: (K × quota × high water − jobs − history) / (2 ×
	// compaction interval × FireBytes). 0 when not modelled.
	Resident   float64 `json:"resident_jobs"`
	QuotaBound float64 `json:"quota_bound_fires_per_sec"`
}

// Predict returns the model's prediction for K shards, each on machines
// of its own, M members of coresPerMember cores each, and resident jobs.
func (m Model) Predict(k, members int, coresPerMember, resident float64) Prediction {
	p := Prediction{Shards: k, Members: members, StoreBound: float64(k) * m.StoreLimit}
	if m.MemberCPU > 0 {
		// MemberCPU is all the members' CPU per run: the work of a fire
		// is the same however many members share it.
		p.MemberBound = float64(members) * coresPerMember / m.MemberCPU
	}
	p.FiresPerSec, p.Bound = p.StoreBound, "store"
	if p.MemberBound > 0 && p.MemberBound < p.StoreBound {
		p.FiresPerSec, p.Bound = p.MemberBound, "members"
	}
	if m.JobBytes > 0 {
		p.Jobs = max(0, float64(k)*m.Quota*m.HighWater-m.HistoryBudget) / m.JobBytes
	}
	p.Resident = resident
	if m.FireBytes > 0 && m.CompactionInterval > 0 {
		room := float64(k)*m.Quota*m.HighWater - resident*m.JobBytes - m.HistoryBudget
		p.QuotaBound = max(0, room) / (2 * m.CompactionInterval * m.FireBytes)
	}
	return p
}

// Here predicts the K=1 point as it was measured: one store and the
// members on one machine of Cores cores, so that the store's and the
// members' CPU per run add up. It returns the runs/s and which bound
// holds ("store" or "cpu").
func (m Model) Here() (float64, string) {
	cpu := m.MemberCPU + m.StoreCPU
	if cpu > 0 && m.Cores/cpu < m.StoreLimit {
		return m.Cores / cpu, "cpu"
	}
	return m.StoreLimit, "store"
}

// DefaultHistoryBudget is the orchestrator's --history-budget default,
// which the model assumes.
const DefaultHistoryBudget = 1 << 30

// ModelOf returns the model built from p's measurements (zero if the herd
// or the store limit was not measured).
func ModelOf(p *Point, quota int64) (Model, bool) {
	if p.StoreLimit <= 0 || p.Herd.Runs == 0 || p.Herd.MemberCPU <= 0 {
		return Model{}, false
	}
	return Model{
		StoreLimit:    p.StoreLimit,
		MemberCPU:     p.Herd.MemberCPU,
		StoreCPU:      p.Herd.SelfCPU,
		Cores:         float64(runtime.NumCPU()),
		JobBytes:      p.Size.JobInUseBytes,
		Quota:         float64(quota),
		HighWater:     0.8,
		HistoryBudget: DefaultHistoryBudget,
		// A run costs at least its own document: the in-use growth
		// measured over the herd is less when compaction freed pages
		// meanwhile that the herd's writes reused.
		FireBytes: max(p.Size.RunInUseBytes, p.Size.RunBytes),
		// The orchestrator's default --compaction-interval.
		CompactionInterval: 300,
	}, true
}

// ModelTables returns the model's check against every measured point (its
// K=1 prediction on this machine against the herd's measured rate) and
// its predictions from the largest point for K shards and M members of
// two cores each.
func (r *Result) ModelTables() []*report.Table {
	check := &report.Table{
		Name:    "scale_model_check",
		Title:   "Store-shard model, K=1 on this machine: predicted from the store limit and the CPU per run, against the herd measured",
		Columns: []string{"jobs", "members", "store limit runs/s", "member CPU ms/run", "store CPU ms/run", "predicted runs/s", "bound", "herd measured runs/s", "measured/predicted"},
		Notes: []string{
			fmt.Sprintf("predicted = min(store limit, cores / (member CPU + store CPU) per run), %d cores shared by etcd, the members and the bench; the model is an upper bound", runtime.NumCPU()),
		},
	}
	var last *Point
	var model Model
	for _, p := range r.Points {
		m, ok := ModelOf(p, r.Config.Quota)
		if !ok {
			continue
		}
		pred, bound := m.Here()
		check.Add(p.Jobs, p.Members, m.StoreLimit, m.MemberCPU*1000, m.StoreCPU*1000, pred, bound, p.Herd.Rate, p.Herd.Rate/pred)
		if last == nil || p.Jobs >= last.Jobs {
			last, model = p, m
		}
	}
	if last == nil {
		return nil
	}
	pred := &report.Table{
		Name: "scale_model",
		Title: fmt.Sprintf("Store-shard model from %d jobs on %d members: K etcd clusters (own machines), M members of 2 cores; quota %.0f GiB per store",
			last.Jobs, last.Members, model.Quota/(1<<30)),
		Columns: []string{"shards K", "members M", "store bound runs/s", "member bound runs/s", "fires/s", "bound", "jobs held (millions)", "quota-bound fires/s with 1M jobs"},
		Notes: []string{
			"store bound = K × the measured store limit; member bound = M × 2 cores / the members' CPU per run; jobs = (K × quota × 0.8 − history budget 1 GiB) / in-use bytes per job",
			"quota bound: sustained fires/s whose revisions, kept up to two compaction intervals (5 min), fit under the high-water mark with 1M jobs and the history budget",
		},
	}
	for _, k := range []int{1, 2, 4, 8, 16} {
		for _, m := range []int{3, 8, 32} {
			x := model.Predict(k, m, 2, 1e6)
			pred.Add(k, m, x.StoreBound, x.MemberBound, x.FiresPerSec, x.Bound, x.Jobs/1e6, x.QuotaBound)
		}
	}
	return []*report.Table{check, pred}
}
