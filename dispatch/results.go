package dispatch

import (
	"errors"
	"fmt"
	"slices"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/jobfleet/jobfleet/api"
)

// This file records workers' results. Each result is a rewrite of its
// run's document, and a partition writes one write at a time (wmu); under
// a herd many results arrive at once for one partition. So the results
// that wait for the writer lock are recorded together: the first of them
// to get the lock decides them all, writes them in one fenced transaction
// (each run its own compare-and-swap, applied or refused on its own), and
// answers each. The results of one run (its items finish in bursts) are
// merged into one rewrite of the run. Two runs of one job, or two writes
// of one key, never share a write: the later waits for the next one (a
// job's state is decided from the run before).

// report is a result waiting to be recorded, and where its answer goes
// (buffer 1: the writer never waits for the reporter).
type report struct {
	req  CompleteRequest
	done chan reportAnswer
}

type reportAnswer struct {
	resp CompleteResponse
	err  error
}

// answer answers r; an answer to a report answered already is dropped
// (the first answer stands).
func (r *report) answer(resp CompleteResponse, err error) {
	select {
	case r.done <- reportAnswer{resp, err}:
	default:
	}
}

// Bounds of one write of results: the runs it rewrites and the bytes of
// its keys and values (the run documents and their copies in
// notifications), well under etcd's limits (1.5 MiB, 128 operations per
// transaction, with maxWriteCost). A run larger than that alone goes on
// its own, as it always did.
const (
	resultBatchRuns  = 32
	resultBatchBytes = 512 << 10
)

// resultUpdate is one run's part of a write of results: its rewrite and
// the reports it records.
type resultUpdate struct {
	u        runUpdate
	accepted []*report // written with the update
	// acked are reports of items the update's decision ended while they
	// ran (their results came in the same batch): answered dead once the
	// update applied, as a cancelled attempt's report is.
	acked []*report
}

// reports returns every report the update answers.
func (ru *resultUpdate) reports() []*report { return slices.Concat(ru.accepted, ru.acked) }

// refuse answers every report of the update with err.
func (ru *resultUpdate) refuse(err error) {
	for _, r := range ru.reports() {
		r.answer(CompleteResponse{}, err)
	}
}

// errReportAgain is the answer to a result that was not recorded and
// may be reported again.
func errReportAgain(runID string) error {
	return fmt.Errorf("recording the result of run %s failed; report it again", runID)
}

// complete records an attempt's result, with the other results waiting
// for the partition's writer lock. The write runs under the partition's
// context: a worker that hangs up meanwhile does not cut it. It is a
// writer.
func (pt *partition) complete(req CompleteRequest) (CompleteResponse, error) {
	r := &report{req: req, done: make(chan reportAnswer, 1)}
	pt.mu.Lock()
	pt.reports = append(pt.reports, r)
	pt.mu.Unlock()
	pt.wmu.Lock()
	defer pt.wmu.Unlock()
	for {
		select {
		case a := <-r.done: // recorded by a writer before this one
			return a.resp, a.err
		default:
		}
		// Each round writes at least the first waiting result, and r is
		// among those waiting until it is answered. Polls waiting to be
		// handed runs here get their attempts in the same write
		// (assign.go), rather than wait for it to take their own.
		pt.mu.Lock()
		batch, visits := pt.reports, pt.visits
		pt.reports, pt.visits = nil, nil
		pt.mu.Unlock()
		if len(visits) > 0 {
			pt.serveGuarded(visits, batch)
			continue
		}
		pt.recordGuarded(batch)
	}
}

// recordGuarded is recordReports, answering every report of batch not
// answered yet if it panics (the panic goes on): their reporters, which
// may be other requests' goroutines, would otherwise wait for answers
// that never come.
func (pt *partition) recordGuarded(batch []*report) {
	defer func() {
		if p := recover(); p != nil {
			for _, r := range batch {
				r.answer(CompleteResponse{}, errReportAgain(r.req.RunID))
			}
			panic(p)
		}
	}()
	pt.recordReports(batch)
}

