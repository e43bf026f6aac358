package shard

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/jonboulle/clockwork"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/jobfleet/jobfleet/internal/retry"
	"github.com/jobfleet/jobfleet/membership"
)

// Work runs the work of one owned partition. The controller calls it in a
// goroutine of its own when the partition is acquired. ctx is cancelled when
// ownership ends for any reason: rebalance, shutdown, the session's lease
// lost or not renewed in time (self-fencing), a fenced transaction refused,
// the owner key deleted behind the controller's back. Work must return soon
// after that; the owner key is deleted only after it returned (or
// Config.ReleaseTimeout passed), so the next owner starts after this one
// stopped. Every write Work makes must go through o.Commit.
//
// If Work returns while ownership still holds, the partition is released
// and, if the ring still assigns it here, acquired again with a new epoch.
type Work func(ctx context.Context, o *Ownership)

// MemberView supplies the member view the ring is computed from;
// *membership.Watcher implements it.
type MemberView interface {
	// View returns the current view and a channel closed when it changes.
	View() (membership.View, <-chan struct{})
}

// Config configures a Controller. Start from DefaultConfig.
type Config struct {
	// Namespace is the etcd key prefix of the cluster, ending in "/".
	Namespace string
	// MemberID is this member's ID.
	MemberID string
	// Ring configures the assignment; Ring.Partitions must be the
	// cluster's partition count (see EnsurePartitions).
	Ring RingConfig
	// RebalanceDelay is how long the member set must stay unchanged before
	// the ring is recomputed, so a burst of joins and leaves (a rolling
	// restart) causes one rebalance. Default 200ms.
	RebalanceDelay time.Duration
	// MaxRebalanceDelay caps the wait under continuous churn. Default 2s.
	MaxRebalanceDelay time.Duration
	// ReleaseTimeout bounds the wait for a released partition's Work to
	// return before its owner key is deleted anyway (its writes are fenced
	// either way). Default 5s.
	ReleaseTimeout time.Duration
	// RequestTimeout bounds each etcd request. Default 2s.
	RequestTimeout time.Duration
	// AcquireBatch is how many owner keys one acquisition transaction may
	// create; etcd allows 128 operations per transaction by default.
	// Default 64.
	AcquireBatch int
	// Clock drives the debounce and retry timers; nil means the real clock.
	Clock clockwork.Clock
	// Logger receives ownership events; nil means no logs.
	Logger *zap.Logger
	// Metrics records ownership metrics; nil records nothing.
	Metrics *Metrics
}

// DefaultConfig returns the defaults for member id in namespace ns with p
// partitions.
func DefaultConfig(ns, id string, p int) Config {
	return Config{
		Namespace:         ns,
		MemberID:          id,
		Ring:              DefaultRingConfig(p),
		RebalanceDelay:    200 * time.Millisecond,
		MaxRebalanceDelay: 2 * time.Second,
		ReleaseTimeout:    5 * time.Second,
		RequestTimeout:    2 * time.Second,
		AcquireBatch:      64,
	}
}

// Validate checks the configuration.
func (c Config) Validate() error {
	if err := c.Ring.Validate(); err != nil {
		return err
	}
	switch {
	case c.Namespace == "" || c.Namespace[len(c.Namespace)-1] != '/':
		return fmt.Errorf("%w: namespace %q must be non-empty and end in '/'", ErrInvalidConfig, c.Namespace)
	case c.MemberID == "":
		return fmt.Errorf("%w: empty member ID", ErrInvalidConfig)
	case c.RebalanceDelay < 0 || c.MaxRebalanceDelay < c.RebalanceDelay:
		return fmt.Errorf("%w: rebalance delay %v must be ≥ 0 and ≤ max rebalance delay %v", ErrInvalidConfig, c.RebalanceDelay, c.MaxRebalanceDelay)
	case c.ReleaseTimeout <= 0 || c.RequestTimeout <= 0:
		return fmt.Errorf("%w: release timeout and request timeout must be positive", ErrInvalidConfig)
	case c.AcquireBatch < 1 || c.AcquireBatch > 128:
		return fmt.Errorf("%w: acquire batch %d outside 1..128", ErrInvalidConfig, c.AcquireBatch)
	}
	return nil
}

