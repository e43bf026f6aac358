package dispatch

import (
	"fmt"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/jobfleet/jobfleet/api"

	"github.com/jobfleet/jobfleet/dispatch/placement"
)

// Placement and spreading (docs/scheduling.md, "Where a run goes").
//
// A run goes only to a poll whose worker may take it (poll.may): it serves
// the run's executor type, its credential's scope covers the job, and its
// registered labels match the job's selector. Workers pull, so spreading
// is what one member decides about the polls it holds:
//
//   - spread: a poll passes a run over when another poll waiting here, of
//     another worker with more free slots (PollRequest.Free, less what it
//     took), may take it, and has not been left as many runs as it may
//     still take by the same write; that poll is nudged to look again;
//   - retry_elsewhere: a poll passes a retry over when its worker ran the
//     attempt that failed and another live worker may take the run, for
//     at most one run lease after the retry is due.
//
// A poll that others passed runs over for wakes every poll when it ends,
// so that a run it did not take after all is looked at again.

// poll is one worker's poll in progress at this member.
type poll struct {
	req       PollRequest
	executors map[string]bool
	// id is the worker's identity as the registry shows it, refreshed at
	// each look over the partitions.
	id atomic.Pointer[identity]
	// free is the worker's free slots less what this poll took; room is
	// req.Max less what it took.
	free, room atomic.Int64
	// passed: another poll passed a run over for this one.
	passed atomic.Bool
	// ended: the worker ended its polls here (EndPolls); p answers with
	// nothing more.
	ended atomic.Bool
	nudge chan struct{} // buffer 1: look again (a run was passed over for this poll, or it was ended)
}

// identity is what placement knows of a polling worker.
type identity struct {
	labels map[string]string
	// known: the worker has a live registration bound to the poll's
	// credential; without one it has no labels.
	known bool
	// blocked: the labels it has (none, unknown) are outside the
	// credential's worker label selector: it takes nothing.
	blocked bool
}

// startPoll records a poll in progress.
func (d *Dispatcher) startPoll(req PollRequest) *poll {
	p := &poll{req: req, executors: make(map[string]bool, len(req.Executors)), nudge: make(chan struct{}, 1)}
	for _, e := range req.Executors {
		p.executors[e] = true
	}
	p.free.Store(int64(max(req.Free, req.Max)))
	p.room.Store(int64(req.Max))
	p.id.Store(&identity{blocked: true})
	d.pollsMu.Lock()
	d.polls[p] = struct{}{}
	d.pollsMu.Unlock()
	return p
}

// endPoll forgets p; if other polls passed runs over for it, they look
// again.
func (d *Dispatcher) endPoll(p *poll) {
	d.pollsMu.Lock()
	delete(d.polls, p)
	d.pollsMu.Unlock()
	if p.passed.Load() {
		d.wakePollers()
	}
}

// wake makes p look again, at once if it is waiting (a nudge already
// pending is enough).
func (p *poll) wake() {
	select {
	case p.nudge <- struct{}{}:
	default:
	}
}

// took notes that p was handed n attempts.
func (p *poll) took(n int) {
	p.free.Add(-int64(n))
	p.room.Add(-int64(n))
}

// identify returns what placement knows of req's worker: the labels of
// its live registration, if bound to req.Credential. It returns an error
// wrapping ErrForbidden when that registration's labels are outside the
// credential's worker label selector (the credential changed since).
func (d *Dispatcher) identify(req PollRequest) (*identity, error) {
	var w api.Worker
	ok := false
	if d.cfg.Workers != nil {
		w, ok = d.cfg.Workers.Worker(req.Worker)
	}
	if !ok || w.Credential != req.Credential {
		// No labels: only jobs without a selector, and only if the
		// credential allows a worker without labels.
		return &identity{blocked: !placement.Allows(req.WorkerLabels, nil)}, nil
	}
	if !placement.Allows(req.WorkerLabels, w.Labels) {
		return nil, fmt.Errorf("%w: labels: credential %s lets its workers take runs only with labels matching %s; worker %s is registered with %s",
			ErrForbidden, strconv.Quote(req.Credential), strconv.Quote(req.WorkerLabels), strconv.Quote(req.Worker), strconv.Quote(placement.FormatLabels(w.Labels)))
	}
	return &identity{labels: w.Labels, known: true}, nil
}