// recordReports decides the results of batch, in order, writes those
// accepted in one fenced transaction, as far as it has room, and answers
// each report; reports left out for want of room go back to the front of
// the queue, unanswered. The caller holds wmu and not mu.
func (pt *partition) recordReports(batch []*report) {
	rw, ok := pt.prepareReports(batch)
	if !ok {
		return
	}
	resp, err := pt.commit(pt.ctx, rw.ops)
	pt.recordedReports(rw, resp, 0, err)
}

// resultWrite is a write of results decided: the updates it sends, their
// prepared writes and its operations (one per update, in order).
type resultWrite struct {
	sent   []*resultUpdate
	writes []preparedRunWrite
	ops    []clientv3.Op
	now    time.Time
}

// prepareReports decides the results of batch, in order, and packs the
// write of those accepted, as far as it has room; it answers at once the
// reports refused, and puts those left out for want of room back at the
// front of the queue, unanswered. ok is false if there is nothing to
// write. The caller holds wmu and not mu.
func (pt *partition) prepareReports(batch []*report) (rw resultWrite, ok bool) {
	pt.mu.Lock()
	if pt.closed {
		pt.mu.Unlock()
		for _, r := range batch {
			r.answer(CompleteResponse{}, pt.notOwned())
		}
		return rw, false
	}
	now := pt.now()
	runs := pt.decideReportsLocked(batch, now)
	pt.mu.Unlock()
	if len(runs) == 0 {
		return rw, false
	}
	if err := pt.d.writesRefused(); err != nil {
		// etcd is full (NOSPACE): the write would be refused. Nothing is
		// tried; the workers report again later (503) and the attempts
		// stay as they are, their leases running, until space is freed.
		for _, ru := range runs {
			ru.refuse(fmt.Errorf("recording the result of run %s: %w; report it again", ru.u.ar.run.ID, err))
		}
		return rw, false
	}
	sent, writes, ops, later := pt.packResults(runs)
	if len(later) > 0 {
		pt.mu.Lock()
		pt.reports = append(later, pt.reports...)
		pt.mu.Unlock()
	}
	return resultWrite{sent: sent, writes: writes, ops: ops, now: now}, len(sent) > 0
}

// recordedReports applies the answer of write rw (resp's responses from
// at on, or err) and answers its reports. The caller holds wmu and not
// mu.
func (pt *partition) recordedReports(rw resultWrite, resp *clientv3.TxnResponse, at int, err error) {
	sent, writes := rw.sent, rw.writes
	if err != nil {
		pt.lg.Warn("recording results failed", zap.Int("runs", len(sent)), zap.Error(err))
		pt.mu.Lock()
		closed := pt.closed
		pt.mu.Unlock()
		for _, ru := range sent {
			if closed {
				ru.refuse(pt.notOwned())
			} else {
				ru.refuse(errReportAgain(ru.u.ar.run.ID))
			}
		}
		return
	}
	var lost []api.Run
	var lostRuns []*resultUpdate
	for i, ru := range sent {
		if !resp.Responses[at+i].GetResponseTxn().Succeeded {
			lost, lostRuns = append(lost, ru.u.ar.run), append(lostRuns, ru)
			continue
		}
		prev := ru.u.ar.run
		pt.appliedRunWrite(writes[i], resp.Header.Revision)
		r := writes[i].w.run
		pt.updateApplied(ru.u, prev, r, rw.now)
		pt.answerRecorded(ru, r, len(sent))
	}
	pt.changedBehind(pt.ctx, lost)
	for _, ru := range lostRuns {
		ru.refuse(errReportAgain(ru.u.ar.run.ID))
	}
}

