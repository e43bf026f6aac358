package dispatch

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/jobfleet/jobfleet/api"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/jobfleet/jobfleet/internal/retry"
	"github.com/jobfleet/jobfleet/shard"
)

// spaceRecheck is how often a partition looks at the space gate again
// while etcd refuses writes for lack of space.
const spaceRecheck = time.Second

// calendarsRecheck is how soon a partition plans again a due job that
// excludes calendars the member has not read yet (it just started).
const calendarsRecheck = 100 * time.Millisecond

// partition is the scheduler of one owned partition. The loop goroutine
// (run) loads the partition, follows its specs, fires due jobs and expires
// leases; protocol handlers (assign, heartbeat, complete, takeBack) run in
// HTTP goroutines.
//
// Two locks, always taken in this order:
//
//   - wmu, the writer lock, serialises the partition's writes to etcd. A
//     writer holds it from deciding a write, through the round trip, to
//     applying the result in memory, so writes apply in the order they
//     were decided and the state a write was planned from changes under it
//     only in the fields readers may touch (activeRun.leaseUntil). The
//     loop's fires, expiries, trims and spec changes, and the protocol's
//     assign, complete and takeBack are writers.
//   - mu, the state lock, guards the fields below it. It is held only for
//     short sections without I/O, never across an etcd request, so readers
//     (heartbeats, metrics) never wait for etcd.
//
// Helpers named …Locked need mu held; helpers that write to etcd need wmu
// held and take mu themselves around their reads and updates of memory.
type partition struct {
	d     *Dispatcher
	own   *shard.Ownership
	p     int
	lg    *zap.Logger
	nudge chan struct{} // buffer 1: re-evaluate now
	// ctx is the partition's work context, cancelled when its ownership
	// ends. Writes made for a protocol request (an attempt handed out, a
	// result, a take-back) run under it, not under the request's context:
	// a worker that goes away mid-request must not cut a write whose
	// outcome the partition then would not know.
	ctx context.Context
	// loaded is set once a load of this ownership succeeded: later loads
	// (after the spec watch ended) read etcd, not a standby copy (see
	// load). Only the partition's run goroutine uses it.
	loaded bool

	wmu sync.Mutex // writer lock, see above; guards failed and retryAt
	// failed is set when a write of this tick failed; retryAt is when the
	// loop fires again after a failed write.
	failed  bool
	retryAt time.Time
	// queueAt is when the partition may next publish its runs waiting
	// for limit keys (limit_queue.go); guarded by wmu.
	queueAt time.Time

	mu       sync.Mutex            // state lock, see above; guards the fields below
	jobs     map[string]*jobEntry  // by job ID
	active   map[string]*activeRun // runs not final, by run ID
	triggers map[string]triggerReq // trigger requests not yet fired, by key
	cancels  map[string]cancelReq  // cancel requests not yet applied, by key (cancel.go)
	retries  map[string]retryReq   // retry requests not yet applied, by key (steps_retry.go)
	// backfills are the running backfills, by job ID (backfill.go);
	// backfillWake is when the backfill rate allows the next run, zero
	// if nothing waits for it.
	backfills    map[string]*backfillJob
	backfillWake time.Time
	closed       bool // ownership ended; handlers answer not-owner
	// cancelled are attempts ended by a replacement, a cancel request or
	// (for items) their run's decision whose workers have not reported
	// yet: their heartbeats answer Cancel. By chain; dropped once the
	// worker reports, or a run lease after (cancelLocked).
	cancelled map[chainKey]cancelledAttempt
	// takeBacks are attempts recorded for polls that ended before the
	// worker got them, by chain: the loop writes the runs back without
	// them (fenced), retrying until done or moot.
	takeBacks map[chainKey]undelivered
	// reports are results waiting for the writer lock, in arrival order:
	// the first to get it records them all, as far as one write has room
	// (results.go).
	reports []*report
	// visits are polls waiting to be handed runs here, in arrival order;
	// serving is set while one of them serves them (assign.go).
	visits  []*visit
	serving bool
	// unread are runs whose compare-and-swap write did not apply and whose
	// reading again failed, by run ID: out of memory until the loop has
	// read them (readopt), retrying at every tick.
	unread map[string]api.Run
	// calendarsAwaited is set when a job that excludes calendars was due
	// before the member had read them: the loop looks again shortly.
	calendarsAwaited bool
	hist             *history  // the partition's stored runs
	idx              *jobIndex // what the loop looks at; see jobIndex

	// notes delivers the partition's notifications; nil without a
	// Notifier (notify.go). outboxRead is set once the outbox was read
	// into it; wmu guards it.
	notes      outbox
	outboxRead bool

	// heldLost are the slots of limit keys held by attempts not running
	// in memory, by holder key, with when this owner first saw them so;
	// heldEnded the attempts whose workers reported them without a write
	// of their result. mu guards both (limit_release.go).
	heldLost  map[string]time.Time
	heldEnded map[chainAttempt]bool
}

