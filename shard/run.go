package shard

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/jobfleet/jobfleet/api"

	"go.uber.org/zap"

	"github.com/jobfleet/jobfleet/internal/retry"
	"github.com/jobfleet/jobfleet/membership"
)

// slot is one owned partition.
type slot struct {
	own    *Ownership
	cancel context.CancelFunc
	done   chan struct{} // closed when Work returns
}

// run is the state of one Run call. Only the loop goroutine touches it,
// except poke, which Work goroutines signal.
type run struct {
	c *Controller
	s *membership.Session

	ring          *Ring
	assigner      *Assigner // computes ring from successive views; nil before the first
	viewRev       int64
	targets       map[int]bool
	slots         map[int]*slot     // owned partitions
	pendingDelete map[int]int64     // released partitions whose owner key still needs deleting, with epoch
	deletedRev    int64             // the revision of the last owner key deletion this member made
	targetedAt    map[int]time.Time // when each target not yet owned was first assigned
	draining      bool              // releasing everything; acquiring nothing
	wg            sync.WaitGroup    // Work goroutines
	poke          chan struct{}     // buffer 1: a Work returned or was fenced
}

// loop is the controller's single decision loop. Partition state moves
//
//	released --(ring assigns it, owner key absent: create key)--> owned
//	owned --(ring moves it / shutdown: cancel Work, wait)--> releasing
//	releasing --(delete key fenced on epoch)--> released
//	owned --(key gone or epoch changed / session ends)--> released (no delete)
//
// and only here, so the transitions never race each other.
func (r *run) loop(ctx context.Context) error {
	c := r.c
	clock := c.cfg.Clock
	view, viewChanged := c.members.View()
	r.recompute(view)
	_, _, ownersChanged := c.owners.Table(c.cfg.Ring.Partitions)

	debounce := clock.NewTimer(time.Hour)
	debounce.Stop()
	var debounceArmed bool
	var firstChange time.Time
	retryTimer := clock.NewTimer(time.Hour)
	retryTimer.Stop()
	bo := retry.New(retry.Watch)

	defer debounce.Stop()
	defer retryTimer.Stop()

	for {
		if r.reconcile(ctx) {
			retryTimer.Reset(bo.Next())
		} else {
			bo.Reset()
		}
		r.publish(debounceArmed)

		select {
		case <-ctx.Done():
			return r.shutdown()
		case <-r.s.Done():
			return r.sessionLost()
		case <-viewChanged:
			view, viewChanged = c.members.View()
			now := clock.Now()
			if !debounceArmed {
				debounceArmed, firstChange = true, now
			}
			wait := min(c.cfg.RebalanceDelay, c.cfg.MaxRebalanceDelay-now.Sub(firstChange))
			debounce.Reset(max(wait, 0))
		case <-debounce.Chan():
			debounceArmed = false
			r.recompute(view)
		case <-ownersChanged:
			_, _, ownersChanged = c.owners.Table(c.cfg.Ring.Partitions)
		case <-r.poke:
		case <-retryTimer.Chan():
		}
	}
}

// recompute rebuilds the ring from view, with the ring version every
// member of the view computes (EffectiveRingConfig).
func (r *run) recompute(view api.View) {
	versions := make([]int, len(view.Members))
	for i, m := range view.Members {
		versions[i] = m.Ring
	}
	cfg := EffectiveRingConfig(r.c.cfg.Ring, versions)
	if r.assigner == nil || r.assigner.Config() != cfg {
		a, err := NewAssigner(cfg)
		if err != nil { // the config was validated; cannot happen
			r.c.lg.Error("ring computation failed", zap.Error(err))
			return
		}
		r.assigner = a
	}
	ring, err := r.assigner.Ring(view.IDs())
	if err != nil {
		r.c.lg.Error("ring computation failed", zap.Error(err))
		return
	}
	moved := 0
	if r.ring != nil {
		moved = Moved(r.ring, ring)
	}
	r.ring, r.viewRev = ring, view.Revision
	targets := ring.Targets(r.c.cfg.MemberID)
	r.targets = make(map[int]bool, len(targets))
	now := r.c.cfg.Clock.Now()
	for _, p := range targets {
		r.targets[p] = true
		if _, ok := r.targetedAt[p]; !ok {
			r.targetedAt[p] = now
		}
	}
	for p := range r.targetedAt {
		if !r.targets[p] {
			delete(r.targetedAt, p)
		}
	}
	r.c.cfg.Metrics.rebalanced()
	r.c.lg.Info("ring recomputed",
		zap.Int64("view_revision", view.Revision), zap.Strings("members", ring.Members()),
		zap.Int("ring_version", cfg.version()), zap.Int("targets", len(targets)), zap.Int("moved", moved))
}