// decideReportsLocked decides each report of batch against the runs in
// memory and the results before it in batch: it answers at once those
// refused (stale, another credential's, of a deleted job) and those of
// attempts already cancelled, and returns the rest as one update per
// run, in the order of their runs' first reports. The caller holds mu.
func (pt *partition) decideReportsLocked(batch []*report, now time.Time) []*resultUpdate {
	var runs []*resultUpdate
	byRun := map[string]*resultUpdate{}
	for _, r := range batch {
		req := r.req
		k := keyOf(req.RunID, req.Item)
		if c, ok := pt.cancelledLocked(req.RunID, req.Item, req.Attempt, req.Worker, req.Credential); ok {
			// The run records the cancellation already; the report only
			// closes the matter for the worker.
			delete(pt.cancelled, k)
			pt.markEndedLocked(chainAttempt{run: req.RunID, item: k.item, attempt: req.Attempt})
			pt.lg.Info("cancelled attempt reported", zap.String("run_id", req.RunID), itemField(k.item),
				zap.Int("attempt", req.Attempt), zap.String("worker", req.Worker))
			resp := CompleteResponse{Status: c.status}
			if req.Item != nil {
				resp.RunStatus = c.runStatus
			}
			r.answer(resp, nil)
			continue
		}
		ru := byRun[req.RunID]
		if ru != nil && k.item != noItem && slices.Contains(ru.u.cancelled, k.item) {
			// An earlier result of this batch decided the run without
			// this item: acknowledged as its cancellation is, once that
			// decision is written.
			ru.acked = append(ru.acked, r)
			continue
		}
		ar, c, err := pt.currentLocked(req.RunID, req.Item, req.Attempt, req.Worker, req.Credential)
		if err == nil && ru != nil {
			// Against the run as the batch has it so far.
			if nc, ok := chainOf(ru.u.next, c.item, nil); !ok || !nc.holds(req.Attempt, req.Worker) {
				pt.d.cfg.Metrics.staleReport()
				err = fmt.Errorf("%w: run %s%s attempt %d by %s", ErrStaleAttempt, req.RunID, itemSuffix(c.item), req.Attempt, req.Worker)
			}
		}
		if err != nil {
			r.answer(CompleteResponse{}, err)
			continue
		}
		e := pt.jobs[ar.run.JobID]
		if e == nil {
			r.answer(CompleteResponse{}, fmt.Errorf("%w: job %q was deleted", ErrStaleAttempt, ar.run.JobID))
			continue
		}
		if ru == nil {
			ru = &resultUpdate{u: runUpdate{ar: ar, next: ar.run}}
			byRun[req.RunID] = ru
			runs = append(runs, ru)
		}
		j := e.spec.job()
		o := Outcome{Success: req.Success, Error: req.Error, Output: req.Output, Result: req.Result}
		if c.item == noItem {
			ru.u.next, ru.u.notBefore = FinishAttempt(&j, ru.u.next, o, now, jitter())
		} else {
			var nb time.Time
			var cancelled []int
			ru.u.next, nb, cancelled = FinishItem(&j, ru.u.next, c.item, o, now, jitter())
			if ru.u.items == nil {
				ru.u.items = map[int]time.Time{}
			}
			ru.u.items[c.item] = nb
			ru.u.cancelled = append(ru.u.cancelled, cancelled...)
		}
		ru.u.reported = append(ru.u.reported, chainAttempt{run: req.RunID, item: c.item, attempt: req.Attempt})
		ru.accepted = append(ru.accepted, r)
	}
	return runs
}

