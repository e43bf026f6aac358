package dispatch

import (
	"context"
	"maps"
	"slices"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/jobfleet/jobfleet/api"
	"github.com/jobfleet/jobfleet/store"
)

// This file cancels runs on request (POST /v1/runs/{id}/cancel): the
// decision (CancelRun, pure), the partition applying the requests the API
// records (store.Keys.Cancel), and the attempts told to stop.

// CancelRun returns run r ended at now by a cancel request of credential
// by ("" if unknown): cancelled, with the reason, and its running attempt,
// if any, closed as cancelled; a run of items (sharded, broadcast) has
// its items not ended skipped, their running attempts closed as
// cancelled, and stays cancelled whatever its items' reports say after
// (Settle). A cancelled run is final: never retried, its queue entry and
// failing-runs entry go with the write. ok is false, and r is returned as
// it is, if r is final already. It is the one place a cancel is decided:
// whatever a run is made of, ending it on request goes through here.
func CancelRun(r api.Run, by string, now time.Time) (out api.Run, ok bool) {
	if r.Status.Final() {
		return r, false
	}
	who := "on request"
	if by != "" {
		who = "by " + by
	}
	return endActive(r, api.RunCancelled, "cancelled "+who, "the run was cancelled "+who, now), true
}

// cancelReq is a request to cancel the run of job id for scheduled time
// at, not yet applied: the value of key, asked by credential by.
type cancelReq struct {
	id  string
	at  time.Time
	key string
	by  string
}

// cancelsPerTick bounds the cancel requests one tick applies (one write
// each); the others wait for the next tick.
const cancelsPerTick = 32

// applyCancels applies the pending cancel requests: each run still
// active is written cancelled (compare-and-swap, fenced) with its
// request's deletion in the same write, and its running attempt, if any,
// is told to stop at its next heartbeat; the requests of runs that are
// final or gone are deleted (the API then reads the run's status). A
// request whose write fails stays for the next tick. The caller holds wmu.
func (pt *partition) applyCancels(ctx context.Context, now time.Time) {
	type cancel struct {
		c       cancelReq
		ar      *activeRun
		next    api.Run
		running []chain // ar's chains before the write
	}
	var todo []cancel
	var moot []string
	pt.mu.Lock()
	for _, key := range slices.Sorted(maps.Keys(pt.cancels)) {
		if len(todo) >= cancelsPerTick {
			pt.poke() // the others next
			break
		}
		c := pt.cancels[key]
		rid := store.RunID(c.id, c.at)
		if _, ok := pt.unread[rid]; ok {
			continue // read it again first
		}
		if pt.unsureLocked(rid) {
			continue // an attempt of it may be recorded: resolved first
		}
		ar := pt.active[rid]
		if ar == nil {
			moot = append(moot, key)
			continue
		}
		next, ok := CancelRun(ar.run, c.by, now)
		if !ok {
			moot = append(moot, key)
			continue
		}
		todo = append(todo, cancel{c: c, ar: ar, next: next, running: ar.chains()})
	}
	pt.mu.Unlock()
	if len(moot) > 0 {
		ops := make([]clientv3.Op, len(moot))
		for i, key := range moot {
			ops[i] = clientv3.OpDelete(key)
		}
		if _, err := pt.commit(ctx, ops); err != nil {
			pt.lg.Warn("dropping cancel requests of final runs failed; retrying", zap.Error(err))
		} else {
			pt.mu.Lock()
			for _, key := range moot {
				delete(pt.cancels, key)
			}
			pt.mu.Unlock()
		}
	}
	for _, t := range todo {
		r, err := pt.writeRunAlso(ctx, t.ar, t.next, time.Time{}, clientv3.OpDelete(t.c.key))
		if err != nil {
			pt.lg.Warn("cancelling a run failed; retrying", zap.String("run_id", t.next.ID), zap.Error(err))
			continue
		}
		pt.mu.Lock()
		delete(pt.cancels, t.c.key)
		stopped := pt.stopChainsLocked(t.running, r, now)
		pt.mu.Unlock()
		pt.d.cfg.Metrics.finishedRun(string(r.Status))
		pt.lg.Info("run cancelled", zap.String("job_id", r.JobID), zap.String("run_id", r.ID), zap.String("by", t.c.by),
			zap.Int("attempts", r.AttemptCount()), zap.Int("items", len(r.Items)), zap.Int("attempts_stopped", stopped))
	}
}

// stopChainsLocked tells the workers of the running attempts of chains,
// an active run's chains as they were before its write as r (final), to
// stop (cancelLocked): each heartbeat is answered Cancel, each report
// acknowledged with r's status without being recorded, for a run lease.
// After that the worker is treated as lost: its heartbeats and report are
// refused as stale. It returns how many attempts it stopped.
func (pt *partition) stopChainsLocked(chains []chain, r api.Run, now time.Time) int {
	n := 0
	for _, c := range chains {
		if a, ok := c.current(); ok {
			pt.cancelLocked(r, c.item, a, now)
			n++
		}
	}
	return n
}

// cancelLocked remembers that running attempt a of chain item of run r
// (as just written) was ended by the owner (a replacement, a cancel
// request, its run's decision): the worker's next heartbeat is answered
// Cancel, its report acknowledged without being recorded, for a run
// lease; after that the worker is treated as lost (forgetStoppedLocked).
// The report is answered cancelled if r was cancelled, else dead, and
// an item's with r's status as its RunStatus.
func (pt *partition) cancelLocked(r api.Run, item int, a api.Attempt, now time.Time) {
	c := cancelledAttempt{attempt: a.Attempt, worker: a.Worker, credential: a.Credential, status: api.RunDead, until: now.Add(pt.d.cfg.RunLease)}
	if r.Status == api.RunCancelled {
		c.status = api.RunCancelled
	}
	if item != noItem {
		c.runStatus = r.Status
	}
	pt.cancelled[chainKey{run: r.ID, item: item}] = c
	pt.lg.Info("attempt told to stop", zap.String("job_id", r.JobID), zap.String("run_id", r.ID), itemField(item),
		zap.Int("attempt", a.Attempt), zap.String("worker", a.Worker), zap.String("run_status", string(r.Status)))
}

// cancelledLocked returns the attempt (run, item, attempt, worker,
// credential) if it was ended by a replacement, a cancel request or (an
// item's) its run's decision and its worker has not reported yet.
func (pt *partition) cancelledLocked(runID string, item *int, attempt int, worker, credential string) (cancelledAttempt, bool) {
	c, ok := pt.cancelled[keyOf(runID, item)]
	return c, ok && c.attempt == attempt && c.worker == worker && c.credential == credential
}

// forgetStoppedLocked forgets the attempts told to stop whose grace
// passed at now: their workers did not report within a run lease, and
// are treated as lost.
func (pt *partition) forgetStoppedLocked(now time.Time) {
	for k, c := range pt.cancelled {
		if now.After(c.until) {
			delete(pt.cancelled, k)
			pt.d.cfg.Metrics.attemptLost()
			pt.lg.Warn("worker of an attempt told to stop did not report within a run lease; treating it as lost, its reports refused as stale",
				zap.String("run_id", k.run), itemField(k.item), zap.Int("attempt", c.attempt), zap.String("worker", c.worker))
		}
	}
}

// unsureLocked reports whether a take-back of an attempt of run runID (of
// any of its chains) has an unknown outcome: the attempt may be recorded.
func (pt *partition) unsureLocked(runID string) bool {
	for k, u := range pt.takeBacks {
		if k.run == runID && u.unsure {
			return true
		}
	}
	return false
}