// Status is a controller's state, for readiness checks and the API.
type Status struct {
	// Running is true while Run is active with a live session.
	Running bool
	// Ring is the assignment the controller works towards; nil before the
	// first computation.
	Ring *Ring
	// ViewRevision is the revision of the member view the ring came from.
	ViewRevision int64
	// Owned maps each owned partition to its epoch.
	Owned map[int]int64
	// Ready is true when this member is in the ring, owns every partition
	// the ring assigns it, owns nothing else and has no pending release.
	Ready bool
	// Reason says why Ready is false.
	Reason string
}

// Controller acquires the partitions the ring assigns to this member and
// releases the others, running Work for each owned partition. Create it with
// NewController; call Run once per session. Its methods are safe for
// concurrent use; only one Run may be active at a time.
//
// Invariants it keeps (see docs/ownership.md):
//   - an owner key is created only if absent (create revision 0) and bound
//     to the session's lease, so no two members own a partition at once;
//   - Work for a partition starts only after its key is created, and the
//     key is deleted only after Work returned or ReleaseTimeout passed;
//   - all Work runs under the session's context, so it is cancelled when
//     the lease cannot be renewed, before the server can expire it.
type Controller struct {
	client  *clientv3.Client
	members MemberView
	owners  *Owners
	work    Work
	cfg     Config
	lg      *zap.Logger

	mu      sync.Mutex // guards status and active
	status  Status
	active  bool
	changed chan struct{} // closed and replaced when status changes
}

// NewController returns a controller. owners must watch the same
// namespace. It validates cfg and starts nothing.
func NewController(client *clientv3.Client, members MemberView, owners *Owners, work Work, cfg Config) (*Controller, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if client == nil || members == nil || owners == nil || work == nil {
		return nil, fmt.Errorf("%w: client, members, owners and work are required", ErrInvalidConfig)
	}
	if cfg.Clock == nil {
		cfg.Clock = clockwork.NewRealClock()
	}
	if cfg.Logger == nil {
		cfg.Logger = zap.NewNop()
	}
	return &Controller{
		client:  client,
		members: members,
		owners:  owners,
		work:    work,
		cfg:     cfg,
		lg:      cfg.Logger.With(zap.String("member", cfg.MemberID)),
		status:  Status{Reason: "not started", Owned: map[int]int64{}},
		changed: make(chan struct{}),
	}, nil
}

// Status returns the current status and a channel closed when it changes.
func (c *Controller) Status() (Status, <-chan struct{}) {
	c.mu.Lock()
	defer c.mu.Unlock()
	s := c.status
	s.Owned = maps.Clone(s.Owned)
	return s, c.changed
}

// WaitFor blocks until cond holds for the status, or ctx ends.
func (c *Controller) WaitFor(ctx context.Context, cond func(Status) bool) (Status, error) {
	for {
		s, ch := c.Status()
		if cond(s) {
			return s, nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return s, ctx.Err()
		}
	}
}

func (c *Controller) setStatus(s Status) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.status = s
	close(c.changed)
	c.changed = make(chan struct{})
}

// Run owns partitions under session s until ctx is cancelled or s ends.
//
// When ctx is cancelled it hands every partition over: stops its Work,
// deletes its owner key (fenced on the epoch) and returns nil. Deregister
// the member first, so that the others already target those partitions and
// the ownership gap is one watch notification.
//
// When the session ends it returns the session's error once every Work
// has returned; owner keys are left to the lease (Session.Close revokes
// it). The caller may then start a new session and call Run again.
func (c *Controller) Run(ctx context.Context, s *membership.Session) error {
	c.mu.Lock()
	if c.active {
		c.mu.Unlock()
		return errors.New("shard: controller already running")
	}
	c.active = true
	c.mu.Unlock()
	defer func() {
		c.mu.Lock()
		c.active = false
		c.mu.Unlock()
	}()

	r := &run{
		c:             c,
		s:             s,
		slots:         map[int]*slot{},
		pendingDelete: map[int]int64{},
		targetedAt:    map[int]time.Time{},
		poke:          make(chan struct{}, 1),
	}
	return r.loop(ctx)
}

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
	viewRev       int64
	targets       map[int]bool
	slots         map[int]*slot     // owned partitions
	pendingDelete map[int]int64     // released partitions whose owner key still needs deleting, with epoch
	targetedAt    map[int]time.Time // when each target not yet owned was first assigned
	draining      bool              // releasing everything; acquiring nothing
	wg            sync.WaitGroup    // Work goroutines
	poke          chan struct{}     // buffer 1: a Work returned or was fenced
	lastTable     []OwnerInfo       // owner table at the last reconcile
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

