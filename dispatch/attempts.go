package dispatch

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/jobfleet/jobfleet/store"
)

// expireLocked ends attempts whose lease ran out or that ran past their
// timeout, scheduling retries or marking runs dead.
func (pt *partition) expireLocked(ctx context.Context, now time.Time) {
	for _, rid := range slices.Sorted(maps.Keys(pt.active)) {
		ar := pt.active[rid]
		e := pt.jobs[ar.run.JobID]
		var spec *store.Job
		if e != nil {
			spec = &e.spec
		}
		lost, reason := LeaseExpired(spec, ar.run, ar.leaseUntil, now, pt.d.cfg.RunLease)
		if !lost || spec == nil {
			continue
		}
		r, notBefore := FinishAttempt(spec, ar.run, Outcome{Error: reason}, now, jitter())
		if pt.writeRunLocked(ctx, ar, r) {
			ar.notBefore = notBefore
			pt.d.cfg.Metrics.attemptLost()
			pt.d.cfg.Metrics.finishedRun(string(r.Status))
			pt.lg.Warn("attempt lost", zap.String("job_id", r.JobID), zap.String("run_id", r.ID),
				zap.Int("attempt", len(r.Attempts)), zap.String("reason", reason), zap.String("status", string(r.Status)))
		}
	}
}

// assign hands up to n dispatchable runs whose executor the worker runs to
// worker, recording each attempt (fenced, compare-and-swap) first.
func (pt *partition) assign(ctx context.Context, worker string, executors map[string]bool, n int) []Assignment {
	pt.mu.Lock()
	defer pt.mu.Unlock()
	if pt.closed {
		return nil
	}
	now := pt.now()
	var picked []*activeRun
	for _, rid := range slices.Sorted(maps.Keys(pt.active)) {
		if len(picked) >= n {
			break
		}
		ar := pt.active[rid]
		e := pt.jobs[ar.run.JobID]
		if e == nil || ar.assigning || !Dispatchable(ar.run, ar.notBefore, now) || !executors[e.spec.Executor.Type] {
			continue
		}
		picked = append(picked, ar)
	}
	if len(picked) == 0 {
		return nil
	}
	ops := make([]clientv3.Op, 0, len(picked))
	next := make([]store.Run, len(picked))
	for i, ar := range picked {
		next[i] = StartAttempt(ar.run, worker, now)
		op, ok := pt.runWriteOp(ar, next[i])
		if !ok {
			return nil
		}
		ops = append(ops, op)
	}
	resp, err := pt.commitLocked(ctx, ops)
	if err != nil {
		pt.lg.Warn("recording attempts failed", zap.Error(err))
		return nil
	}
	var out []Assignment
	for i, ar := range picked {
		if !resp.Responses[i].GetResponseTxn().Succeeded {
			delete(pt.active, ar.run.ID)
			continue
		}
		ar.run, ar.modRev, ar.leaseUntil = next[i], resp.Header.Revision, now.Add(pt.d.cfg.RunLease)
		e := pt.jobs[ar.run.JobID]
		payload := e.spec.Payload
		out = append(out, Assignment{
			RunID:       ar.run.ID,
			JobID:       ar.run.JobID,
			Attempt:     len(ar.run.Attempts),
			ScheduledAt: ar.run.ScheduledAt,
			Executor:    e.spec.Executor,
			Payload:     payload,
			Timeout:     e.spec.Timeout,
			Lease:       store.Duration(pt.d.cfg.RunLease),
			Owner:       pt.own.Member,
			OwnerAddr:   pt.d.cfg.MemberAddr,
		})
		pt.poke() // the loop's timer must cover the new lease
		pt.d.cfg.Metrics.attemptStarted()
		pt.lg.Info("attempt started", zap.String("job_id", ar.run.JobID), zap.String("run_id", ar.run.ID),
			zap.Int("attempt", len(ar.run.Attempts)), zap.String("worker", worker))
	}
	return out
}