// cancelledAttempt is a running attempt whose run was replaced or
// cancelled, or (an item's) whose run was decided without it.
type cancelledAttempt struct {
	attempt    int
	worker     string
	credential string // that took the attempt: only it may report it
	// status is answered to the worker's report (dead, or cancelled),
	// runStatus too for an item's (the run's status).
	status, runStatus api.RunStatus
	until             time.Time // forgotten after: the worker is treated as lost
}

// activeRun is a run that is not final, as its owner holds it: the
// stored document and what memory keeps of its attempt chains (chains.go):
// the run's own (embedded), or each item's.
type activeRun struct {
	run    api.Run
	modRev int64 // the run key's mod revision, for compare-and-swap
	size   int   // bytes of the stored document
	chainRT
	items []chainRT // a run of items: each item's, by index (itemRT)
	// wantedAt is when a poll last could have taken the run but for a
	// limit key's room (limit_queue.go).
	wantedAt time.Time
}

func (pt *partition) now() time.Time { return pt.d.cfg.Clock.Now() }

// run loads the partition and schedules it until ctx is cancelled.
func (pt *partition) run(ctx context.Context) {
	bo := retry.New(retry.Etcd)
	for ctx.Err() == nil {
		pt.d.loads.pending.add(1)
		rev, err := pt.loadInTurn(ctx)
		pt.d.loads.pending.add(-1)
		if ctx.Err() != nil {
			break // released while waiting or loading
		}
		if err != nil {
			pt.lg.Warn("loading partition failed; retrying", zap.Error(err))
			retry.Sleep(ctx, pt.d.cfg.Clock, bo.Next())
			continue
		}
		bo.Reset()
		pt.d.register(pt)
		err = pt.schedule(ctx, rev)
		if ctx.Err() == nil {
			pt.lg.Info("spec watch ended; reloading partition", zap.Error(err))
		}
	}
	pt.mu.Lock()
	pt.closed = true
	pt.mu.Unlock()
	pt.d.unregister(pt)
}

// schedule watches the partition's specs from rev and fires due jobs until
// ctx ends or the watch fails (then the caller reloads).
func (pt *partition) schedule(ctx context.Context, rev int64) error {
	wctx, cancel := context.WithCancel(clientv3.WithRequireLeader(ctx))
	defer cancel()
	wch := pt.d.client.Watch(wctx, pt.d.keys.PartitionJobsPrefix(pt.p), clientv3.WithPrefix(), clientv3.WithRev(rev+1))
	clock := pt.d.cfg.Clock
	timer := clock.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		// The timer is stopped while the loop works and set again once it
		// is about to wait: a controlled clock (tests) sees it as a waiter
		// only then.
		timer.Stop()
		next := pt.tick(ctx)
		retry.ArmAt(clock, timer, next)
		select {
		case <-ctx.Done():
			return nil
		case wr, ok := <-wch:
			if !ok {
				return errors.New("watch closed")
			}
			if err := wr.Err(); err != nil {
				return err
			}
			pt.apply(ctx, wr.Events)
		case <-timer.Chan():
		case <-pt.nudge:
		}
	}
}

func (pt *partition) poke() {
	select {
	case pt.nudge <- struct{}{}:
	default:
	}
}

