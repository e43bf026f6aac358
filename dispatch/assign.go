package dispatch

import (
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/jobfleet/jobfleet/api"
)

// pick is a run assign hands out: its write (the run with the new
// attempts), the job's work, and the chains started.
type pick struct {
	ar    *activeRun
	w     runWrite
	work  jobWork
	items []int // the chains started: noItem, or the items
	// limits are the keys with a stored limit the job names: the pick is
	// granted on its own, with their slots (limit_grant.go).
	limits []string
}

// assign hands up to n dispatchable chains (runs, or items of runs) that
// poll p's worker may take (poll.may; an item's pin) and does not pass
// over (passOver: for a rival poll, or a retry going elsewhere) to it,
// recording each attempt with its worker and credential (fenced,
// compare-and-swap) first, the items of a run in one write. Runs of jobs
// naming limit keys start only within the keys' room, each in a write of
// its own that takes their slots (grantLimited). The write runs under the
// partition's context: the poll ending meanwhile does not cut it (the
// caller takes back what it cannot deliver). It is a writer.
func (pt *partition) assign(p *poll, rivals []*poll, n int) (out []AttemptGrant, written int) {
	req := p.req
	worker := req.Worker
	if pt.d.writesRefused() != nil || !pt.mayServe(p) {
		return nil, 0 // etcd is full, or nothing here is for this poll
	}
	pt.wmu.Lock()
	defer pt.wmu.Unlock()
	now := pt.now()
	var picked, limited []pick
	var ops []clientv3.Op
	reserved := map[string]int{} // slots the limited picks take, by key
	pt.mu.Lock()
	if pt.closed {
		pt.mu.Unlock()
		return nil, 0
	}
	bytes, chains := 0, 0
	for _, rid := range pt.byPriorityLocked(now) {
		if chains >= n || bytes >= assignBatchBytes {
			break
		}
		ar := pt.active[rid]
		e := pt.jobs[ar.run.JobID]
		if e == nil {
			continue
		}
		room := n - chains
		keys := pt.boundedKeys(e)
		if keys != nil {
			room = pt.limitRoom(keys, reserved, room, now)
			if room == 0 || pt.outrankedLocked(keys, pt.rankLocked(ar, now), now) {
				pt.wantLocked(p, e, ar, now)
				continue
			}
		}
		var started api.Run
		var items []int
		if len(ar.run.Items) > 0 {
			started, items = pt.startItemsLocked(e, ar, p, rivals, room, now)
		} else if Dispatchable(ar.run, ar.notBefore, now) && p.may(e, ar.run.JobID) && !pt.passOver(p, rivals, e, ar, now) {
			started, items = StartAttempt(ar.run, worker, now), []int{noItem}
			started.Attempts[len(started.Attempts)-1].Credential = req.Credential
		}
		if len(items) == 0 {
			continue
		}
		work, err := e.work.decodeFor(&e.spec)
		if err != nil {
			pt.lg.Error("decoding a job's executor failed; not dispatching its run", zap.String("run_id", rid), zap.Error(err))
			continue
		}
		w, ok := pt.runWriteOp(ar, started)
		if !ok {
			continue
		}
		pk := pick{ar: ar, w: w, work: work, items: items, limits: keys}
		chains += len(items)
		if keys != nil {
			for _, k := range keys {
				reserved[k] += len(items)
			}
			limited = append(limited, pk)
			continue
		}
		picked = append(picked, pk)
		ops = append(ops, w.op)
		bytes += w.size
	}
	pt.mu.Unlock()
	out, written = pt.recordPicks(p, picked, ops, bytes, now)
	for _, pk := range limited {
		got, n := pt.grantLimited(p, pk, now)
		out, written = append(out, got...), written+n
	}
	if len(out) > 0 {
		pt.poke() // the loop's timer must cover the new leases
	}
	return out, written
}

