package dispatch

import (
	"context"
	"time"

	"github.com/jobfleet/jobfleet/api"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

// This file bounds what the partition keeps: data of deleted jobs, old
// runs (history retention and budget), and finished one-off jobs.

// trimLimit is the most runs one trimming write deletes; more are deleted
// by the next tick.
const trimLimit = 64

// deleteJobData removes a deleted job's state, runs and queue entries, and
// forgets it. The caller holds wmu.
func (pt *partition) deleteJobData(ctx context.Context, id string) {
	pt.removeJobData(ctx, id)
	pt.forgetJob(id)
}

// forgetJob drops job id and its runs from memory.
func (pt *partition) forgetJob(id string) {
	pt.mu.Lock()
	defer pt.mu.Unlock()
	pt.forgetJobLocked(id)
}

func (pt *partition) forgetJobLocked(id string) {
	pt.setJobLocked(id, nil)
	for _, rid := range pt.activeOfLocked(id) {
		pt.dropActiveLocked(rid)
	}
	pt.hist.dropJob(id)
	if pt.notes != nil {
		pt.notes.DropJob(id) // its notifications went with its data
	}
}

// removeJobData deletes job id's state, runs and queue entries from etcd
// (not its spec, nor anything in memory). The caller holds wmu.
func (pt *partition) removeJobData(ctx context.Context, id string) {
	if _, err := pt.commit(ctx, pt.d.keys.DeleteJobDataOps(pt.p, id)); err != nil {
		pt.lg.Warn("removing a deleted job's data failed; retried at the next load", zap.String("job_id", id), zap.Error(err))
	}
}

// retentionLocked returns what job id keeps of its runs: its history
// policy, or the fleet's defaults, and the fleet's floor (at most its
// max_runs).
func (pt *partition) retentionLocked(id string) retention {
	r := retention{maxRuns: pt.d.cfg.HistoryMaxRuns, maxAge: pt.d.cfg.HistoryMaxAge}
	if e := pt.jobs[id]; e != nil {
		if h := e.spec.History; h.MaxRuns > 0 {
			r.maxRuns = h.MaxRuns
		}
		if h := e.spec.History; h.MaxAge > 0 {
			r.maxAge = h.MaxAge.Std()
		}
	}
	r.floor = min(pt.d.cfg.HistoryFloor, r.maxRuns)
	return r
}

// budgetShare is the partition's share of the fleet's history budget:
// Config.HistoryBudget, at most half of etcd's quota, over the
// partitions, and at least minBudgetShare.
func (pt *partition) budgetShare() int64 {
	budget := pt.d.cfg.HistoryBudget
	if pt.d.cfg.Space != nil {
		if q := pt.d.cfg.Space.Quota(); q > 0 {
			budget = min(budget, q/2)
		}
	}
	return max(budget/int64(pt.d.cfg.Partitions), minBudgetShare)
}

// trimHistory deletes final runs beyond their jobs' count and age limits,
// then the partition's oldest final runs while its run documents exceed
// its share of the history budget (see history.planTrim). Each deletion
// is conditional on the run having no queue entry, so an active run is
// never deleted. The same write deletes the failing-runs index entries of
// dead runs that died more than api.FailingWindow ago (the runs stay,
// for their history retention). The caller holds wmu.
func (pt *partition) trimHistory(ctx context.Context, now time.Time) {
	pt.mu.Lock()
	plan := pt.hist.planTrim(now, pt.budgetShare(), trimLimit, nil, nil)
	expired := pt.hist.failingExpired(now, trimLimit)
	pt.mu.Unlock()
	if len(plan)+len(expired) == 0 {
		return
	}
	ops := pt.trimOps(plan)
	for _, t := range expired {
		ops = append(ops, clientv3.OpDelete(pt.d.keys.Failing(pt.p, t.job, t.at)))
	}
	resp, err := pt.commit(ctx, ops)
	if err != nil {
		pt.lg.Warn("trimming history failed; will retry", zap.Error(err))
		return
	}
	pt.mu.Lock()
	defer pt.mu.Unlock()
	pt.trimmedLocked(plan, resp, 0)
	for _, t := range expired {
		pt.hist.entryRemoved(t.job, t.at)
	}
	if len(expired) > 0 {
		pt.lg.Debug("failing-runs index entries of runs dead for a day deleted", zap.Int("entries", len(expired)))
	}
	if len(plan) == trimLimit || len(expired) == trimLimit {
		pt.poke() // more to trim
	}
}

// trimOps returns the deletions of the runs of plan; each applies only if
// the run has no queue entry.
func (pt *partition) trimOps(plan []trim) []clientv3.Op {
	ops := make([]clientv3.Op, len(plan))
	for i, t := range plan {
		ops[i] = pt.d.keys.DeleteRunOp(pt.p, t.job, t.at)
	}
	return ops
}

// trimmedLocked applies to memory the deletions of plan, written from
// resp.Responses[at] on.
func (pt *partition) trimmedLocked(plan []trim, resp *clientv3.TxnResponse, at int) {
	reasons := map[string]int{}
	for i, t := range plan {
		if !resp.Responses[at+i].GetResponseTxn().Succeeded {
			// Its queue entry exists: memory and etcd disagree. Keep it.
			pt.lg.Error("not trimming a run that is still queued", zap.String("job_id", t.job), zap.Time("scheduled_at", t.at))
			continue
		}
		pt.hist.removed(t.job, t.at)
		reasons[t.reason]++
	}
	for reason, n := range reasons {
		pt.d.cfg.Metrics.trimmed(reason, n)
	}
	if len(reasons) > 0 {
		pt.lg.Debug("history trimmed", zap.Any("runs", reasons), zap.Int64("history_bytes", pt.hist.bytes))
	}
}

// deletionDueLocked returns when job e, a finished one-off job, is to be
// deleted: its retention after it finished or was last updated, whichever
// is later (an edit keeps it longer). ok is false if it is not finished or
// is kept.
func (pt *partition) deletionDueLocked(e *jobEntry) (time.Time, bool) {
	if !e.spec.Finite() || e.state().FinishedAt.IsZero() {
		return time.Time{}, false
	}
	d, keep, set := e.spec.DeleteAfter.Duration()
	if !set {
		d, keep = pt.d.cfg.DeleteAfter, pt.d.cfg.DeleteAfter < 0
	}
	if keep {
		return time.Time{}, false
	}
	from := e.state().FinishedAt
	if e.spec.UpdatedAt().After(from) {
		from = e.spec.UpdatedAt()
	}
	return from.Add(d), true
}

// completionReason names what completed job e: "run_at" (a one-off ran),
// "max_fires" or "not_after".
func completionReason(e *jobEntry) string {
	switch {
	case e.spec.IsOneOff():
		return "run_at"
	case e.spec.controls().MaxFires > 0 && e.state().ScheduledRuns >= e.spec.controls().MaxFires:
		return "max_fires"
	}
	return "not_after"
}

// finishedLocked reports whether job e is a job that has completed (a
// one-off, or one whose window or max_fires ended): its last time fired
// and none of its runs or trigger requests is pending.
func (pt *partition) finishedLocked(e *jobEntry, pendingTriggers map[string]bool) bool {
	return e.spec.Finite() && plannedLocked(e) && !e.stale && e.state().Next.IsZero() &&
		len(pt.activeOfLocked(e.spec.ID)) == 0 && !pendingTriggers[e.spec.ID]
}

// deleteFinished records when one-off jobs finish, and deletes those
// whose retention has passed with their runs: fenced, and only if the
// job's spec is still the version decided on and it has no pending trigger
// request (store.Keys.DeleteJobOp), so a concurrent edit or trigger is
// not lost. The caller holds wmu.
func (pt *partition) deleteFinished(ctx context.Context, now time.Time) {
	pt.mu.Lock()
	fp := pt.planFinishLocked(now)
	pt.mu.Unlock()
	if len(fp.ops) == 0 {
		return
	}
	resp, err := pt.commit(ctx, fp.ops)
	if err != nil {
		pt.lg.Warn("recording finished one-off jobs failed; will retry", zap.Error(err))
		return
	}
	pt.mu.Lock()
	pt.finishAppliedLocked(fp, resp)
	pt.mu.Unlock()
}

// finishPlan is one write of deleteFinished: the finish times it
// records, then the jobs it deletes.
type finishPlan struct {
	stamps []finishStamp
	doomed []finishDoom
	ops    []clientv3.Op // the stamps' writes, then the deletions
}

type finishStamp struct {
	id    string
	state api.JobState
}

type finishDoom struct {
	e   *jobEntry
	due time.Time
}

// planFinishLocked plans deleteFinished's write at now: at most trimLimit
// one-off jobs, by ID, among those the index says may have finished or
// be due for deletion.
func (pt *partition) planFinishLocked(now time.Time) finishPlan {
	var fp finishPlan
	var dels []clientv3.Op
	pending := pt.pendingTriggersLocked()
	for _, id := range pt.cleanupCandidatesLocked(now) {
		if len(fp.stamps)+len(fp.doomed) >= trimLimit {
			break
		}
		e := pt.jobs[id]
		if !pt.finishedLocked(e, pending) {
			continue
		}
		if e.state().FinishedAt.IsZero() {
			st := e.state()
			st.FinishedAt = now.UTC().Truncate(time.Millisecond)
			op, err := pt.d.keys.PutStateOp(pt.p, id, st)
			if err != nil {
				pt.lg.Error("encoding a job state failed", zap.String("job_id", id), zap.Error(err))
				continue
			}
			fp.stamps = append(fp.stamps, finishStamp{id: id, state: st})
			fp.ops = append(fp.ops, op)
			continue
		}
		if due, ok := pt.deletionDueLocked(e); ok && !now.Before(due) {
			fp.doomed = append(fp.doomed, finishDoom{e: e, due: due})
			dels = append(dels, pt.d.keys.DeleteJobOp(pt.p, id, e.spec.Revision, e.pauseRev()))
		}
	}
	fp.ops = append(fp.ops, dels...)
	return fp
}

// finishAppliedLocked updates memory after fp was written with response
// resp.
func (pt *partition) finishAppliedLocked(fp finishPlan, resp *clientv3.TxnResponse) {
	for _, s := range fp.stamps {
		if e := pt.jobs[s.id]; e != nil {
			e.setState(s.state)
			pt.indexLocked(s.id)
			reason := completionReason(e)
			pt.d.cfg.Metrics.jobCompleted(reason)
			pt.lg.Info("job completed", zap.String("job_id", s.id), zap.String("reason", reason), zap.Int64("scheduled_runs", e.state().ScheduledRuns))
		}
	}
	for i, dm := range fp.doomed {
		e := dm.e
		id := e.spec.ID
		if !resp.Responses[len(fp.stamps)+i].GetResponseTxn().Succeeded {
			pt.lg.Info("finished one-off job changed or was triggered; not deleting it", zap.String("job_id", id))
			e.stale = true // until the watch brings the change
			pt.indexLocked(id)
			continue
		}
		pt.forgetJobLocked(id)
		pt.d.cfg.Metrics.jobDeleted()
		pt.lg.Info("finished one-off job deleted after its retention", zap.String("job_id", id),
			zap.Time("finished_at", e.state().FinishedAt), zap.Duration("kept", dm.due.Sub(e.state().FinishedAt)))
	}
}