// rivals returns the other polls in progress here, of other workers, with
// more free slots than p and room for an attempt.
func (d *Dispatcher) rivals(p *poll) []*poll {
	free := p.free.Load()
	d.pollsMu.Lock()
	defer d.pollsMu.Unlock()
	var out []*poll
	for q := range d.polls {
		if q != p && q.req.Worker != p.req.Worker && q.free.Load() > free && q.room.Load() > 0 && !q.id.Load().blocked && !q.ended.Load() {
			out = append(out, q)
		}
	}
	return out
}

// may reports whether p's worker may take a run of job e: it serves the
// executor type, the credential's scope covers the job, and its labels
// match the job's selector.
//
// For a job made of steps, it reports whether the worker may take items
// of one of its steps (mayStep decides for each item).
func (p *poll) may(e *jobEntry, jobID string) bool {
	id := p.id.Load()
	if id.blocked || !strings.HasPrefix(jobID, p.req.Prefix) {
		return false
	}
	if c := e.spec.controls(); len(c.Steps) > 0 {
		for k := range c.Steps {
			if p.mayStep(e, k) {
				return true
			}
		}
		return false
	}
	return p.executors[e.spec.Executor.Type] && e.spec.Placed().allows(id.labels, id.known)
}

// mayStep reports whether p's worker may take items of step k of job e
// (which may takes): it serves the step's executor type and its labels
// match the step's selector.
func (p *poll) mayStep(e *jobEntry, k int) bool {
	id := p.id.Load()
	c := e.spec.controls()
	return k >= 0 && k < len(c.Steps) && p.executors[c.Steps[k].Executor.Type] && c.stepsPlaced[k].allows(id.labels, id.known)
}

// previousWorker returns the worker of run r's latest attempt, "" if it
// has none.
func previousWorker(r *api.Run) string {
	if len(r.Attempts) == 0 {
		return ""
	}
	return r.Attempts[len(r.Attempts)-1].Worker
}

// retryElsewhereUntil returns until when a dispatchable retry of ar's run
// passes its previous worker over (zero: it does not): one run lease
// after it is due, if the job retries elsewhere.
func (pt *partition) retryElsewhereUntil(e *jobEntry, ar *activeRun) time.Time {
	if !e.spec.Placed().elsewhere() || previousWorker(&ar.run) == "" || pt.d.cfg.Workers == nil {
		return time.Time{}
	}
	return ar.notBefore.Add(pt.d.cfg.RunLease)
}

// shunned reports whether worker ran the failed attempt of ar's run, and
// its retry goes elsewhere now: within the retry's window, another live
// worker may take it. The caller holds mu.
func (pt *partition) shunned(e *jobEntry, ar *activeRun, worker string, now time.Time) bool {
	if previousWorker(&ar.run) != worker || !now.Before(pt.retryElsewhereUntil(e, ar)) {
		return false
	}
	return pt.d.cfg.Workers.OtherCanTake(ar.run.JobID, e.spec.Executor.Type, e.spec.Placed().selector(), worker)
}

// passOver reports whether p passes over the run of ar (which p may
// take, as n chains): its worker is shunned for the retry, or a rival
// poll may take it, which is then nudged. left counts the chains the
// write being decided has passed over for each rival: a rival is left no
// more than its room (what it may still take), so that under a herd a
// poll of a worker with a few slots fewer does not pass over every run
// of the partition for a rival that takes three. The caller holds mu.
func (pt *partition) passOver(p *poll, rivals []*poll, left map[*poll]int, n int, e *jobEntry, ar *activeRun, now time.Time) bool {
	if pt.shunned(e, ar, p.req.Worker, now) {
		pt.d.cfg.Metrics.passOver(passRetryElsewhere)
		return true
	}
	for _, q := range rivals {
		if q.room.Load() > int64(left[q]) && q.may(e, ar.run.JobID) && !pt.shunned(e, ar, q.req.Worker, now) {
			left[q] += n
			q.passed.Store(true)
			q.wake()
			pt.d.cfg.Metrics.passOver(passSpread)
			return true
		}
	}
	return false
}

// mayServe reports whether an active run of pt may be one that poll p can
// take: a dispatchable run, or a run of items, of a job p may run. It
// takes the state lock only, so that a poll learns there is nothing for it
// here without waiting for the partition's writer, which may be writing
// another team's fires or triggers for a while. A true answer is checked
// again under the writer lock.
func (pt *partition) mayServe(p *poll) bool {
	now := pt.now()
	pt.mu.Lock()
	defer pt.mu.Unlock()
	for _, ar := range pt.active {
		e := pt.jobs[ar.run.JobID]
		if e == nil || !p.may(e, ar.run.JobID) {
			continue
		}
		if len(ar.run.Items) > 0 || Dispatchable(ar.run, ar.notBefore, now) {
			return true
		}
	}
	return false
}
