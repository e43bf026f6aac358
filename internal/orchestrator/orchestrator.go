// Package orchestrator assembles one fleet member: its lease session and
// registration, the member view, the owner table, the shard controller
// and the dead member detector (membership/deathwatch), re-registering
// with a new lease whenever the old one is lost (at once when its own
// registration vanishes: a peer revoked the lease), and leaving the fleet
// gracefully (deregister, hand partitions over, revoke the lease) when
// stopped or drained.
package orchestrator

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/jobfleet/jobfleet/api"
	"github.com/jobfleet/jobfleet/auth"
	"github.com/jobfleet/jobfleet/dispatch"
	"github.com/jobfleet/jobfleet/dispatch/activity"
	"github.com/jobfleet/jobfleet/dispatch/notify"
	"github.com/jobfleet/jobfleet/dispatch/standby"
	"github.com/jobfleet/jobfleet/dispatch/workers"
	"github.com/jobfleet/jobfleet/internal/cursor"
	"github.com/jobfleet/jobfleet/internal/mirror"
	"github.com/jobfleet/jobfleet/internal/retry"
	"github.com/jobfleet/jobfleet/internal/storage"
	"github.com/jobfleet/jobfleet/membership"
	"github.com/jobfleet/jobfleet/membership/deathwatch"
	"github.com/jobfleet/jobfleet/schedule"
	"github.com/jobfleet/jobfleet/shard"
	"github.com/jobfleet/jobfleet/store"
)

// Orchestrator is one fleet member. Create it with New and run it with Run;
// its other methods are safe for concurrent use while it runs.
type Orchestrator struct {
	client   *clientv3.Client
	cfg      Config
	lg       *zap.Logger
	sessCfg  membership.SessionConfig
	shardMet *shard.Metrics

	members   *membership.Watcher
	owners    *shard.Owners
	creds     *auth.Cache
	compactor *storage.Compactor
	space     *storage.Monitor
	workers   *workers.Registry
	deaths    *deathwatch.Detector

	dispMet   *dispatch.Metrics
	activity  *activity.Recorder // the last hour per minute, fed by dispMet
	sbMet     *standby.Metrics
	notifyMet *notify.Metrics

	drainOnce sync.Once
	drain     chan struct{} // closed by Drain

	mu         sync.Mutex    // guards the fields below
	partitions int           // 0 until the cluster's count is known
	cursors    *cursor.Codec // nil until the fleet's cursor key is read
	controller *shard.Controller
	jobs       *store.Etcd
	dispatcher *dispatch.Dispatcher
	notifier   *sender // the notifications' sender, with the dispatcher
	// scheduling: the controller's Work is the dispatcher's, so an owned
	// partition is ready once the dispatcher loaded it.
	scheduling bool
	feed       *partitionFeed
	session    *membership.Session
	registered bool
	startErr   error
	changed    chan struct{} // closed and replaced when a field above changes
}

// New validates cfg (errors wrap ErrInvalidConfig) and returns an
// orchestrator. Zero fields of cfg take DefaultConfig's values. It starts
// nothing.
func New(client *clientv3.Client, cfg Config) (*Orchestrator, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg.setDefaults()
	sc := membership.DefaultSessionConfig(cfg.LeaseTTL)
	sc.Clock = cfg.Clock
	sc.Logger = cfg.Logger.Named("lease").With(zap.String("member", cfg.ID))
	sc.Metrics = membership.NewMetrics(cfg.Registry)
	if err := sc.Validate(); err != nil {
		return nil, err
	}
	members, err := membership.NewWatcher(client, cfg.Namespace, cfg.Logger)
	if err != nil {
		return nil, err
	}
	owners, err := shard.NewOwners(client, cfg.Namespace, mirror.Config{Logger: cfg.Logger.Named("owners")})
	if err != nil {
		return nil, err
	}
	stc := cfg.Storage
	stc.Namespace, stc.Member, stc.Clock, stc.Logger = cfg.Namespace, cfg.ID, cfg.Clock, cfg.Logger
	stc.Metrics = storage.NewMetrics(cfg.Registry)
	compactor, err := storage.NewCompactor(client, stc)
	if err != nil {
		return nil, err
	}
	space, err := storage.NewMonitor(client, stc)
	if err != nil {
		return nil, err
	}
	compactor.CompactOnHistory(space)
	creds, err := auth.NewCache(client, auth.CacheConfig{Namespace: cfg.Namespace, Bootstrap: cfg.AdminSecret, Clock: cfg.Clock, Logger: cfg.Logger.Named("credentials")})
	if err != nil {
		return nil, err
	}
	wc := cfg.workersConfig()
	wc.Logger = cfg.Logger.Named("dispatch")
	wc.Space = space
	wc.Metrics = workers.NewMetrics(cfg.Registry)
	// As the dispatcher's: given up before the session's renew deadline.
	wc.RequestTimeout = min(wc.RequestTimeout, sc.RenewDeadline)
	registry, err := workers.New(client, wc)
	if err != nil {
		return nil, err
	}
	dc := cfg.deadMembersConfig()
	dc.Logger = cfg.Logger.Named("deathwatch")
	dc.Metrics = deathwatch.NewMetrics(cfg.Registry)
	deaths, err := deathwatch.New(client, members, dc)
	if err != nil {
		return nil, err
	}
	dispMet := dispatch.NewMetrics(cfg.Registry)
	rec := activity.New(cfg.Clock)
	dispMet.RecordActivity(rec)
	return &Orchestrator{
		client:    client,
		cfg:       cfg,
		lg:        cfg.Logger.With(zap.String("member", cfg.ID)),
		sessCfg:   sc,
		shardMet:  shard.NewMetrics(cfg.Registry),
		dispMet:   dispMet,
		activity:  rec,
		sbMet:     standby.NewMetrics(cfg.Registry),
		notifyMet: notify.NewMetrics(cfg.Registry),
		members:   members,
		owners:    owners,
		compactor: compactor,
		space:     space,
		workers:   registry,
		deaths:    deaths,
		creds:     creds,
		drain:     make(chan struct{}),
		changed:   make(chan struct{}),
	}, nil
}

