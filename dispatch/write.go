package dispatch

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/jobfleet/jobfleet/api"
	"github.com/jobfleet/jobfleet/dispatch/notify"
	"github.com/jobfleet/jobfleet/shard"
	"github.com/jobfleet/jobfleet/store"
)

// This file has the partition's writes of run documents and its fenced
// commit: the writer's side of the locks described on partition.

// runWrite is a write of an active run's document.
type runWrite struct {
	op      clientv3.Op
	run     api.Run       // as written: outputs cut to the document budget
	val     []byte        // run, encoded
	size    int           // of val and of the failing-runs entry it puts: what history accounts
	failing []clientv3.Op // the failing-runs index's writes, in op
	entry   int           // bytes (key and value) of the failing-runs entry it puts, 0 if none
	at      time.Time     // when the write was made: the index entry's time
}

// runWriteOp returns the compare-and-swap write of ar's run as r: applied
// only if the run key still has ar.modRev; the queue entry goes when r is
// final, and the run's failing-runs index entry is put or deleted with it
// (store.Keys.FailingOps: the entry says failed or dead as the run does).
// r is first cut to the run document budget (store.FitRun). The entry's
// bytes count as the run's in the history's accounting.
func (pt *partition) runWriteOp(ar *activeRun, r api.Run) (runWrite, bool) {
	r, val, err := store.FitRun(r, pt.d.cfg.MaxRunBytes)
	if err != nil {
		pt.lg.Error("encoding a run failed", zap.String("run_id", r.ID), zap.Error(err))
		return runWrite{}, false
	}
	at := pt.now()
	failing, err := pt.d.keys.FailingOps(ar.run.Status, r, at)
	if err != nil {
		pt.lg.Error("encoding a run failed", zap.String("run_id", r.ID), zap.Error(err))
		return runWrite{}, false
	}
	entry := 0
	for _, op := range failing {
		if op.IsPut() {
			entry += len(op.KeyBytes()) + len(op.ValueBytes())
		}
	}
	return runWrite{op: pt.d.keys.UpdateRunOp(r, val, ar.modRev, failing...), run: r, val: val, size: len(val) + entry, failing: failing, entry: entry, at: at}, true
}

// updatedLocked applies a written runWrite w of ar to memory, at revision
// rev: r, not dispatched before notBefore unless final.
func (pt *partition) updatedLocked(ar *activeRun, w runWrite, rev int64, notBefore time.Time) {
	r := w.run
	pt.hist.rewritten(r.JobID, r.ScheduledAt, ar.size, w.size, r.Status.Final())
	if r.Status == api.RunDead {
		pt.hist.died(r.JobID, r.ScheduledAt, w.at, w.entry)
	}
	ar.run, ar.modRev, ar.notBefore, ar.size = r, rev, notBefore, w.size
	for k, u := range pt.takeBacks {
		if k.run == r.ID && u.unsure {
			// An attempt's write of unknown outcome compared the revision
			// this write compared too (memory did not move on from it), so
			// one of them failed its compare: this one applied, that one
			// did not, and there is nothing to take back. Left queued, the
			// take-back would match the attempt this write recorded when it
			// has the same number and worker (the worker's next poll got
			// the run again) and take back an attempt that was delivered:
			// it would run twice.
			delete(pt.takeBacks, k)
		}
	}
	if r.Status.Final() {
		pt.dropActiveLocked(r.ID)
		pt.poke() // a one-off job may have finished
	}
}

// commit runs ops in one transaction fenced on the partition's epoch. The
// caller holds wmu and not mu.
func (pt *partition) commit(ctx context.Context, ops []clientv3.Op) (*clientv3.TxnResponse, error) {
	return pt.commitIf(ctx, nil, ops)
}

// commitIf is commit applying ops only if cmps hold; the response's
// Succeeded says whether they did.
func (pt *partition) commitIf(ctx context.Context, cmps []clientv3.Cmp, ops []clientv3.Op) (*clientv3.TxnResponse, error) {
	resp, err := pt.d.commits.commitIf(ctx, pt.own, cmps, ops) // RequestTimeout from its sending
	if err := pt.committed(ctx, err); err != nil {
		return nil, err
	}
	return resp, nil
}

