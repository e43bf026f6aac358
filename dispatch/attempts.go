package dispatch

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/jobfleet/jobfleet/store"
)

// expire ends attempts whose lease ran out, that ran past their timeout,
// or whose worker's registration ended (workerLostLocked), scheduling
// retries or marking runs dead. The caller holds wmu.
func (pt *partition) expire(ctx context.Context, now time.Time) {
	type lostAttempt struct {
		ar        *activeRun
		next      store.Run
		notBefore time.Time
		reason    string
	}
	var lost []lostAttempt
	pt.mu.Lock()
	for _, rid := range slices.Sorted(maps.Keys(pt.active)) {
		ar := pt.active[rid]
		e := pt.jobs[ar.run.JobID]
		if e == nil {
			continue
		}
		j := e.spec.job()
		expired, reason := LeaseExpired(&j, ar.run, ar.leaseUntil, now, pt.d.cfg.RunLease)
		if !expired {
			expired, reason = pt.workerLostLocked(ar)
		}
		if !expired {
			continue
		}
		r, notBefore := FinishAttempt(&j, ar.run, Outcome{Error: reason}, now, jitter())
		lost = append(lost, lostAttempt{ar: ar, next: r, notBefore: notBefore, reason: reason})
	}
	pt.mu.Unlock()
	for _, l := range lost {
		r, err := pt.writeRun(ctx, l.ar, l.next, l.notBefore)
		if err != nil {
			continue
		}
		pt.d.cfg.Metrics.attemptLost()
		pt.d.cfg.Metrics.finishedRun(string(r.Status))
		pt.lg.Warn("attempt lost", zap.String("job_id", r.JobID), zap.String("run_id", r.ID),
			zap.Int("attempt", len(r.Attempts)), zap.String("reason", l.reason), zap.String("status", string(r.Status)))
	}
}

// assign hands up to n dispatchable runs whose executor the worker runs
// (of jobs within req.Prefix) to req.Worker, recording each attempt with
// its worker and credential (fenced, compare-and-swap) first. The write
// runs under the partition's context: the poll ending meanwhile does not
// cut it (the caller takes back what it then cannot deliver). It is a
// writer.
func (pt *partition) assign(req PollRequest, executors map[string]bool, n int) []AttemptGrant {
	worker := req.Worker
	if pt.d.writesRefused() != nil {
		return nil // etcd is full: no attempt could be recorded
	}
	pt.wmu.Lock()
	defer pt.wmu.Unlock()
	now := pt.now()
	type pick struct {
		ar   *activeRun
		w    runWrite
		work jobWork
	}
	var picked []pick
	var ops []clientv3.Op
	pt.mu.Lock()
	if pt.closed {
		pt.mu.Unlock()
		return nil
	}
	bytes := 0
	for _, rid := range slices.Sorted(maps.Keys(pt.active)) {
		if len(picked) >= n || bytes >= assignBatchBytes {
			break
		}
		ar := pt.active[rid]
		e := pt.jobs[ar.run.JobID]
		if e == nil || !Dispatchable(ar.run, ar.notBefore, now) || !executors[e.spec.Executor.Type] || !strings.HasPrefix(ar.run.JobID, req.Prefix) {
			continue
		}
		work, err := e.work.decode()
		if err != nil {
			pt.lg.Error("decoding a job's executor failed; not dispatching its run", zap.String("run_id", rid), zap.Error(err))
			continue
		}
		started := StartAttempt(ar.run, worker, now)
		started.Attempts[len(started.Attempts)-1].Credential = req.Credential
		w, ok := pt.runWriteOp(ar, started)
		if !ok {
			continue
		}
		picked = append(picked, pick{ar: ar, w: w, work: work})
		ops = append(ops, w.op)
		bytes += w.size
	}
	pt.mu.Unlock()
	if len(picked) == 0 {
		return nil
	}
	resp, err := pt.commit(pt.ctx, ops)
	if err != nil {
		pt.lg.Warn("recording attempts failed", zap.Error(err))
		if unknownOutcome(err) {
			// The attempts may be recorded all the same, for a worker
			// that gets none of them: take back those that are.
			pt.mu.Lock()
			for _, pk := range picked {
				pt.takeBacks[pk.ar.run.ID] = undelivered{attempt: len(pk.w.run.Attempts), worker: worker, unsure: true}
			}
			pt.mu.Unlock()
			pt.poke()
		}
		return nil
	}
	var lost []store.Run
	defer func() { pt.readopt(pt.ctx, lost) }() // after mu is released
	pt.mu.Lock()
	defer pt.mu.Unlock()
	var out []AttemptGrant
	for i, pk := range picked {
		ar := pk.ar
		if !resp.Responses[i].GetResponseTxn().Succeeded {
			pt.dropActiveLocked(ar.run.ID)
			lost = append(lost, ar.run)
			continue
		}
		pt.updatedLocked(ar, pk.w, resp.Header.Revision, ar.notBefore)
		ar.leaseUntil = now.Add(pt.d.cfg.RunLease)
		e := pt.jobs[ar.run.JobID]
		out = append(out, AttemptGrant{
			RunID:       ar.run.ID,
			JobID:       ar.run.JobID,
			Attempt:     len(ar.run.Attempts),
			ScheduledAt: ar.run.ScheduledAt,
			Executor:    pk.work.Executor,
			Payload:     pk.work.Payload,
			Timeout:     e.spec.Timeout,
			RunLease:    store.Duration(pt.d.cfg.RunLease),
			Owner:       pt.own.Member,
			OwnerAddr:   pt.d.cfg.MemberAddr,
		})
		pt.d.cfg.Metrics.attemptStarted()
		pt.lg.Info("attempt started", zap.String("job_id", ar.run.JobID), zap.String("run_id", ar.run.ID),
			zap.Int("attempt", len(ar.run.Attempts)), zap.String("worker", worker), zap.String("credential", req.Credential))
	}
	if len(out) > 0 {
		pt.poke() // the loop's timer must cover the new leases
	}
	return out
}