// packResults makes the write of runs' updates, in order, as far as one
// write has room (resultBatchRuns, resultBatchBytes, maxWriteCost) and
// none repeats a job or a key of another: it returns the updates written,
// their prepared writes and the write's operations (one per update, in
// the same order), and the reports left for a later write. An update that
// cannot be encoded even without its outputs is answered at once.
func (pt *partition) packResults(runs []*resultUpdate) (sent []*resultUpdate, writes []preparedRunWrite, ops []clientv3.Op, later []*report) {
	jobs := map[string]bool{}
	keys := map[string]bool{}
	bytes, alone := 0, false
	for _, ru := range runs {
		id := ru.u.ar.run.JobID
		if len(sent) > 0 && (alone || len(sent) >= resultBatchRuns || jobs[id]) {
			later = append(later, ru.reports()...)
			continue
		}
		rw, err := pt.prepareRunWrite(ru.u.ar, ru.u.next, ru.u.notBefore, pt.releaseOps(ru.u)...)
		if errors.Is(err, api.ErrTooLarge) {
			// Cannot happen with a sane run document budget; if it does,
			// the result matters more than the outputs: record it without
			// them, rather than have a succeeded attempt retried as lost.
			pt.lg.Error("run document too large even within its budget; recording the result without outputs", zap.String("run_id", ru.u.ar.run.ID), zap.Error(err))
			ru.u.next = withoutOutputs(ru.u.next)
			rw, err = pt.prepareRunWrite(ru.u.ar, ru.u.next, ru.u.notBefore, pt.releaseOps(ru.u)...)
		}
		if err != nil {
			ru.refuse(fmt.Errorf("recording the result of run %s failed: %w", ru.u.ar.run.ID, err))
			continue
		}
		written, wide := opKeys(rw.w.op, nil)
		size := opsBytes([]clientv3.Op{rw.w.op}) // the run's document, and its copies in notifications
		if len(sent) > 0 && (wide || bytes+size > resultBatchBytes || slices.ContainsFunc(written, func(k string) bool { return keys[k] }) || txnCostAdding(ops, rw.w.op)+1 > maxWriteCost) {
			later = append(later, ru.reports()...)
			continue
		}
		sent, writes, ops = append(sent, ru), append(writes, rw), append(ops, rw.w.op)
		jobs[id] = true
		for _, k := range written {
			keys[k] = true
		}
		bytes += size
		alone = wide // a range of keys: alone in its write
	}
	return sent, writes, ops, later
}

// answerRecorded answers the reports of ru, recorded as r in a write of
// runs runs, and logs each.
func (pt *partition) answerRecorded(ru *resultUpdate, r api.Run, runs int) {
	share := pt.sizeOf(ru.u.ar) / len(ru.accepted)
	for _, rep := range ru.accepted {
		req := rep.req
		resp := CompleteResponse{Status: r.Status, Written: share}
		item := noItem
		if req.Item != nil {
			item = *req.Item
			resp.Status, resp.RunStatus = r.Items[item].Status, r.Status
		}
		pt.d.cfg.Metrics.finishedRun(string(resp.Status))
		pt.lg.Info("attempt finished", zap.String("job_id", r.JobID), zap.String("run_id", r.ID), itemField(item), zap.Int("attempt", req.Attempt),
			zap.String("worker", req.Worker), zap.String("credential", req.Credential), zap.String("status", string(resp.Status)),
			zap.String("run_status", string(r.Status)), zap.Int("recorded_with", len(ru.accepted)), zap.Int("runs_in_write", runs), zap.String("error", req.Error))
		rep.answer(resp, nil)
	}
	if len(ru.acked) > 0 {
		// Their workers have reported: the cancellations the write made
		// wait for no report, and their slots of limit keys go at the
		// loop's next tick.
		pt.mu.Lock()
		for _, rep := range ru.acked {
			req := rep.req
			delete(pt.cancelled, keyOf(req.RunID, req.Item))
			pt.markEndedLocked(chainAttempt{run: req.RunID, item: *req.Item, attempt: req.Attempt})
		}
		pt.mu.Unlock()
		for _, rep := range ru.acked {
			rep.answer(CompleteResponse{Status: api.RunDead, RunStatus: r.Status}, nil)
		}
	}
	if !r.Status.Final() {
		pt.poke() // a retry's backoff timer
	}
}

// opKeys appends to keys the keys op writes (puts and deletes, those of
// nested transactions' branches included) and reports whether it writes
// a range of keys, whose overlaps it does not list.
func opKeys(op clientv3.Op, keys []string) ([]string, bool) {
	switch {
	case op.IsTxn():
		_, then, els := op.Txn()
		wide := false
		for _, o := range slices.Concat(then, els) {
			var w bool
			keys, w = opKeys(o, keys)
			wide = wide || w
		}
		return keys, wide
	case op.IsPut():
		return append(keys, string(op.KeyBytes())), false
	case op.IsDelete():
		return append(keys, string(op.KeyBytes())), len(op.RangeBytes()) > 0
	}
	return keys, false
}