// committed returns the error of a fenced write of the partition as
// callers test it (classifyCommit) and accounts for it: in the member's
// readiness, and, if the write failed, in the commit errors, with the
// partition failed, and closed if it was fenced. The caller holds wmu
// and not mu.
func (pt *partition) committed(ctx context.Context, err error) error {
	err = classifyCommit(err)
	if ctx.Err() == nil {
		// A write abandoned because the partition's work ended (released
		// in a rebalance, the member stopping) says nothing about etcd:
		// recorded, it would keep the member unready until some later
		// write succeeded, which never comes if it owns no busy partition.
		pt.d.recordWrite(err)
	}
	if err != nil {
		pt.d.cfg.Metrics.commitError()
		pt.failed = true
		if errors.Is(err, shard.ErrFenced) {
			pt.mu.Lock()
			pt.closed = true
			pt.mu.Unlock()
		}
	}
	return err
}

// writeRun replaces ar's run with r (compare-and-swap, fenced, cut to the
// document budget) and updates memory: r, not dispatched before notBefore
// unless final. It returns the run as written and whether the write
// applied. The caller holds wmu and not mu.
func (pt *partition) writeRun(ctx context.Context, ar *activeRun, r api.Run, notBefore time.Time) (api.Run, error) {
	return pt.writeRunAlso(ctx, ar, r, notBefore)
}

// writeRunAlso is writeRun with more operations applied with the run's
// compare-and-swap, and only with it (a request the write consumes).
func (pt *partition) writeRunAlso(ctx context.Context, ar *activeRun, r api.Run, notBefore time.Time, more ...clientv3.Op) (api.Run, error) {
	rw, err := pt.prepareRunWrite(ar, r, notBefore, more...)
	if err != nil {
		return r, err
	}
	resp, err := pt.commit(ctx, []clientv3.Op{rw.w.op})
	if err != nil {
		pt.lg.Warn("recording run failed", zap.String("run_id", r.ID), zap.Error(err))
		return r, err
	}
	if !resp.Responses[0].GetResponseTxn().Succeeded {
		pt.changedBehind(ctx, []api.Run{ar.run})
		return r, errChangedBehind
	}
	pt.appliedRunWrite(rw, resp.Header.Revision)
	return rw.w.run, nil
}

// preparedRunWrite is a rewrite of an active run ready to be committed:
// the run's compare-and-swap with everything written with it, and what
// memory takes once it applied (appliedRunWrite).
type preparedRunWrite struct {
	ar        *activeRun
	w         runWrite // w.op: the whole compare-and-swap
	notBefore time.Time
	e         *jobEntry    // the run's job as the write was decided, nil if gone
	st        api.JobState // the job's state the write puts, if counted
	counted   bool
	pause     bool           // the write pauses the job (pause_after_failures)
	notes     []notify.Entry // the notifications it puts, delivered once applied
}