// assignBatchBytes bounds the run documents one poll writes in one
// transaction, well under etcd's request limit.
const assignBatchBytes = 512 << 10

// withoutOutputs returns r without its attempts' outputs and errors.
func withoutOutputs(r store.Run) store.Run {
	r.Attempts = slices.Clone(r.Attempts)
	for i := range r.Attempts {
		a := &r.Attempts[i]
		a.DroppedBytes += len(a.Output) + len(a.Error)
		a.Output, a.Error = "", ""
	}
	return r
}

// currentLocked returns the active run whose current attempt is (attempt,
// worker), taken by credential; ErrForbidden if the attempt is current but
// was taken by another credential (whatever worker ID the report names),
// else ErrStaleAttempt.
func (pt *partition) currentLocked(runID string, attempt int, worker, credential string) (*activeRun, error) {
	ar := pt.active[runID]
	if ar != nil && ar.run.Status == store.RunRunning && len(ar.run.Attempts) == attempt && ar.run.Attempts[attempt-1].Credential != credential {
		pt.d.cfg.Metrics.forbiddenReport()
		pt.lg.Warn("report from another credential refused", zap.String("run_id", runID), zap.Int("attempt", attempt),
			zap.String("credential", credential), zap.String("worker", worker))
		return nil, fmt.Errorf("%w: run %s attempt %d", ErrForbidden, runID, attempt)
	}
	if ar == nil || ar.run.Status != store.RunRunning || len(ar.run.Attempts) != attempt || ar.run.Attempts[attempt-1].Worker != worker {
		pt.d.cfg.Metrics.staleReport()
		return nil, fmt.Errorf("%w: run %s attempt %d by %s", ErrStaleAttempt, runID, attempt, worker)
	}
	return ar, nil
}

// cancelledLocked returns the attempt (run, attempt, worker, credential)
// if it was ended by a replacement or a cancel request and its worker has
// not reported yet.
func (pt *partition) cancelledLocked(runID string, attempt int, worker, credential string) (cancelledAttempt, bool) {
	c, ok := pt.cancelled[runID]
	return c, ok && c.attempt == attempt && c.worker == worker && c.credential == credential
}

func (pt *partition) notOwned() error {
	owner, addr := pt.d.cfg.Lookup(pt.p)
	if owner == pt.own.Member {
		owner, addr = "", ""
	}
	return &NotOwnerError{Partition: pt.p, Owner: owner, OwnerAddr: addr}
}