// ID returns the member ID.
func (o *Orchestrator) ID() string { return o.cfg.ID }

// Workers returns the member's worker registry, which serves the
// registration routes of the worker protocol; Run keeps its copy of the
// registrations current.
func (o *Orchestrator) Workers() *workers.Registry { return o.workers }

// Credentials returns the member's credential cache, which authenticates
// API requests; Run keeps it current.
func (o *Orchestrator) Credentials() *auth.Cache { return o.creds }

// Drain asks Run to hand every partition over, leave the fleet and return.
// It does not wait; Run's return says it is done.
func (o *Orchestrator) Drain() { o.drainOnce.Do(func() { close(o.drain) }) }

// Run joins the fleet and owns partitions until ctx is cancelled or Drain is
// called; then it leaves gracefully and returns nil. It returns an error only
// for a condition a retry cannot fix, such as shard.ErrPartitionMismatch.
func (o *Orchestrator) Run(ctx context.Context) error {
	// The credentials are followed from the start, so that the API can
	// authenticate while the member joins.
	credCtx, stopCreds := context.WithCancel(context.Background())
	credsDone := make(chan struct{})
	go func() { defer close(credsDone); o.creds.Run(credCtx) }()
	defer func() { stopCreds(); <-credsDone }()

	p, err := o.ensurePartitions(ctx)
	if err != nil {
		o.mu.Lock()
		o.startErr = err
		o.notifyLocked()
		o.mu.Unlock()
		return err
	}
	if p == 0 {
		return nil // stopped before the cluster was reachable
	}
	jobs := store.NewEtcd(o.client, o.cfg.Namespace, p, api.DefaultLimits(), o.cfg.Clock.Now).WithGuard(o.space.Admit)
	dcfg := o.cfg.Dispatch
	dcfg.Namespace, dcfg.Partitions, dcfg.MemberID, dcfg.MemberAddr = o.cfg.Namespace, p, o.cfg.ID, o.cfg.Advertise
	dcfg = dcfg.WithDefaults()
	// Times late by less than a crash failover (lease TTL, then a
	// rebalance and a load) are on time, not misfires: a failover loses no
	// fire whatever the job's misfire policy.
	dcfg.Misfire.Grace = max(schedule.DefaultGrace, 2*o.cfg.LeaseTTL+2*time.Second)
	// A write etcd never answers (a proposal lost in a leader change)
	// holds the partition's scheduler and its worker protocol handlers:
	// give it up, to be retried, before the session's renew deadline, as
	// the session does with a keepalive.
	dcfg.RequestTimeout = min(dcfg.RequestTimeout, o.sessCfg.RenewDeadline)
	dcfg.Lookup = o.owner
	dcfg.Clock = o.cfg.Clock
	dcfg.Logger = o.cfg.Logger.Named("dispatch")
	dcfg.Metrics = o.dispMet
	dcfg.Space = o.space
	dcfg.Workers = o.workers
	send, err := newSender(o.cfg.Notify, o.client.Endpoints(), o.memberAddrs)
	if err != nil {
		return err
	}
	o.mu.Lock()
	o.notifier = send
	o.mu.Unlock()
	deliver := o.cfg.Notify.Delivery
	deliver.Sender, deliver.Clock, deliver.Metrics = send, o.cfg.Clock, o.notifyMet
	deliver.Logger = o.cfg.Logger.Named("notify").With(zap.String("member", o.cfg.ID))
	deliverer, err := notify.New(deliver)
	if err != nil {
		return err
	}
	dcfg.Notify.Notifier = deliverer
	dcfg.Notify.Default, _ = o.cfg.Notify.defaults() // validated by New
	ix, err := o.newIndexes(&dcfg)
	if err != nil {
		return err
	}
	disp, err := dispatch.New(o.client, dcfg)
	if err != nil {
		return err
	}
	work := o.cfg.Work
	if work == nil {
		work = disp.Work
	}
	scfg := shard.DefaultConfig(o.cfg.Namespace, o.cfg.ID, p)
	scfg.RebalanceDelay = o.cfg.RebalanceDelay
	scfg.MaxRebalanceDelay = max(scfg.MaxRebalanceDelay, 10*o.cfg.RebalanceDelay)
	scfg.Clock = o.cfg.Clock
	scfg.Logger = o.cfg.Logger.Named("shard")
	scfg.Metrics = o.shardMet
	ctrl, err := shard.NewController(o.client, o.members, o.owners, work, scfg)
	if err != nil {
		return err
	}
	var sb *dispatch.Standby
	if o.cfg.WarmStandby {
		heirs := standby.ControllerHeirs(ctrl, o.cfg.ID, o.lg)
		if sb, err = disp.NewStandby(heirs, standby.Config{Metrics: o.sbMet}); err != nil {
			return err
		}
	}
	o.mu.Lock()
	feed := newPartitionFeed(p, o.cfg.Clock.Now)
	o.partitions, o.controller, o.jobs, o.dispatcher, o.feed = p, ctrl, jobs, disp, feed
	o.scheduling = o.cfg.Work == nil
	o.notifyLocked()
	o.mu.Unlock()

	// The member view, the owner table and the storage upkeep outlive
	// sessions.
	watchCtx, stopWatch := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() { o.members.Run(watchCtx) })
	wg.Go(func() { o.owners.Run(watchCtx) })
	wg.Go(func() { o.compactor.Run(watchCtx) })
	wg.Go(func() { o.space.Run(watchCtx) })
	wg.Go(func() { o.workers.Run(watchCtx) })
	wg.Go(func() { o.deaths.Run(watchCtx) })
	wg.Go(func() { deliverer.Run(watchCtx) })
	ix.run(watchCtx, &wg)
	wg.Go(func() { feed.run(watchCtx, o.owners, o.members, ctrl) })
	if sb != nil {
		wg.Go(func() { sb.Run(watchCtx) })
	}
	defer func() { stopWatch(); wg.Wait() }()

	stop := make(chan struct{})
	defer context.AfterFunc(ctx, func() { close(stop) })()
	bo := retry.New(retry.Policy{Initial: 100 * time.Millisecond, Max: o.cfg.LeaseTTL})
	for {
		select {
		case <-stop:
			return nil
		case <-o.drain:
			return nil
		default:
		}
		left, err := o.runSession(stop)
		if left {
			return nil
		}
		wait := bo.Next()
		o.lg.Warn("session ended; registering again with a new lease", zap.Error(err), zap.Duration("after", wait))
		if !retry.SleepOrClosed(ctx, o.cfg.Clock, wait, o.drain) {
			return nil
		}
	}
}

