package dispatch

import (
	"context"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

// deleteJobData removes a deleted job's state, runs and queue entries, and
// forgets it.
func (pt *partition) deleteJobData(ctx context.Context, id string) {
	pt.mu.Lock()
	defer pt.mu.Unlock()
	pt.removeJobDataLocked(ctx, id)
	delete(pt.jobs, id)
	for _, rid := range pt.activeOfLocked(id) {
		delete(pt.active, rid)
	}
}

// removeJobDataLocked deletes job id's state, runs and queue entries from
// etcd (not its spec, nor anything in memory).
func (pt *partition) removeJobDataLocked(ctx context.Context, id string) {
	if _, err := pt.commitLocked(ctx, pt.d.keys.DeleteJobDataOps(pt.p, id)); err != nil {
		pt.lg.Warn("removing a deleted job's data failed; retried at the next load", zap.String("job_id", id), zap.Error(err))
	}
}

// trimLocked deletes job id's oldest final runs beyond HistoryLimit.
func (pt *partition) trimLocked(ctx context.Context, id string) {
	e := pt.jobs[id]
	k := pt.d.keys
	excess := e.state.Runs - pt.d.cfg.HistoryLimit
	rctx, cancel := context.WithTimeout(ctx, pt.d.cfg.RequestTimeout)
	resp, err := pt.d.client.Get(rctx, k.RunPrefix(pt.p, id), clientv3.WithPrefix(), clientv3.WithKeysOnly(),
		clientv3.WithSort(clientv3.SortByKey, clientv3.SortAscend), clientv3.WithLimit(int64(excess+len(pt.activeOfLocked(id)))))
	cancel()
	if err != nil {
		return
	}
	total := resp.Count
	activeKeys := map[string]bool{}
	for _, rid := range pt.activeOfLocked(id) {
		ar := pt.active[rid]
		activeKeys[k.Run(pt.p, id, ar.run.ScheduledAt)] = true
	}
	var ops []clientv3.Op
	for _, kv := range resp.Kvs {
		if len(ops) >= excess || len(ops) >= 100 {
			break
		}
		if !activeKeys[string(kv.Key)] {
			ops = append(ops, clientv3.OpDelete(string(kv.Key)))
		}
	}
	st := e.state
	st.Runs = int(total) - len(ops)
	op, err := k.PutStateOp(pt.p, id, st)
	if err != nil {
		pt.lg.Error("encoding a job state failed", zap.String("job_id", id), zap.Error(err))
		return
	}
	ops = append(ops, op)
	if _, err := pt.commitLocked(ctx, ops); err == nil {
		e.state = st
	}
}
