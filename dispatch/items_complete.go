package dispatch

import (
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/jobfleet/jobfleet/api"

	"go.uber.org/zap"
)

// This file records items' results. The items of one run finish in
// bursts, each result a rewrite of the whole run document; so the
// results of one run that wait for the partition's writer lock are
// recorded together: the first of them to get the lock decides and
// writes them all, in one compare-and-swap of the run, and answers each.

// itemReport is an item's result waiting to be recorded, and where its
// answer goes (buffer 1: the writer never waits for the reporter).
type itemReport struct {
	req  CompleteRequest
	done chan itemAnswer
}

type itemAnswer struct {
	resp CompleteResponse
	err  error
}

// completeItem records an item's result with the other results of its
// run that wait for the writer lock. It is a writer.
func (pt *partition) completeItem(req CompleteRequest) (CompleteResponse, error) {
	r := &itemReport{req: req, done: make(chan itemAnswer, 1)}
	pt.mu.Lock()
	if pt.reports == nil {
		pt.reports = map[string][]*itemReport{}
	}
	pt.reports[req.RunID] = append(pt.reports[req.RunID], r)
	pt.mu.Unlock()
	pt.wmu.Lock()
	defer pt.wmu.Unlock()
	select {
	case a := <-r.done: // recorded by the writer before this one
		return a.resp, a.err
	default:
	}
	pt.mu.Lock()
	batch := pt.reports[req.RunID]
	delete(pt.reports, req.RunID)
	pt.mu.Unlock()
	pt.recordItems(req.RunID, batch)
	a := <-r.done
	return a.resp, a.err
}

// recordItems decides and writes the results of batch, all of run
// runID, and answers each report. The caller holds wmu.
func (pt *partition) recordItems(runID string, batch []*itemReport) {
	answer := func(r *itemReport, resp CompleteResponse, err error) { r.done <- itemAnswer{resp, err} }
	pt.mu.Lock()
	if pt.closed {
		pt.mu.Unlock()
		for _, r := range batch {
			answer(r, CompleteResponse{}, pt.notOwned())
		}
		return
	}
	now := pt.now()
	var u runUpdate
	var accepted []*itemReport
	for _, r := range batch {
		req := r.req
		if c, ok := pt.cancelledLocked(req.RunID, req.Item, req.Attempt, req.Worker, req.Credential); ok {
			// The run records the cancellation already; the report only
			// closes the matter for the worker.
			delete(pt.cancelled, keyOf(req.RunID, req.Item))
			pt.markEndedLocked(chainAttempt{run: req.RunID, item: *req.Item, attempt: req.Attempt})
			pt.lg.Info("cancelled attempt reported", zap.String("run_id", req.RunID), itemField(*req.Item),
				zap.Int("attempt", req.Attempt), zap.String("worker", req.Worker))
			answer(r, CompleteResponse{Status: c.status, RunStatus: c.runStatus}, nil)
			continue
		}
		if u.ar != nil && slices.Contains(u.cancelled, *req.Item) {
			// An earlier result of this batch decided the run without
			// this item: acknowledged as its cancellation is.
			answer(r, CompleteResponse{Status: api.RunDead, RunStatus: u.next.Status}, nil)
			continue
		}
		ar, c, err := pt.currentLocked(req.RunID, req.Item, req.Attempt, req.Worker, req.Credential)
		if err == nil && u.ar != nil {
			// Against the run as the batch has it so far.
			if nc, ok := chainOf(u.next, c.item, nil); !ok || !nc.holds(req.Attempt, req.Worker) {
				pt.d.cfg.Metrics.staleReport()
				err = fmt.Errorf("%w: run %s%s attempt %d by %s", ErrStaleAttempt, req.RunID, itemSuffix(c.item), req.Attempt, req.Worker)
			}
		}
		if err != nil {
			answer(r, CompleteResponse{}, err)
			continue
		}
		e := pt.jobs[ar.run.JobID]
		if e == nil {
			answer(r, CompleteResponse{}, fmt.Errorf("%w: job %q was deleted", ErrStaleAttempt, ar.run.JobID))
			continue
		}
		if u.ar == nil {
			u = runUpdate{ar: ar, next: ar.run, items: map[int]time.Time{}}
		}
		j := e.spec.job()
		var nb time.Time
		var cancelled []int
		u.next, nb, cancelled = FinishItem(&j, u.next, c.item, Outcome{Success: req.Success, Error: req.Error, Output: req.Output, Result: req.Result}, now, jitter())
		u.items[c.item] = nb
		u.cancelled = append(u.cancelled, cancelled...)
		u.reported = append(u.reported, chainAttempt{run: req.RunID, item: c.item, attempt: req.Attempt})
		accepted = append(accepted, r)
	}
	pt.mu.Unlock()
	if len(accepted) == 0 {
		return
	}
	if err := pt.d.writesRefused(); err != nil {
		// etcd is full (NOSPACE): nothing is tried; the workers report
		// again later (503) and the attempts stay as they are.
		for _, r := range accepted {
			answer(r, CompleteResponse{}, fmt.Errorf("recording the result of run %s: %w; report it again", runID, err))
		}
		return
	}
	r, err := pt.writeUpdate(pt.ctx, u, now)
	if errors.Is(err, api.ErrTooLarge) {
		pt.lg.Error("run document too large even within its budget; recording the results without outputs", zap.String("run_id", runID), zap.Error(err))
		u.next = withoutOutputs(u.next)
		r, err = pt.writeUpdate(pt.ctx, u, now)
	}
	if err != nil {
		pt.mu.Lock()
		closed := pt.closed
		pt.mu.Unlock()
		for _, rep := range accepted {
			if closed {
				answer(rep, CompleteResponse{}, pt.notOwned())
			} else {
				answer(rep, CompleteResponse{}, fmt.Errorf("recording the result of run %s failed; report it again", runID))
			}
		}
		return
	}
	share := pt.sizeOf(u.ar) / len(accepted)
	for _, rep := range accepted {
		req := rep.req
		resp := CompleteResponse{Status: r.Items[*req.Item].Status, RunStatus: r.Status, Written: share}
		pt.d.cfg.Metrics.finishedRun(string(resp.Status))
		pt.lg.Info("attempt finished", zap.String("job_id", r.JobID), zap.String("run_id", r.ID), itemField(*req.Item), zap.Int("attempt", req.Attempt),
			zap.String("worker", req.Worker), zap.String("credential", req.Credential), zap.String("status", string(resp.Status)),
			zap.String("run_status", string(r.Status)), zap.Int("recorded_with", len(accepted)), zap.String("error", req.Error))
		answer(rep, resp, nil)
	}
	if !r.Status.Final() {
		pt.poke() // a retry's backoff timer
	}
}
