package dispatch

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/jobfleet/jobfleet/store"
)

// expire ends attempts whose lease ran out or that ran past their timeout,
// scheduling retries or marking runs dead. The caller holds wmu.
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
		expired, reason := LeaseExpired(&e.spec, ar.run, ar.leaseUntil, now, pt.d.cfg.RunLease)
		if !expired {
			continue
		}
		r, notBefore := FinishAttempt(&e.spec, ar.run, Outcome{Error: reason}, now, jitter())
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
		ar *activeRun
		w  runWrite
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
		started := StartAttempt(ar.run, worker, now)
		started.Attempts[len(started.Attempts)-1].Credential = req.Credential
		w, ok := pt.runWriteOp(ar, started)
		if !ok {
			continue
		}
		picked = append(picked, pick{ar: ar, w: w})
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
			delete(pt.active, ar.run.ID)
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
			Executor:    e.spec.Executor,
			Payload:     e.spec.Payload,
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

// cancelledLocked reports whether (run, attempt, worker, credential) is an
// attempt cancelled by a replacement whose worker has not reported yet.
func (pt *partition) cancelledLocked(runID string, attempt int, worker, credential string) bool {
	c, ok := pt.cancelled[runID]
	return ok && c.attempt == attempt && c.worker == worker && c.credential == credential
}

func (pt *partition) notOwned() error {
	owner, addr := pt.d.cfg.Lookup(pt.p)
	if owner == pt.own.Member {
		owner, addr = "", ""
	}
	return &NotOwnerError{Partition: pt.p, Owner: owner, OwnerAddr: addr}
}

// queueTakeBack asks the loop to undo the hand-out of attempt a, which
// its worker never received (its poll ended first). The loop writes the
// run back without the attempt (takeBackQueued) under the partition's
// context, fenced, and retries after a failed write; a take-back that
// never applies (the partition is handed over meanwhile) leaves the
// attempt to expire with its lease, and the run is retried. It is a reader.
func (pt *partition) queueTakeBack(worker string, a AttemptGrant) {
	pt.mu.Lock()
	if pt.closed {
		pt.mu.Unlock()
		return
	}
	pt.takeBacks[a.RunID] = undelivered{attempt: a.Attempt, worker: worker}
	pt.mu.Unlock()
	pt.poke()
}

// undelivered is an attempt recorded for a poll that ended before its
// worker got it.
type undelivered struct {
	attempt int
	worker  string
	// unsure: the attempt's write failed with an unknown outcome (a
	// timeout, a lost connection), so memory may not show it although
	// etcd does: the run is read again before it is taken back.
	unsure bool
}

// takeBackQueued writes back the runs of queued take-backs without their
// undelivered attempts: pending, or failed with the attempts they had. A
// take-back whose attempt is no longer the run's current one is moot; one
// whose write fails stays queued for the next tick. The caller holds wmu.
func (pt *partition) takeBackQueued(ctx context.Context) {
	pt.resolveUnsure(ctx)
	type back struct {
		runID     string
		u         undelivered
		ar        *activeRun
		r         store.Run
		notBefore time.Time
	}
	var todo []back
	pt.mu.Lock()
	for _, rid := range slices.Sorted(maps.Keys(pt.takeBacks)) {
		u := pt.takeBacks[rid]
		ar := pt.active[rid]
		if u.unsure {
			continue // not read yet: resolveUnsure failed
		}
		if ar == nil || ar.run.Status != store.RunRunning || len(ar.run.Attempts) != u.attempt ||
			ar.run.Attempts[u.attempt-1].Worker != u.worker {
			delete(pt.takeBacks, rid) // finished, expired or taken back already
			continue
		}
		r := ar.run
		r.Attempts = slices.Clone(r.Attempts[:len(r.Attempts)-1])
		r.Status = store.RunPending
		if len(r.Attempts) > 0 {
			r.Status = store.RunFailed
		}
		todo = append(todo, back{runID: rid, u: u, ar: ar, r: r, notBefore: ar.notBefore})
	}
	pt.mu.Unlock()
	for _, b := range todo {
		_, err := pt.writeRun(ctx, b.ar, b.r, b.notBefore)
		if err != nil && !errors.Is(err, errChangedBehind) {
			continue // retried at the next tick
		}
		pt.mu.Lock()
		if pt.takeBacks[b.runID] == b.u {
			delete(pt.takeBacks, b.runID)
		}
		pt.mu.Unlock()
		if err == nil {
			pt.lg.Info("attempt taken back: its poll ended before delivery", zap.String("run_id", b.runID), zap.Int("attempt", b.u.attempt),
				zap.String("worker", b.u.worker))
			pt.d.wakePollers()
		}
	}
}