// runSession runs one lease session: grant, register, own partitions. It
// returns left=true after a graceful leave, or the reason the session ended.
func (o *Orchestrator) runSession(stop <-chan struct{}) (left bool, err error) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		select {
		case <-stop:
		case <-o.drain:
		case <-ctx.Done():
		}
		cancel()
	}()
	s, err := membership.NewSession(ctx, o.client, o.sessCfg)
	if err != nil {
		return ctx.Err() != nil, err
	}
	defer s.Close()
	m, err := membership.Register(ctx, o.client, s, o.cfg.Namespace, api.Member{ID: o.cfg.ID, Addr: o.cfg.Advertise, Ring: shard.RingVersion}, o.lg)
	if err != nil {
		return ctx.Err() != nil, err
	}
	o.lg.Info("registered", zap.String("addr", m.Addr), zap.String("lease", fmt.Sprintf("%x", m.LeaseID)))
	o.setSession(s, true)
	defer o.setSession(nil, false)
	regCtx, stopRegWatch := context.WithCancel(context.Background())
	regDone := make(chan struct{})
	go func() { defer close(regDone); o.watchRegistration(regCtx, s, m.LeaseID) }()
	stopReg := func() { stopRegWatch(); <-regDone }
	defer stopReg() // idempotent

	defer o.startPublishing(s)()

	runCtx, stopRun := context.WithCancel(context.Background())
	defer stopRun()
	errc := make(chan error, 1)
	go func() { errc <- o.controller.Run(runCtx, s) }()
	select {
	case err := <-errc:
		return false, err
	case <-ctx.Done():
	}
	stopReg() // leaving deletes the registration: that must not fence the member
	o.leave(s, stopRun, errc)
	return true, nil
}