// recompute rebuilds the ring from view.
func (r *run) recompute(view membership.View) {
	ring, err := NewRing(view.IDs(), r.c.cfg.Ring)
	if err != nil { // the config was validated; cannot happen
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
		zap.Int("targets", len(targets)), zap.Int("moved", moved))
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
			r.start(part, o.Epoch)
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

// acquire creates the owner keys of free partitions, in batches of
// AcquireBatch keys per transaction; when a batch loses a race it falls
// back to one transaction per key.
func (r *run) acquire(ctx context.Context, free []int) error {
	c := r.c
	for chunk := range slices.Chunk(free, c.cfg.AcquireBatch) {
		cmps := make([]clientv3.Cmp, len(chunk))
		puts := make([]clientv3.Op, len(chunk))
		for i, part := range chunk {
			key := OwnerKey(c.cfg.Namespace, part)
			cmps[i] = clientv3.Compare(clientv3.CreateRevision(key), "=", 0)
			puts[i] = clientv3.OpPut(key, c.cfg.MemberID, clientv3.WithLease(r.s.Lease()))
		}
		resp, err := r.txn(ctx, cmps, puts)
		if err != nil {
			return err
		}
		if resp.Succeeded {
			for _, part := range chunk {
				r.start(part, resp.Header.Revision)
			}
			c.lg.Info("partitions acquired", zap.Ints("partitions", chunk), zap.Int64("epoch", resp.Header.Revision))
			continue
		}
		// The batch lost a race for some key: one transaction per key,
		// one log line for what was won.
		var won []int
		var epochs []int64
		for i, part := range chunk {
			resp, err := r.txn(ctx, cmps[i:i+1], puts[i:i+1])
			if err != nil {
				return err
			}
			if resp.Succeeded {
				r.start(part, resp.Header.Revision)
				won, epochs = append(won, part), append(epochs, resp.Header.Revision)
			}
		}
		if len(won) > 0 {
			c.lg.Info("partitions acquired", zap.Ints("partitions", won), zap.Int64s("epochs", epochs))
		}
	}
	return nil
}

func (r *run) txn(ctx context.Context, cmps []clientv3.Cmp, ops []clientv3.Op) (*clientv3.TxnResponse, error) {
	ctx, cancel := context.WithTimeout(ctx, r.c.cfg.RequestTimeout)
	defer cancel()
	defer context.AfterFunc(r.s.Ctx(), cancel)()
	return r.c.client.Txn(ctx).If(cmps...).Then(ops...).Commit()
}

// start begins Work for a newly owned partition under the session's
// context.
func (r *run) start(part int, epoch int64) {
	c := r.c
	wctx, cancel := context.WithCancel(r.s.Ctx())
	own := &Ownership{
		Partition: part,
		Epoch:     epoch,
		Key:       OwnerKey(c.cfg.Namespace, part),
		Member:    c.cfg.MemberID,
		kv:        c.client,
		metrics:   c.cfg.Metrics,
	}
	own.fenced = func(o *Ownership) {
		c.lg.Warn("fenced write refused; stopping partition", zap.Int("partition", o.Partition), zap.Int64("epoch", o.Epoch))
		cancel()
		r.signal()
	}
	sl := &slot{own: own, cancel: cancel, done: make(chan struct{})}
	r.slots[part] = sl
	if t, ok := r.targetedAt[part]; ok {
		c.cfg.Metrics.acquired(c.cfg.Clock.Since(t).Seconds())
		delete(r.targetedAt, part)
	}
	r.wg.Add(1)
	go func() {
		defer r.wg.Done()
		defer r.signal()
		defer close(sl.done)
		c.work(wctx, own)
	}()
}

func (r *run) signal() {
	select {
	case r.poke <- struct{}{}:
	default:
	}
}

// stop cancels the Work of parts, waits for it to return (bounded by
// ReleaseTimeout in all), and forgets the slots; with deleteKey their owner
// keys are queued for deletion.
func (r *run) stop(parts []int, reason string, deleteKey bool) {
	c := r.c
	start := c.cfg.Clock.Now()
	slices.Sort(parts)
	for _, part := range parts {
		r.slots[part].cancel()
	}
	deadline := c.cfg.Clock.After(c.cfg.ReleaseTimeout)
	epochs := make([]int64, len(parts))
	for i, part := range parts {
		sl := r.slots[part]
		select {
		case <-sl.done:
		case <-deadline:
			c.lg.Error("partition work did not stop within the release timeout; releasing anyway (its writes are fenced)",
				zap.Int("partition", part), zap.Int64("epoch", sl.own.Epoch), zap.Duration("release_timeout", c.cfg.ReleaseTimeout))
		}
		epochs[i] = sl.own.Epoch
		if deleteKey {
			r.pendingDelete[part] = sl.own.Epoch
		}
		delete(r.slots, part)
		c.cfg.Metrics.released(reason, c.cfg.Clock.Since(start).Seconds())
	}
	if !deleteKey {
		return
	}
	c.lg.Info("partitions released", zap.Ints("partitions", parts), zap.Int64s("epochs", epochs), zap.String("reason", reason))
}

// deletePending deletes the owner keys of released partitions, each only if
// it still has the epoch it was owned under.
func (r *run) deletePending(ctx context.Context) error {
	if len(r.pendingDelete) == 0 {
		return nil
	}
	if ctx.Err() != nil || r.s.Ctx().Err() != nil {
		ctx = context.Background() // handing over at shutdown: a fresh, bounded context
	}
	parts := slices.Sorted(maps.Keys(r.pendingDelete))
	for chunk := range slices.Chunk(parts, r.c.cfg.AcquireBatch) {
		cmps := make([]clientv3.Cmp, len(chunk))
		dels := make([]clientv3.Op, len(chunk))
		for i, part := range chunk {
			key := OwnerKey(r.c.cfg.Namespace, part)
			cmps[i] = clientv3.Compare(clientv3.CreateRevision(key), "=", r.pendingDelete[part])
			dels[i] = clientv3.OpDelete(key)
		}
		resp, err := r.txnFresh(ctx, cmps, dels)
		if err != nil {
			return err
		}
		if !resp.Succeeded { // some key already gone or re-created: one by one
			for i := range chunk {
				if _, err := r.txnFresh(ctx, cmps[i:i+1], dels[i:i+1]); err != nil {
					return err
				}
			}
		}
		for _, part := range chunk {
			delete(r.pendingDelete, part)
		}
	}
	return nil
}

// txnFresh is txn without the session bound: deleting our own keys is
// still right after the session ended (the epoch compare keeps it safe).
func (r *run) txnFresh(ctx context.Context, cmps []clientv3.Cmp, ops []clientv3.Op) (*clientv3.TxnResponse, error) {
	ctx, cancel := context.WithTimeout(ctx, r.c.cfg.RequestTimeout)
	defer cancel()
	return r.c.client.Txn(ctx).If(cmps...).Then(ops...).Commit()
}

// shutdown hands every partition over after Run's context was cancelled.
func (r *run) shutdown() error {
	r.draining = true
	r.reconcile(context.Background())
	if len(r.pendingDelete) > 0 {
		r.c.lg.Warn("could not delete some owner keys at shutdown; they go with the lease", zap.Ints("partitions", slices.Sorted(maps.Keys(r.pendingDelete))))
	}
	r.wg.Wait()
	r.c.cfg.Metrics.setOwned(0, 0)
	r.c.setStatus(Status{Reason: "stopped", Owned: map[int]int64{}})
	return nil
}

// sessionLost stops all Work (already cancelled through the session's
// context) and returns the session's error. Keys are left to the lease.
func (r *run) sessionLost() error {
	parts := slices.Sorted(maps.Keys(r.slots))
	if len(parts) > 0 {
		r.c.lg.Warn("session ended; stopped acting as owner", zap.Ints("partitions", parts), zap.Error(r.s.Err()))
		r.stop(parts, "lease_lost", false)
	}
	r.wg.Wait()
	r.c.cfg.Metrics.setOwned(0, 0)
	r.c.setStatus(Status{Reason: "session lost: " + errString(r.s.Err()), Owned: map[int]int64{}})
	err := r.s.Err()
	if err == nil {
		err = membership.ErrSessionClosed
	}
	return err
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