// prepareRunWrite makes the compare-and-swap of ar's run as r (cut to the
// document budget), with more operations and what the new status writes
// with it: notifications (notify.go), the hand-overs of a final status to
// the jobs that run after this one (after.go), and the job's count of
// runs in a row that ended dead with the pause it may decide
// (pause_after_failures, CountOutcome). It changes nothing; it returns an
// error wrapping api.ErrTooLarge if r cannot be encoded within the
// budget. The caller holds wmu and not mu.
func (pt *partition) prepareRunWrite(ar *activeRun, r api.Run, notBefore time.Time, more ...clientv3.Op) (preparedRunWrite, error) {
	w, ok := pt.runWriteOp(ar, r)
	if !ok {
		return preparedRunWrite{}, fmt.Errorf("run %s: %w", r.ID, api.ErrTooLarge)
	}
	rw := preparedRunWrite{ar: ar, notBefore: notBefore}
	pt.mu.Lock()
	e := pt.jobs[r.JobID]
	prev := ar.run
	if e != nil && w.run.Status.Final() && !prev.Status.Final() {
		j := e.job()
		rw.st, rw.pause = CountOutcome(&j, RecordSuccess(&j, e.state(), w.run, pt.now()), w.run, pt.now())
		rw.counted = rw.st != e.state()
	}
	pt.mu.Unlock()
	rw.e = e
	also := slices.Clip(more)
	if e != nil && e.work != "" {
		var ns []clientv3.Op
		ns, rw.notes = pt.notificationsFor(e.work, prev, w.run, w.val, pt.now())
		also = append(also, ns...)
	}
	if e != nil && w.run.Status.Final() && !prev.Status.Final() {
		also = append(also, pt.handoverOps(w.run, pt.now())...) // after.go
	}
	if rw.counted {
		op, err := pt.d.keys.PutStateOp(pt.p, r.JobID, rw.st)
		if err != nil {
			pt.lg.Error("encoding a job state failed", zap.String("job_id", r.JobID), zap.Error(err))
			rw.counted, rw.pause = false, false
		} else {
			also = append(also, op)
		}
	}
	if rw.pause {
		ops, ns := pt.eventNotes(e.work, r.JobID, api.NotifyPaused, string(api.NotifyPaused), w.run.ID, w.run.ScheduledAt, len(w.run.Attempts), w.val, pt.now())
		also, rw.notes = append(also, ops...), append(rw.notes, ns...)
	}
	if len(also) > 0 {
		w.op = pt.d.keys.UpdateRunOp(w.run, w.val, ar.modRev, append(slices.Clip(w.failing), also...)...)
	}
	rw.w = w
	return rw, nil
}

// appliedRunWrite takes rw, applied at revision rev, into memory, and
// delivers its notifications. The caller holds wmu and not mu.
func (pt *partition) appliedRunWrite(rw preparedRunWrite, rev int64) {
	r := rw.w.run
	pt.mu.Lock()
	pt.updatedLocked(rw.ar, rw.w, rev, rw.notBefore)
	if cur := pt.jobs[r.JobID]; rw.counted && cur == rw.e {
		rw.e.setState(rw.st)
		pt.indexLocked(r.JobID)
	}
	pt.mu.Unlock()
	if len(rw.notes) > 0 {
		pt.notes.Add(rw.notes...)
	}
	if rw.pause {
		pt.d.cfg.Metrics.jobPaused()
		pt.lg.Warn("job paused after runs in a row ended dead", zap.String("job_id", r.JobID), zap.String("run_id", r.ID),
			zap.Int("failures", rw.st.Failures), zap.String("reason", rw.st.Pause.Reason))
	}
}

// changedBehind handles runs whose compare-and-swap write did not apply:
// out of memory, then read again (readopt). The caller holds wmu and not
// mu.
func (pt *partition) changedBehind(ctx context.Context, runs []api.Run) {
	if len(runs) == 0 {
		return
	}
	pt.mu.Lock()
	for _, r := range runs {
		pt.lg.Warn("run changed behind the owner's back; reading it again", zap.String("run_id", r.ID))
		pt.dropActiveLocked(r.ID)
	}
	pt.mu.Unlock()
	pt.readopt(ctx, runs)
}