// heartbeat extends a running attempt's lease. It is a reader: it takes
// only mu, so it answers while a write of the partition waits for etcd.
func (pt *partition) heartbeat(req HeartbeatRequest) (HeartbeatResponse, error) {
	pt.mu.Lock()
	defer pt.mu.Unlock()
	if pt.closed {
		return HeartbeatResponse{}, pt.notOwned()
	}
	if _, ok := pt.cancelledLocked(req.RunID, req.Attempt, req.Worker, req.Credential); ok {
		return HeartbeatResponse{RunLease: store.Duration(pt.d.cfg.RunLease), Cancel: true}, nil
	}
	ar, err := pt.currentLocked(req.RunID, req.Attempt, req.Worker, req.Credential)
	if err != nil {
		return HeartbeatResponse{}, err
	}
	ar.leaseUntil = pt.now().Add(pt.d.cfg.RunLease)
	return HeartbeatResponse{RunLease: store.Duration(pt.d.cfg.RunLease)}, nil
}

// complete records an attempt's result. The write runs under the
// partition's context: a worker that hangs up meanwhile does not cut it.
// It is a writer.
func (pt *partition) complete(req CompleteRequest) (CompleteResponse, error) {
	pt.wmu.Lock()
	defer pt.wmu.Unlock()
	pt.mu.Lock()
	if pt.closed {
		pt.mu.Unlock()
		return CompleteResponse{}, pt.notOwned()
	}
	if c, ok := pt.cancelledLocked(req.RunID, req.Attempt, req.Worker, req.Credential); ok {
		// The run records the cancellation already; the report only
		// closes the matter for the worker.
		delete(pt.cancelled, req.RunID)
		pt.mu.Unlock()
		pt.lg.Info("cancelled attempt reported", zap.String("run_id", req.RunID), zap.Int("attempt", req.Attempt), zap.String("worker", req.Worker))
		return CompleteResponse{Status: c.status}, nil
	}
	ar, err := pt.currentLocked(req.RunID, req.Attempt, req.Worker, req.Credential)
	if err != nil {
		pt.mu.Unlock()
		return CompleteResponse{}, err
	}
	e := pt.jobs[ar.run.JobID]
	if e == nil {
		pt.mu.Unlock()
		return CompleteResponse{}, fmt.Errorf("%w: job %q was deleted", ErrStaleAttempt, ar.run.JobID)
	}
	now := pt.now()
	j := e.spec.job()
	r, notBefore := FinishAttempt(&j, ar.run, Outcome{Success: req.Success, Error: req.Error, Output: req.Output}, now, jitter())
	pt.mu.Unlock()
	if err := pt.d.writesRefused(); err != nil {
		// etcd is full (NOSPACE): the write would be refused. Nothing is
		// tried; the worker reports again later (503) and the attempt
		// stays as it is, its lease running, until space is freed.
		return CompleteResponse{}, fmt.Errorf("recording the result of run %s: %w; report it again", r.ID, err)
	}
	_, err = pt.writeRun(pt.ctx, ar, r, notBefore)
	if errors.Is(err, store.ErrTooLarge) {
		// Cannot happen with a sane run document budget; if it does, the
		// result matters more than the outputs: record it without them,
		// rather than have a succeeded attempt retried as lost.
		pt.lg.Error("run document too large even within its budget; recording the result without outputs", zap.String("run_id", r.ID), zap.Error(err))
		_, err = pt.writeRun(pt.ctx, ar, withoutOutputs(r), notBefore)
	}
	if err != nil {
		pt.mu.Lock()
		closed := pt.closed
		pt.mu.Unlock()
		if closed {
			return CompleteResponse{}, pt.notOwned()
		}
		return CompleteResponse{}, fmt.Errorf("recording the result of run %s failed; report it again", r.ID)
	}
	pt.d.cfg.Metrics.finishedRun(string(r.Status))
	pt.lg.Info("attempt finished", zap.String("job_id", r.JobID), zap.String("run_id", r.ID), zap.Int("attempt", req.Attempt),
		zap.String("worker", req.Worker), zap.String("credential", req.Credential), zap.String("status", string(r.Status)), zap.String("error", req.Error))
	if !r.Status.Final() {
		pt.poke() // a retry's backoff timer
	}
	return CompleteResponse{Status: r.Status}, nil
}
