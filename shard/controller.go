package shard

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"sync"
	"time"

	"github.com/jobfleet/jobfleet/api"

	"github.com/jonboulle/clockwork"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

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
	View() (api.View, <-chan struct{})
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