// tick fires every due job, expires lost attempts, wakes pollers when runs
// are dispatchable, and returns when it next has something to do (zero: only
// on an event).
func (pt *partition) tick(ctx context.Context) time.Time {
	pt.wmu.Lock()
	defer pt.wmu.Unlock()
	now := pt.now()
	pt.mu.Lock()
	closed := pt.closed
	pt.mu.Unlock()
	if closed {
		return time.Time{} // fenced: ownership is ending; wait for ctx
	}
	if now.Before(pt.retryAt) {
		return pt.retryAt // a write failed: etcd gets a moment
	}
	if pt.d.writesRefused() != nil {
		return now.Add(spaceRecheck) // etcd is full: the gate logged it; no write would apply
	}
	pt.readOutbox(ctx)
	pt.readoptUnread(ctx)
	pt.takeBackQueued(ctx) // before expiry: an undelivered attempt is not lost
	pt.applyCancels(ctx, now)
	pt.applyRetries(ctx, now)
	pt.expire(ctx, now)
	heldWake := pt.releaseHolders(ctx, now)
	if t := pt.publishQueue(ctx, now); !t.IsZero() && (heldWake.IsZero() || t.Before(heldWake)) {
		heldWake = t
	}
	pt.fireDue(ctx, now)
	pt.markOverdue(ctx, now)
	pt.backfillWake = time.Time{}
	pt.backfill(ctx, now)
	pt.trimHistory(ctx, now)
	pt.deleteFinished(ctx, now)
	if pt.failed {
		pt.failed = false
		pt.retryAt = now.Add(time.Second)
		return pt.retryAt
	}
	pt.mu.Lock()
	awaited := pt.calendarsAwaited
	pt.calendarsAwaited = false
	pt.mu.Unlock()
	if awaited {
		pt.retryAt = now.Add(calendarsRecheck)
		return pt.retryAt
	}

	pt.mu.Lock()
	defer pt.mu.Unlock()
	pt.forgetStoppedLocked(now)
	next, dispatchable := pt.nextEventLocked(now)
	if dispatchable {
		pt.d.wakePollers()
	}
	if !heldWake.IsZero() && (next.IsZero() || heldWake.Before(next)) {
		next = heldWake
	}
	return next
}

// nextEventLocked returns when the loop next has something to do (zero:
// only on an event), and whether a run is dispatchable now.
func (pt *partition) nextEventLocked(now time.Time) (next time.Time, dispatchable bool) {
	earlier := func(t time.Time) {
		if !t.IsZero() && (next.IsZero() || t.Before(next)) {
			next = t
		}
	}
	for _, ar := range pt.active {
		j := pt.jobs[ar.run.JobID]
		full := ar.run.MaxParallel > 0 && ar.run.Count().Running >= ar.run.MaxParallel // no item to hand out
		for _, c := range ar.chains() {
			switch {
			case full && c.status != api.RunRunning:
			case c.status == api.RunRunning:
				earlier(c.rt.leaseUntil)
				if a, ok := c.current(); ok && j != nil {
					earlier(a.StartedAt.Add(j.spec.Timeout.Std() + pt.d.cfg.RunLease))
				}
			case c.status.Final():
			case now.Before(c.rt.notBefore):
				earlier(c.rt.notBefore)
			default:
				dispatchable = true
				if j != nil && c.item == noItem {
					if until := pt.retryElsewhereUntil(j, ar); now.Before(until) {
						earlier(until) // its previous worker may take it then
					}
				}
			}
		}
	}
	if t, ok := pt.idx.fires.min(); ok {
		earlier(t)
	}
	if t, ok := pt.idx.overdue.min(); ok {
		earlier(t)
	}
	for _, c := range pt.cancelled {
		earlier(c.until.Add(time.Millisecond)) // its worker is treated as lost after
	}
	earlier(pt.backfillWake)
	pending := pt.pendingTriggersLocked()
	for id := range pt.idx.finishing {
		if pt.finishedLocked(pt.jobs[id], pending) {
			earlier(now) // to be recorded as finished
			break
		}
	}
	// Finished one-off jobs whose deletion is due now are looked at (one
	// that is kept, e.g. for a pending trigger, does not wake the loop
	// again); those due later wake it when they are due.
	earlier(pt.idx.expiry.due(now, func(id string, due time.Time) {
		if pt.finishedLocked(pt.jobs[id], pending) {
			earlier(due)
		}
	}))
	if t := pt.hist.nextExpiry(); !t.IsZero() {
		earlier(t.Add(time.Millisecond)) // strictly older than the max age
	}
	return next, dispatchable
}

// pendingTriggersLocked returns the jobs with trigger requests not yet
// fired.
func (pt *partition) pendingTriggersLocked() map[string]bool {
	pending := make(map[string]bool, len(pt.triggers))
	for _, t := range pt.triggers {
		pending[t.id] = true
	}
	return pending
}

// stats counts the partition's active runs by state and its stored runs:
// a reader.
func (pt *partition) stats() Stats {
	pt.mu.Lock()
	defer pt.mu.Unlock()
	var st Stats
	for _, ar := range pt.active {
		if ar.run.Status == api.RunRunning {
			st.Running++
		} else {
			st.Waiting++
		}
	}
	if pt.hist != nil {
		st.HistoryRuns, st.HistoryBytes = pt.hist.runs, pt.hist.bytes
	}
	if pt.idx != nil {
		st.Completed = len(pt.idx.completed)
		st.Overdue = len(pt.idx.overdueNow)
	}
	return st
}