// watchRegistration ends session s at once if this member's registration
// under lease vanishes from the member view while the member has not
// begun to leave: a peer revoked the lease (its dead member detector
// judged this member dead, wrongly since it runs), the lease expired
// before the session's own deadline fired (a process starved of CPU), or
// someone deleted the key. The keepalive would find out within a renew interval; the view
// shows it one watch notification after the deletion. The owner keys
// went with the lease, so the controller has already stopped the
// partitions' work (and their writes are fenced regardless); ending the
// session makes the member register again under a new lease now. It
// returns when ctx ends or after ending the session.
func (o *Orchestrator) watchRegistration(ctx context.Context, s *membership.Session, lease int64) {
	has := func(v api.View) bool {
		return slices.ContainsFunc(v.Members, func(m api.Member) bool { return m.ID == o.cfg.ID && m.LeaseID == lease })
	}
	if _, err := o.members.WaitFor(ctx, has); err != nil {
		return
	}
	if _, err := o.members.WaitFor(ctx, func(v api.View) bool { return !has(v) }); err != nil || ctx.Err() != nil {
		return
	}
	o.lg.Warn("this member's registration is gone though it did not leave: its lease was revoked (a peer judged it dead), expired before the session noticed, or the key was deleted; fencing now and registering again",
		zap.String("lease", fmt.Sprintf("%x", lease)))
	s.Lost()
}

// leave hands the partitions over: deregister so the others rebalance and
// target them, wait for the controller to release them as it sees itself
// leave the ring, then stop it (releasing leftovers) and revoke the lease.
func (o *Orchestrator) leave(s *membership.Session, stopRun context.CancelFunc, errc <-chan error) {
	start := o.cfg.Clock.Now()
	o.lg.Info("leaving the fleet: deregistering and handing partitions over")
	ctx, cancel := context.WithTimeout(context.Background(), o.cfg.LeaveTimeout)
	defer cancel()
	if err := membership.Deregister(ctx, o.client, o.cfg.Namespace, o.cfg.ID, s.Lease()); err != nil {
		o.lg.Warn("deregister failed; partitions go with the lease", zap.Error(err))
	} else {
		_, err := o.controller.WaitFor(ctx, func(st shard.Status) bool { return len(st.Owned) == 0 || !st.Running })
		if err != nil {
			o.lg.Warn("partitions not handed over within the leave timeout; releasing the rest now", zap.Duration("leave_timeout", o.cfg.LeaveTimeout))
		}
	}
	stopRun()
	<-errc
	if err := s.Close(); err != nil {
		o.lg.Warn("revoking the lease failed; it expires on its own", zap.Error(err))
	}
	o.lg.Info("left the fleet", zap.Duration("took", o.cfg.Clock.Since(start)))
}

func (o *Orchestrator) setSession(s *membership.Session, registered bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.session, o.registered = s, registered
	o.notifyLocked()
}

// notifyLocked wakes the waiters of WaitReady: a field Ready reads
// changed. o.mu must be held.
func (o *Orchestrator) notifyLocked() {
	close(o.changed)
	o.changed = make(chan struct{})
}

// ensurePartitions reads or creates the cluster's partition count, and
// the fleet's cursor key, retrying while etcd is unreachable. It returns
// 0 if stopped first.
func (o *Orchestrator) ensurePartitions(ctx context.Context) (int, error) {
	bo := retry.New(retry.Etcd)
	for {
		rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		p, err := shard.EnsurePartitions(rctx, o.client, o.cfg.Namespace, o.cfg.Partitions)
		var c *cursor.Codec
		if err == nil {
			c, err = ensureCursorKey(rctx, o.client, o.cfg.Namespace)
		}
		cancel()
		if err == nil {
			o.mu.Lock()
			o.cursors = c
			o.mu.Unlock()
			return p, nil
		}
		if errors.Is(err, shard.ErrPartitionMismatch) || errors.Is(err, shard.ErrInvalidConfig) {
			return 0, err
		}
		o.lg.Warn("cannot read the cluster's partition count; retrying", zap.Error(err))
		if !retry.SleepOrClosed(ctx, o.cfg.Clock, bo.Next(), o.drain) {
			return 0, nil
		}
	}
}
