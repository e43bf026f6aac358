package dispatch

import (
	"context"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

// deleteJobData removes a deleted job's state, runs and queue entries, and
// forgets it. The caller holds wmu.
func (pt *partition) deleteJobData(ctx context.Context, id string) {
	pt.removeJobData(ctx, id)
	pt.mu.Lock()
	defer pt.mu.Unlock()
	delete(pt.jobs, id)
	for _, rid := range pt.activeOfLocked(id) {
		delete(pt.active, rid)
	}
}

// removeJobData deletes job id's state, runs and queue entries from etcd
// (not its spec, nor anything in memory). The caller holds wmu.
func (pt *partition) removeJobData(ctx context.Context, id string) {
	if _, err := pt.commit(ctx, pt.d.keys.DeleteJobDataOps(pt.p, id)); err != nil {
		pt.lg.Warn("removing a deleted job's data failed; retried at the next load", zap.String("job_id", id), zap.Error(err))
	}
}

// trim deletes job id's oldest final runs beyond HistoryLimit. The caller
// holds wmu.
func (pt *partition) trim(ctx context.Context, id string) {
	k := pt.d.keys
	pt.mu.Lock()
	e := pt.jobs[id]
	if e == nil {
		pt.mu.Unlock()
		return
	}
	excess := e.state.Runs - pt.d.cfg.HistoryLimit
	activeKeys := map[string]bool{}
	for _, rid := range pt.activeOfLocked(id) {
		activeKeys[k.Run(pt.p, id, pt.active[rid].run.ScheduledAt)] = true
	}
	st := e.state
	pt.mu.Unlock()

	rctx, cancel := context.WithTimeout(ctx, pt.d.cfg.RequestTimeout)
	resp, err := pt.d.client.Get(rctx, k.RunPrefix(pt.p, id), clientv3.WithPrefix(), clientv3.WithKeysOnly(),
		clientv3.WithSort(clientv3.SortByKey, clientv3.SortAscend), clientv3.WithLimit(int64(excess+len(activeKeys))))
	cancel()
	if err != nil {
		return
	}
	total := resp.Count
	var ops []clientv3.Op
	for _, kv := range resp.Kvs {
		if len(ops) >= excess || len(ops) >= 100 {
			break
		}
		if !activeKeys[string(kv.Key)] {
			ops = append(ops, clientv3.OpDelete(string(kv.Key)))
		}
	}
	st.Runs = int(total) - len(ops)
	op, err := k.PutStateOp(pt.p, id, st)
	if err != nil {
		pt.lg.Error("encoding a job state failed", zap.String("job_id", id), zap.Error(err))
		return
	}
	ops = append(ops, op)
	if _, err := pt.commit(ctx, ops); err == nil {
		pt.mu.Lock()
		if e := pt.jobs[id]; e != nil {
			e.state = st
		}
		pt.mu.Unlock()
	}
}
