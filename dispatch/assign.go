package dispatch

import (
	"slices"
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

// visit is a poll's visit to a partition waiting to be served: the poll,
// its rivals and how many chains it may take, where its grants go, and
// the signal that it is to serve the visits waiting (both buffer 1: the
// server never waits for the poll).
type visit struct {
	p      *poll
	rivals []*poll
	n      int
	done   chan visitAnswer
	lead   chan struct{}
}

type visitAnswer struct {
	out     []AttemptGrant
	written int
}

// answer answers v; an answer to a visit answered already is dropped.
func (v *visit) answer(out []AttemptGrant, written int) {
	select {
	case v.done <- visitAnswer{out, written}:
	default:
	}
}

// assign hands up to n dispatchable chains (runs, or items of runs) that
// poll p's worker may take (poll.may; an item's pin) and does not pass
// over (passOver: for a rival poll, or a retry going elsewhere) to it,
// recording each attempt with its worker and credential (fenced,
// compare-and-swap) first, the items of a run in one write. Runs of jobs
// naming limit keys start only within the keys' room, each in a write of
// its own that takes their slots (grantLimited). The write runs under the
// partition's context: the poll ending meanwhile does not cut it (the
// caller takes back what it cannot deliver).
//
// The polls visiting the partition are served together: under a herd
// every poll goes to the partition whose runs waited longest
// (byBestWaiting), and one write of each poll's attempts, one after the
// other behind the writer lock, made each poll wait for the round trips
// of all those before it. One visit at a time serves (the first to
// arrive, then the one it hands over to): it takes the writer lock, picks
// the attempts of every visit waiting, in arrival order, records them in
// one fenced transaction (each run its own compare-and-swap, a run in at
// most one visit's picks) and answers each, until its own is answered;
// then it hands over to the first visit still waiting. The others wait
// for their answers without the writer lock, so that an answer is not
// held behind the next writer's round trip. The server is a writer.
func (pt *partition) assign(p *poll, rivals []*poll, n int) (out []AttemptGrant, written int) {
	if pt.d.writesRefused() != nil || !pt.mayServe(p) {
		return nil, 0 // etcd is full, or nothing here is for this poll
	}
	v := &visit{p: p, rivals: rivals, n: n, done: make(chan visitAnswer, 1), lead: make(chan struct{}, 1)}
	pt.mu.Lock()
	pt.visits = append(pt.visits, v)
	lead := !pt.serving
	pt.serving = true
	pt.mu.Unlock()
	if !lead {
		select {
		case a := <-v.done:
			select {
			case <-v.lead:
				// Handed over to, then served by a writer of results
				// (complete) before it took the writer lock: hand on.
				pt.handOver()
			default:
			}
			return a.out, a.written
		case <-v.lead: // v is still waiting, first: serve
		}
	}
	a := pt.serve(v)
	return a.out, a.written
}

// serve serves the waiting visits, v first, until v is answered, then
// hands over (handOver), and returns v's answer. The caller holds
// neither lock.
func (pt *partition) serve(v *visit) visitAnswer {
	defer pt.handOver()
	pt.wmu.Lock()
	defer pt.wmu.Unlock()
	for {
		select {
		case a := <-v.done:
			return a
		default:
		}
		// Each round answers at least the first waiting visit, and v is
		// among those waiting until it is answered.
		pt.mu.Lock()
		batch, reports := pt.visits, pt.reports
		pt.visits, pt.reports = nil, nil
		pt.mu.Unlock()
		pt.serveGuarded(batch, reports)
	}
}

// handOver ends a visit's serving: the first visit still waiting serves
// next, or none does until the next arrives. A visit is handed over to
// while it waits in the queue (unanswered); one taken out of it is
// answered after those left for want of room are put back, so a visit
// waits in the queue only while one serves or is handed over to. The
// caller holds neither lock.
func (pt *partition) handOver() {
	pt.mu.Lock()
	defer pt.mu.Unlock()
	if len(pt.visits) > 0 {
		pt.visits[0].lead <- struct{}{} // buffer 1, sent once: it is waiting
	} else {
		pt.serving = false
	}
}

// serveGuarded is serveVisits, answering every visit of batch, and
// every report it took, not answered yet if it panics (the panic goes
// on): their polls and reporters, which may be other requests'
// goroutines, would otherwise wait for answers that never come.
func (pt *partition) serveGuarded(batch []*visit, reports []*report) {
	defer func() {
		if p := recover(); p != nil {
			for _, v := range batch {
				v.answer(nil, 0)
			}
			for _, r := range reports {
				r.answer(CompleteResponse{}, errReportAgain(r.req.RunID))
			}
			panic(p)
		}
	}()
	pt.serveVisits(batch, reports)
}

// visitPicks are the picks of one visit of a write.
type visitPicks struct {
	v       *visit
	picked  []pick // in the write, in order
	limited []pick // each in a write of its own
}

// grantWrite is a write of attempts being decided.
type grantWrite struct {
	ops   []clientv3.Op
	bytes int // of run documents
	// taken are the runs the write writes (one write of a run key), jobs
	// those whose results it records: none of their runs is granted in it
	// (a job's state is decided from the run before).
	taken, jobs map[string]bool
	reserved    map[string]int // slots the limited picks take, by key
	left        map[*poll]int  // chains passed over for each rival (passOver), or taken by it
}

// serveVisits records the results of reports waiting for the writer
// lock and the attempts of the visits of batch, picked in order, in one
// fenced transaction, as far as it has room (resultBatchRuns and
// resultBatchBytes for the results, then assignBatchBytes and
// maxWriteCost), then the attempts of limited picks each in a write of
// its own, and answers each visit and report; visits and reports left
// out for want of room go back to the front of their queues, unanswered.
// The caller holds wmu and not mu.
func (pt *partition) serveVisits(batch []*visit, reports []*report) {
	var rw resultWrite
	if len(reports) > 0 {
		rw, _ = pt.prepareReports(reports)
	}
	now := pt.now()
	pt.mu.Lock()
	if pt.closed {
		pt.mu.Unlock()
		for _, v := range batch {
			v.answer(nil, 0)
		}
		if len(rw.ops) > 0 {
			pt.recordedReports(rw, nil, 0, pt.notOwned())
		}
		return
	}
	gw := grantWrite{ops: slices.Clip(rw.ops), bytes: opsBytes(rw.ops), taken: map[string]bool{}, jobs: map[string]bool{}, reserved: map[string]int{}, left: map[*poll]int{}}
	for _, ru := range rw.sent {
		gw.taken[ru.u.ar.run.ID], gw.jobs[ru.u.ar.run.JobID] = true, true
	}
	var vps []visitPicks
	ids := pt.byPriorityLocked(now)
	served := 0
	for _, v := range batch {
		if served > 0 && (gw.bytes >= assignBatchBytes || txnCost(0, gw.ops, nil)+2 > maxWriteCost) {
			break // the write is full: the rest wait for the next
		}
		vp := visitPicks{v: v}
		vp.picked, vp.limited = pt.pickLocked(v, ids, &gw, now)
		for _, pk := range slices.Concat(vp.picked, vp.limited) {
			gw.left[v.p] += len(pk.items) // v's room, for the visits after it
		}
		vps = append(vps, vp)
		served++
	}
	pt.mu.Unlock()
	if later := batch[served:]; len(later) > 0 {
		pt.mu.Lock()
		pt.visits = append(slices.Clip(later), pt.visits...)
		pt.mu.Unlock()
	}
	var resp *clientv3.TxnResponse
	var err error
	if len(gw.ops) > 0 {
		resp, err = pt.commit(pt.ctx, gw.ops)
	}
	if len(rw.ops) > 0 {
		pt.recordedReports(rw, resp, 0, err)
	}
	outs, written := pt.recordPicks(vps, resp, len(rw.ops), err, now)
	granted := false
	for i, vp := range vps {
		for _, pk := range vp.limited {
			got, n := pt.grantLimited(vp.v.p, pk, now)
			outs[i], written[i] = append(outs[i], got...), written[i]+n
		}
		granted = granted || len(outs[i]) > 0
	}
	if granted {
		pt.poke() // the loop's timer must cover the new leases
	}
	for i, vp := range vps {
		vp.v.answer(outs[i], written[i])
	}
}

// pickLocked picks up to v.n chains for visit v's poll among the active
// runs ids (in priority order) that write gw may take, adding the writes
// of those without limit keys to gw as far as it has room
// (assignBatchBytes, maxWriteCost). The caller holds mu.
func (pt *partition) pickLocked(v *visit, ids []string, gw *grantWrite, now time.Time) (picked, limited []pick) {
	p, rivals, n := v.p, v.rivals, v.n
	req := p.req
	worker := req.Worker
	chains := 0
	for _, rid := range ids {
		if chains >= n || gw.bytes >= assignBatchBytes {
			break
		}
		ar := pt.active[rid]
		if ar == nil || gw.taken[rid] || gw.jobs[ar.run.JobID] {
			continue // in this write already
		}
		e := pt.jobs[ar.run.JobID]
		if e == nil {
			continue
		}
		room := n - chains
		keys := pt.boundedKeys(e)
		if keys != nil {
			room = pt.limitRoom(keys, gw.reserved, room, now)
			if room == 0 || pt.outrankedLocked(keys, pt.rankLocked(ar, now), now) {
				pt.wantLocked(p, e, ar, now)
				continue
			}
		}
		var started api.Run
		var items []int
		if len(ar.run.Items) > 0 {
			started, items = pt.startItemsLocked(e, ar, p, rivals, gw.left, room, now)
		} else if Dispatchable(ar.run, ar.notBefore, now) && p.may(e, ar.run.JobID) && !pt.passOver(p, rivals, gw.left, 1, e, ar, now) {
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
		if keys == nil && len(gw.ops) > 0 && txnCostAdding(gw.ops, w.op)+1 > maxWriteCost {
			break // the write is full: etcd's limit of operations
		}
		pk := pick{ar: ar, w: w, work: work, items: items, limits: keys}
		chains += len(items)
		gw.taken[rid] = true
		if keys != nil {
			for _, k := range keys {
				gw.reserved[k] += len(items)
			}
			limited = append(limited, pk)
			continue
		}
		picked = append(picked, pk)
		gw.ops = append(gw.ops, w.op)
		gw.bytes += w.size
	}
	return picked, limited
}

// recordPicks applies the answer of the write of the attempts picked for
// the visits of vps (resp's responses from at on, in order, or err) and
// returns each visit's grants and bytes of run documents written. The
// caller holds wmu and not mu.
func (pt *partition) recordPicks(vps []visitPicks, resp *clientv3.TxnResponse, at int, err error, now time.Time) (outs [][]AttemptGrant, written []int) {
	outs, written = make([][]AttemptGrant, len(vps)), make([]int, len(vps))
	if !slices.ContainsFunc(vps, func(vp visitPicks) bool { return len(vp.picked) > 0 }) {
		return outs, written
	}
	if err != nil {
		pt.lg.Warn("recording attempts failed", zap.Int("polls", len(vps)), zap.Error(err))
		for i, vp := range vps {
			if unknownOutcome(err) {
				pt.queueUnsure(vp.picked, vp.v.p.req.Worker)
			}
			for _, pk := range vp.picked {
				written[i] += pk.w.size // the write may have applied
			}
		}
		return outs, written
	}
	var lost []api.Run
	defer func() { pt.readopt(pt.ctx, lost) }() // after mu is released
	pt.mu.Lock()
	defer pt.mu.Unlock()
	k := at
	for i, vp := range vps {
		for _, pk := range vp.picked {
			ar := pk.ar
			ok := resp.Responses[k].GetResponseTxn().Succeeded
			k++
			if !ok {
				pt.dropActiveLocked(ar.run.ID)
				lost = append(lost, ar.run)
				continue
			}
			pt.updatedLocked(ar, pk.w, resp.Header.Revision, ar.notBefore)
			written[i] += pk.w.size
			outs[i] = append(outs[i], pt.grantsLocked(vp.v.p, pk, now)...)
		}
	}
	return outs, written
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