// reconcile moves every partition one step towards the ring's assignment.
// It returns true if an etcd request failed and it should run again after a
// back-off.
func (r *run) reconcile(ctx context.Context) (retry bool) {
	c := r.c
	p := c.cfg.Ring.Partitions
	table, rev, _ := c.owners.Table(p)

	// Owned partitions whose key is gone or re-created: ownership was
	// lost (deleted by hand, lease revoked). Stop without deleting.
	var lost []int
	for part, sl := range r.slots {
		if rev >= sl.own.Epoch && table[part].Epoch != sl.own.Epoch {
			lost = append(lost, part)
		}
	}
	if len(lost) > 0 {
		slices.Sort(lost)
		c.lg.Warn("partition ownership lost", zap.Ints("partitions", lost))
		r.stop(lost, "lost", false)
	}

	// Release what the ring moved away, and partitions whose Work
	// returned on its own.
	var moved, exited []int
	for part, sl := range r.slots {
		switch {
		case r.draining || !r.targets[part]:
			moved = append(moved, part)
		case isClosed(sl.done):
			exited = append(exited, part)
		}
	}
	if len(exited) > 0 {
		slices.Sort(exited)
		c.lg.Warn("partition work returned while owned; releasing", zap.Ints("partitions", exited))
		r.stop(exited, "work_exited", true)
		retry = true // re-acquire after a back-off, not in a tight loop
	}
	if len(moved) > 0 {
		reason := "rebalance"
		if r.draining {
			reason = "shutdown"
		}
		r.stop(moved, reason, true)
	}
	// Keys of our current lease for partitions we neither own nor are
	// deleting, which the ring does not give us: an acquire that timed out
	// but committed after the ring moved the partition away. Nobody else
	// may delete them before our lease ends, so the partition would have
	// an owner that does not run it; delete them (under their epoch, as a
	// release does).
	// A table older than our last deletion may still show keys we
	// released: only a table that saw it is looked at.
	if lease := int64(r.s.Lease()); lease != 0 && rev >= r.deletedRev {
		var stray []int
		for part, o := range table {
			if o.Member != c.cfg.MemberID || o.Lease != lease || r.slots[part] != nil || (r.targets[part] && !r.draining) {
				continue
			}
			if _, pending := r.pendingDelete[part]; !pending {
				r.pendingDelete[part] = o.Epoch
				stray = append(stray, part)
			}
		}
		if len(stray) > 0 {
			c.lg.Warn("owner keys of this member's lease for partitions it does not run; deleting them", zap.Ints("partitions", stray))
		}
	}
	if err := r.deletePending(ctx); err != nil {
		c.lg.Warn("releasing owner keys failed; will retry", zap.Error(err))
		retry = true
	}

	if r.draining || ctx.Err() != nil || r.s.Ctx().Err() != nil {
		return retry
	}
	// Acquire targets whose owner key is absent. Keys held by others are
	// waited for through the owners watch, not polled.
	var free []int
	for _, part := range r.sortedTargets() {
		if r.slots[part] != nil {
			continue
		}
		if _, pending := r.pendingDelete[part]; pending {
			continue
		}
		o := table[part]
		switch {
		case o.Member == "":
			free = append(free, part)
		case o.Member == c.cfg.MemberID && o.Lease == int64(r.s.Lease()):
			// Our own key whose creation we did not see succeed (a
			// timed-out request that committed): adopt it.
			r.start(part, o.Epoch, o.Revision)
			c.lg.Info("partition acquired", zap.Int("partition", part), zap.Int64("epoch", o.Epoch), zap.String("how", "adopted"))
		}
	}
	if len(free) > 0 {
		if err := r.acquire(ctx, free); err != nil {
			c.lg.Warn("acquiring partitions failed; will retry", zap.Error(err))
			retry = true
		}
	}
	return retry
}

func (r *run) sortedTargets() []int {
	return slices.Sorted(maps.Keys(r.targets))
}

// publish records the status for readers.
func (r *run) publish(rebalancing bool) {
	owned := make(map[int]int64, len(r.slots))
	for part, sl := range r.slots {
		owned[part] = sl.own.Epoch
	}
	st := Status{Running: true, Ring: r.ring, ViewRevision: r.viewRev, Owned: owned}
	inRing := slices.Contains(r.ring.Members(), r.c.cfg.MemberID)
	missing, extra := 0, 0
	for part := range r.targets {
		if r.slots[part] == nil {
			missing++
		}
	}
	for part := range r.slots {
		if !r.targets[part] {
			extra++
		}
	}
	switch {
	case r.draining:
		st.Reason = "draining"
	case !inRing:
		st.Reason = "not in the ring (registration not yet seen, or standing by)"
	case rebalancing:
		st.Reason = "membership changed; rebalance pending"
	case extra > 0:
		st.Reason = fmt.Sprintf("releasing %d partitions", extra)
	case missing > 0:
		st.Reason = fmt.Sprintf("acquiring %d of %d partitions", missing, len(r.targets))
	case len(r.pendingDelete) > 0:
		st.Reason = fmt.Sprintf("releasing %d owner keys", len(r.pendingDelete))
	default:
		st.Ready = true
	}
	r.c.cfg.Metrics.setOwned(len(owned), len(r.targets))
	r.c.setStatus(st)
}

func isClosed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

func errString(err error) string {
	if err == nil {
		return "closed"
	}
	return err.Error()
}
