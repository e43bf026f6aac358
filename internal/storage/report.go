package storage

import (
	"context"
	"fmt"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/jobfleet/jobfleet/api"
	"github.com/jobfleet/jobfleet/store"
)

// The storage documents are the API's (package api); these names are
// theirs, for this package's code.
type (
	// Report is the document of GET /v1/cluster/storage.
	Report = api.StorageReport
	// History is the run history one member's partitions keep.
	History = api.History
	// Counts are key counts of the fleet's namespace.
	Counts = api.KeyCounts
)

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
		clientv3.OpGet(CompactionKey(keys.NS)), count(keys.AllFailingPrefix()),
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
		CompactionInterval: api.Duration(max(m.cfg.CompactionInterval, 0)),
		Keys:               Counts{Jobs: n(0), Runs: n(1), ActiveRuns: n(2), FailingRuns: n(5), Total: n(3)},
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