// recordPicks writes the attempts of picked (ops, bytes of documents) in
// one fenced transaction and returns their grants. The caller holds wmu
// and not mu.
func (pt *partition) recordPicks(p *poll, picked []pick, ops []clientv3.Op, bytes int, now time.Time) (out []AttemptGrant, written int) {
	if len(picked) == 0 {
		return nil, 0
	}
	worker := p.req.Worker
	resp, err := pt.commit(pt.ctx, ops)
	if err != nil {
		pt.lg.Warn("recording attempts failed", zap.Error(err))
		if unknownOutcome(err) {
			pt.queueUnsure(picked, worker)
		}
		return nil, bytes // the write may have applied
	}
	var lost []api.Run
	defer func() { pt.readopt(pt.ctx, lost) }() // after mu is released
	pt.mu.Lock()
	defer pt.mu.Unlock()
	for i, pk := range picked {
		ar := pk.ar
		if !resp.Responses[i].GetResponseTxn().Succeeded {
			pt.dropActiveLocked(ar.run.ID)
			lost = append(lost, ar.run)
			continue
		}
		pt.updatedLocked(ar, pk.w, resp.Header.Revision, ar.notBefore)
		written += pk.w.size
		out = append(out, pt.grantsLocked(p, pk, now)...)
	}
	return out, written
}

// queueUnsure queues the take-back of picked's attempts, whose write's
// outcome is unknown: they may be recorded all the same, for a worker
// that gets none of them. The caller holds wmu and not mu.
func (pt *partition) queueUnsure(picked []pick, worker string) {
	pt.mu.Lock()
	for _, pk := range picked {
		for _, i := range pk.items {
			c, _ := chainOf(pk.w.run, i, nil)
			pt.takeBacks[chainKey{run: pk.ar.run.ID, item: i}] = undelivered{attempt: len(c.attempts), worker: worker, unsure: true}
		}
	}
	pt.mu.Unlock()
	pt.poke()
}

// grantsLocked returns the grants of pick pk, recorded, to poll p's
// worker, starting the chains' leases. The caller holds mu.
func (pt *partition) grantsLocked(p *poll, pk pick, now time.Time) []AttemptGrant {
	req := p.req
	ar := pk.ar
	e := pt.jobs[ar.run.JobID]
	payload := pk.work.Payload
	if ar.run.Payload != nil {
		payload = ar.run.Payload // a trigger's
	}
	var out []AttemptGrant
	for _, item := range pk.items {
		c, _ := ar.chain(item)
		c.rt.leaseUntil = now.Add(pt.d.cfg.RunLease)
		// A take-back still queued for the chain names an attempt this
		// grant replaces; it would match this one when it has the same
		// number and worker (a take-back reuses the number) and take back
		// an attempt that is delivered: it would run twice.
		delete(pt.takeBacks, chainKey{run: ar.run.ID, item: item})
		g := AttemptGrant{
			RunID:       ar.run.ID,
			JobID:       ar.run.JobID,
			Attempt:     len(c.attempts),
			ScheduledAt: ar.run.ScheduledAt,
			Executor:    pk.work.Executor,
			Payload:     payload,
			RunLease:    api.Duration(pt.d.cfg.RunLease),
			Owner:       pt.own.Member,
			OwnerAddr:   pt.d.cfg.MemberAddr,
			Limits:      pk.limits,
		}
		if e != nil {
			g.Timeout = e.spec.Timeout
		}
		if item != noItem {
			g.Item = &api.ItemGrant{Index: item, Count: len(ar.run.Items)}
			if item < len(pk.work.Params) {
				g.Item.Param = pk.work.Params[item]
			}
		}
		if len(ar.run.Steps) > 0 && e != nil {
			grantStep(&g, e, pk.work, &ar.run, item)
		}
		g.TraceParent = traceGrant(&ar.run, &g, req.Worker)
		out = append(out, g)
		pt.d.cfg.Metrics.attemptStarted()
		pt.lg.Info("attempt started", zap.String("job_id", ar.run.JobID), zap.String("run_id", ar.run.ID), itemField(item),
			zap.Int("attempt", g.Attempt), zap.String("worker", req.Worker), zap.String("credential", req.Credential),
			zap.Strings("limits", pk.limits))
	}
	return out
}

// assignBatchBytes bounds the run documents one poll writes in one
// transaction, well under etcd's request limit.
const assignBatchBytes = 512 << 10