// readopt reads the stored documents of runs whose compare-and-swap write
// did not apply and takes those that are not final back into memory. Only
// the owner writes its partition's runs (fenced on its epoch), so a run
// that changed behind its back was changed by one of its own writes whose
// answer it never had: a write that timed out in etcd and applied all the
// same. Dropping such a run would leave it pending, or running an attempt
// no worker got, for as long as the owner lasts. A run taken back gets a
// full run lease, as on load: a running attempt whose worker does not
// heartbeat is then lost and retried. Runs of jobs no longer known, and
// final runs, are left. The caller holds wmu and not mu; runs whose read
// fails are kept in unread, and the loop reads them again at its next
// tick (readoptUnread) for as long as it owns the partition.
func (pt *partition) readopt(ctx context.Context, runs []api.Run) {
	for i := 0; i < len(runs); i += 64 {
		chunk := runs[i:min(i+64, len(runs))]
		ops := make([]clientv3.Op, len(chunk))
		for i, r := range chunk {
			ops[i] = clientv3.OpGet(pt.d.keys.Run(pt.p, r.JobID, r.ScheduledAt))
		}
		rctx, cancel := context.WithTimeout(ctx, pt.d.cfg.RequestTimeout)
		resp, err := pt.d.client.Txn(rctx).Then(ops...).Commit()
		cancel()
		if err != nil {
			pt.lg.Warn("reading runs whose write did not apply failed; retrying", zap.Int("runs", len(runs)-i), zap.Error(err))
			pt.mu.Lock()
			for _, r := range runs[i:] {
				pt.unread[r.ID] = r
			}
			pt.mu.Unlock()
			pt.failed = true
			return
		}
		now := pt.now()
		pt.mu.Lock()
		for _, r := range chunk {
			delete(pt.unread, r.ID)
		}
		for _, rr := range resp.Responses {
			kvs := rr.GetResponseRange().Kvs
			if len(kvs) == 0 {
				continue // deleted with its job
			}
			var run api.Run
			if err := json.Unmarshal(kvs[0].Value, &run); err != nil || run.Status.Final() || pt.jobs[run.JobID] == nil {
				continue
			}
			if ar := pt.active[run.ID]; ar != nil && ar.modRev >= kvs[0].ModRevision {
				continue
			}
			pt.dropActiveLocked(run.ID)
			pt.addActiveLocked(newActiveRun(run, kvs[0].ModRevision, len(kvs[0].Value), now, pt.d.cfg.RunLease))
			pt.lg.Info("run taken back after a write whose answer was lost", zap.String("job_id", run.JobID), zap.String("run_id", run.ID),
				zap.String("status", string(run.Status)), zap.Int("attempts", len(run.Attempts)))
		}
		pt.mu.Unlock()
		pt.poke()
	}
}

// readoptUnread reads again the runs a failed readopt left out of
// memory. The caller holds wmu and not mu.
func (pt *partition) readoptUnread(ctx context.Context) {
	pt.mu.Lock()
	runs := slices.Collect(maps.Values(pt.unread))
	pt.mu.Unlock()
	if len(runs) > 0 {
		pt.readopt(ctx, runs)
	}
}

// classifyCommit returns a fenced write's error as callers test it: a
// lost ownership as shard.ErrFenced; a write refused because its
// ownership was re-fenced meanwhile (not applied, the partition still
// owned) as store.ErrUnavailable, to be tried again like a timeout;
// etcd's errors as store.Classify says.
func classifyCommit(err error) error {
	switch {
	case err == nil, errors.Is(err, shard.ErrFenced):
		return err
	case errors.Is(err, shard.ErrRefenced):
		return fmt.Errorf("%w: %w", store.ErrUnavailable, err)
	}
	return store.Classify(err)
}

// unknownOutcome reports whether a failed write may have applied in etcd
// all the same: anything but a refusal etcd answered (fenced, re-fenced,
// too large, no space) or a write the committer never sent leaves the
// outcome unknown (a timeout, a cancelled request, a lost connection, a
// leader change). The ownership re-fences before its next write, so such
// a write applies before that one or never (shard.Ownership.Refence).
func unknownOutcome(err error) bool {
	switch {
	case err == nil, errors.Is(err, errNotSent), errors.Is(err, shard.ErrFenced), errors.Is(err, shard.ErrRefenced), errors.Is(err, api.ErrTooLarge), errors.Is(err, store.ErrNoSpace):
		return false
	}
	return true
}

// errChangedBehind: a compare-and-swap write of a run did not apply.
var errChangedBehind = errors.New("run changed behind the owner's back")