// resolveUnsure settles take-backs whose attempt's write had an unknown
// outcome: a run whose memory shows the attempt (read again meanwhile
// after a refused write) is taken back; the others are read, and a run
// stored with the attempt (the write applied) is taken into memory as
// stored, to be taken back, while one stored without it (the write did
// not apply) needs none. A failed read leaves them for the next tick. The
// caller holds wmu.
func (pt *partition) resolveUnsure(ctx context.Context) {
	holds := func(r store.Run, u undelivered) bool {
		return r.Status == store.RunRunning && len(r.Attempts) == u.attempt && r.Attempts[u.attempt-1].Worker == u.worker
	}
	pt.mu.Lock()
	var runs []store.Run
	for _, rid := range slices.Sorted(maps.Keys(pt.takeBacks)) {
		u, ar := pt.takeBacks[rid], pt.active[rid]
		switch {
		case !u.unsure:
		case ar == nil:
			delete(pt.takeBacks, rid) // final, or deleted with its job
		case holds(ar.run, u):
			u.unsure = false
			pt.takeBacks[rid] = u
		default:
			runs = append(runs, ar.run)
		}
	}
	pt.mu.Unlock()
	if len(runs) == 0 {
		return
	}
	kvs, err := pt.readRuns(ctx, runs)
	if err != nil {
		pt.lg.Warn("reading runs whose attempt's write had an unknown outcome failed; retrying", zap.Int("runs", len(runs)), zap.Error(err))
		pt.failed = true
		return
	}
	pt.mu.Lock()
	defer pt.mu.Unlock()
	for i, r := range runs {
		u, ar := pt.takeBacks[r.ID], pt.active[r.ID]
		delete(pt.takeBacks, r.ID)
		kv := kvs[i]
		if ar == nil || kv == nil {
			continue
		}
		var stored store.Run
		if err := json.Unmarshal(kv.Value, &stored); err != nil || !holds(stored, u) {
			continue // the write did not apply (or the run moved on)
		}
		if kv.ModRevision != ar.modRev {
			pt.hist.rewritten(stored.JobID, stored.ScheduledAt, ar.size, len(kv.Value), false)
			ar.run, ar.modRev, ar.size = stored, kv.ModRevision, len(kv.Value)
		}
		u.unsure = false
		pt.takeBacks[r.ID] = u
		pt.lg.Info("attempt whose write had an unknown outcome found applied; taking it back", zap.String("run_id", r.ID),
			zap.Int("attempt", u.attempt), zap.String("worker", u.worker))
	}
}

// readRuns reads the stored documents of runs in one transaction; nil
// for a run that is not stored. The caller holds neither lock or wmu only.
func (pt *partition) readRuns(ctx context.Context, runs []store.Run) ([]*mvccpb.KeyValue, error) {
	ops := make([]clientv3.Op, len(runs))
	for i, r := range runs {
		ops[i] = clientv3.OpGet(pt.d.keys.Run(pt.p, r.JobID, r.ScheduledAt))
	}
	rctx, cancel := context.WithTimeout(ctx, pt.d.cfg.RequestTimeout)
	defer cancel()
	resp, err := pt.d.client.Txn(rctx).Then(ops...).Commit()
	if err != nil {
		return nil, err
	}
	out := make([]*mvccpb.KeyValue, len(runs))
	for i, rr := range resp.Responses {
		if kvs := rr.GetResponseRange().Kvs; len(kvs) > 0 {
			out[i] = kvs[0]
		}
	}
	return out, nil
}

// heartbeat extends a running attempt's lease. It is a reader: it takes
// only mu, so it answers while a write of the partition waits for etcd.
func (pt *partition) heartbeat(req HeartbeatRequest) (HeartbeatResponse, error) {
	pt.mu.Lock()
	defer pt.mu.Unlock()
	if pt.closed {
		return HeartbeatResponse{}, pt.notOwned()
	}
	if pt.cancelledLocked(req.RunID, req.Attempt, req.Worker, req.Credential) {
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
	if pt.cancelledLocked(req.RunID, req.Attempt, req.Worker, req.Credential) {
		// The run records the cancellation already; the report only
		// closes the matter for the worker.
		delete(pt.cancelled, req.RunID)
		pt.mu.Unlock()
		pt.lg.Info("cancelled attempt reported", zap.String("run_id", req.RunID), zap.Int("attempt", req.Attempt), zap.String("worker", req.Worker))
		return CompleteResponse{Status: store.RunDead}, nil
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
	r, notBefore := FinishAttempt(&e.spec, ar.run, Outcome{Success: req.Success, Error: req.Error, Output: req.Output}, now, jitter())
	pt.mu.Unlock()
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