// current returns the active run whose current attempt is (attempt,
// worker), or ErrStaleAttempt.
func (pt *partition) currentLocked(runID string, attempt int, worker string) (*activeRun, error) {
	ar := pt.active[runID]
	if ar == nil || ar.run.Status != store.RunRunning || len(ar.run.Attempts) != attempt || ar.run.Attempts[attempt-1].Worker != worker {
		pt.d.cfg.Metrics.staleReport()
		return nil, fmt.Errorf("%w: run %s attempt %d by %s", ErrStaleAttempt, runID, attempt, worker)
	}
	return ar, nil
}

func (pt *partition) notOwnedLocked() error {
	owner, addr := pt.d.cfg.Lookup(pt.p)
	if owner == pt.own.Member {
		owner, addr = "", ""
	}
	return &NotOwnerError{Partition: pt.p, Owner: owner, OwnerAddr: addr}
}

// takeBack undoes the hand-out of attempt a, which its worker never
// received: the run goes back to the state it had, without the attempt.
func (pt *partition) takeBack(ctx context.Context, a Assignment) {
	pt.mu.Lock()
	defer pt.mu.Unlock()
	if pt.closed {
		return
	}
	ar := pt.active[a.RunID]
	if ar == nil || ar.run.Status != store.RunRunning || len(ar.run.Attempts) != a.Attempt {
		return
	}
	r := ar.run
	r.Attempts = r.Attempts[:len(r.Attempts)-1]
	r.Status = store.RunPending
	if n := len(r.Attempts); n > 0 {
		r.Status = store.RunFailed
	}
	if pt.writeRunLocked(ctx, ar, r) {
		pt.lg.Info("attempt taken back: its poll was cancelled before delivery", zap.String("run_id", a.RunID), zap.Int("attempt", a.Attempt))
		pt.d.wakePollers()
	}
}

func (pt *partition) heartbeat(req HeartbeatRequest) (HeartbeatResponse, error) {
	pt.mu.Lock()
	defer pt.mu.Unlock()
	if pt.closed {
		return HeartbeatResponse{}, pt.notOwnedLocked()
	}
	ar, err := pt.currentLocked(req.RunID, req.Attempt, req.Worker)
	if err != nil {
		return HeartbeatResponse{}, err
	}
	ar.leaseUntil = pt.now().Add(pt.d.cfg.RunLease)
	return HeartbeatResponse{Lease: store.Duration(pt.d.cfg.RunLease)}, nil
}

func (pt *partition) complete(ctx context.Context, req CompleteRequest) (CompleteResponse, error) {
	pt.mu.Lock()
	defer pt.mu.Unlock()
	if pt.closed {
		return CompleteResponse{}, pt.notOwnedLocked()
	}
	ar, err := pt.currentLocked(req.RunID, req.Attempt, req.Worker)
	if err != nil {
		return CompleteResponse{}, err
	}
	e := pt.jobs[ar.run.JobID]
	if e == nil {
		return CompleteResponse{}, fmt.Errorf("%w: job %q was deleted", ErrStaleAttempt, ar.run.JobID)
	}
	now := pt.now()
	r, notBefore := FinishAttempt(&e.spec, ar.run, Outcome{Success: req.Success, Error: req.Error, Output: req.Output}, now, jitter())
	if !pt.writeRunLocked(ctx, ar, r) {
		if pt.closed {
			return CompleteResponse{}, pt.notOwnedLocked()
		}
		return CompleteResponse{}, fmt.Errorf("recording the result of run %s failed; report it again", r.ID)
	}
	ar.notBefore = notBefore
	pt.d.cfg.Metrics.finishedRun(string(r.Status))
	pt.lg.Info("attempt finished", zap.String("job_id", r.JobID), zap.String("run_id", r.ID), zap.Int("attempt", req.Attempt),
		zap.String("worker", req.Worker), zap.String("status", string(r.Status)), zap.String("error", req.Error))
	if !r.Status.Final() {
		pt.poke() // a retry's backoff timer
	}
	return CompleteResponse{Status: r.Status}, nil
}
