package storage

import (
	"context"
	"fmt"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/jobfleet/jobfleet/store"
)

// Report is the document of GET /v1/cluster/storage: etcd's storage as
// one member sees it now.
type Report struct {
	// DBSize is etcd's database file size (what its quota counts) and
	// DBSizeInUse the part of it in use, the largest over the endpoints,
	// in bytes.
	DBSize      int64 `json:"db_size_bytes"`
	DBSizeInUse int64 `json:"db_size_in_use_bytes"`
	// Quota is etcd's space quota in bytes; QuotaSource says where it
	// comes from: "flag" (--etcd-quota-bytes), "etcd" (its status) or
	// "default" (2 GiB).
	Quota       int64  `json:"quota_bytes"`
	QuotaSource string `json:"quota_source"`
	// HighWater is the high-water mark as a fraction of the quota, and
	// HighWaterBytes in bytes; AboveHighWater tells whether DBSize is
	// above it (new jobs and triggers are refused with 507).
	HighWater      float64 `json:"high_water"`
	HighWaterBytes int64   `json:"high_water_bytes"`
	AboveHighWater bool    `json:"above_high_water"`
	// Revision is etcd's current revision, CompactedRevision the one the
	// fleet last compacted to (0 if it never did, or if compaction is
	// left to etcd, which does not report it over its API).
	Revision          int64 `json:"revision"`
	CompactedRevision int64 `json:"compacted_revision"`
	// Compaction is the fleet's last compaction record, null before the
	// first.
	Compaction *Compaction `json:"compaction"`
	// CompactionInterval is this member's compaction interval, "0s" if
	// compaction is left to etcd.
	CompactionInterval store.Duration `json:"compaction_interval"`
	// Keys counts the fleet's keys in etcd.
	Keys Counts `json:"keys"`
	// History is the run history of the partitions the answering member
	// owns, as their scheduler accounts it; null before it schedules any.
	// The fleet's is the sum over the members (jobfleet_history_bytes).
	History *History `json:"history"`
	// Alarms are the alarms raised in the etcd cluster (NOSPACE,
	// CORRUPT); empty if none.
	Alarms []Alarm `json:"alarms"`
	// Endpoints are the etcd endpoints' own sizes.
	Endpoints []Endpoint `json:"endpoints"`
	// CheckedAt is when this report was read.
	CheckedAt time.Time `json:"checked_at"`
}

// History is the run history one member's partitions keep.
type History struct {
	// Member is the member, Partitions how many it owns.
	Member     string `json:"member"`
	Partitions int    `json:"partitions"`
	// Runs and Bytes count the run documents kept and their bytes.
	Runs  int   `json:"runs"`
	Bytes int64 `json:"bytes"`
	// BudgetBytes is these partitions' share of the fleet's history
	// budget (--history-budget).
	BudgetBytes int64 `json:"budget_bytes"`
}

// Counts are key counts of the fleet's namespace, read with count-only
// ranges at one revision.
type Counts struct {
	// Jobs counts job keys: specs and pending trigger requests.
	Jobs int64 `json:"jobs"`
	// Runs counts run documents (the history, active runs included).
	Runs int64 `json:"runs"`
	// ActiveRuns counts runs not yet final.
	ActiveRuns int64 `json:"active_runs"`
	// Total counts every key of the namespace.
	Total int64 `json:"total"`
}

// Report checks etcd now (as Check does, publishing the result) and adds
// the compaction record and the key counts. It fails if etcd cannot be
// read.
func (m *Monitor) Report(ctx context.Context) (Report, error) {
	st := m.Check(ctx)
	if st.Err != nil {
		return Report{}, st.Err
	}
	ctx, cancel := context.WithTimeout(ctx, m.cfg.RequestTimeout)
	defer cancel()
	keys := store.Keys{NS: m.cfg.Namespace}
	count := func(prefix string) clientv3.Op {
		return clientv3.OpGet(prefix, clientv3.WithPrefix(), clientv3.WithCountOnly())
	}
	resp, err := m.client.Txn(ctx).Then(
		count(keys.JobsPrefix()), count(keys.AllRunsPrefix()), count(keys.AllQueuePrefix()), count(keys.NS),
		clientv3.OpGet(CompactionKey(keys.NS)),
	).Commit()
	if err != nil {
		return Report{}, store.Classify(fmt.Errorf("storage: count keys: %w", err))
	}
	n := func(i int) int64 { return resp.Responses[i].GetResponseRange().Count }
	r := Report{
		DBSize: st.DBSize, DBSizeInUse: st.DBSizeInUse,
		Quota: st.Quota, QuotaSource: st.QuotaSource,
		HighWater: st.HighWater, HighWaterBytes: st.HighWaterBytes, AboveHighWater: st.AboveHighWater,
		Revision:           max(st.Revision, resp.Header.Revision),
		CompactionInterval: store.Duration(max(m.cfg.CompactionInterval, 0)),
		Keys:               Counts{Jobs: n(0), Runs: n(1), ActiveRuns: n(2), Total: n(3)},
		Alarms:             st.Alarms,
		Endpoints:          st.Endpoints,
		CheckedAt:          st.CheckedAt,
	}
	if kvs := resp.Responses[4].GetResponseRange().Kvs; len(kvs) == 1 {
		if c, err := decodeCompaction(kvs[0].Value); err == nil {
			r.Compaction = &c
			r.CompactedRevision = c.Revision
		}
	}
	if r.Alarms == nil {
		r.Alarms = []Alarm{}
	}
	return r, nil
}
