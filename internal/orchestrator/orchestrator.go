// Package orchestrator assembles one fleet member: its lease session and
// registration, the member view, the owner table and the shard controller,
// re-registering with a new lease whenever the old one is lost, and leaving
// the fleet gracefully (deregister, hand partitions over, revoke the lease)
// when stopped or drained.
package orchestrator

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/cenkalti/backoff/v5"
	"github.com/jonboulle/clockwork"
	"github.com/prometheus/client_golang/prometheus"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/jobfleet/jobfleet/api"
	"github.com/jobfleet/jobfleet/auth"
	"github.com/jobfleet/jobfleet/dispatch"
	"github.com/jobfleet/jobfleet/internal/mirror"
	"github.com/jobfleet/jobfleet/internal/storage"
	"github.com/jobfleet/jobfleet/membership"
	"github.com/jobfleet/jobfleet/schedule"
	"github.com/jobfleet/jobfleet/shard"
	"github.com/jobfleet/jobfleet/store"
)

// DefaultNamespace is the etcd key prefix used when none is given.
const DefaultNamespace = "/jobfleet/"

// Config configures an Orchestrator.
type Config struct {
	// ID is the stable member ID (see membership.ValidateID).
	ID string
	// Advertise is the URL others and workers use to reach this member.
	Advertise string
	// Namespace is the etcd key prefix; it must end in "/". Default
	// DefaultNamespace.
	Namespace string
	// Partitions is the partition count to create the cluster with; 0
	// adopts the cluster's (or shard.DefaultPartitions for a new cluster).
	// A different non-zero count than the cluster's is refused.
	Partitions int
	// LeaseTTL is the member lease's TTL; whole seconds. Default 5s.
	LeaseTTL time.Duration
	// RebalanceDelay debounces membership changes (shard.Config). Default
	// 200ms.
	RebalanceDelay time.Duration
	// LeaveTimeout bounds the graceful handoff when leaving: the time to
	// wait, after deregistering, for the others to take the partitions.
	// Default 10s.
	LeaveTimeout time.Duration
	// Work runs for each owned partition; nil runs the job scheduler
	// (dispatch.Dispatcher.Work). Tests of ownership alone set their own.
	Work shard.Work
	// RunLease is how long a worker holds an attempt without heartbeat
	// (dispatch.Config.RunLease). Default 30s.
	RunLease time.Duration
	// HistoryMaxRuns, HistoryMaxAge, HistoryBudget and DeleteAfter are
	// the dispatcher's history bounds (dispatch.Config): 0 keeps the
	// dispatcher's default; a negative DeleteAfter keeps finished one-off
	// jobs, a negative HistoryMaxAge keeps runs whatever their age.
	HistoryMaxRuns int
	HistoryMaxAge  time.Duration
	HistoryBudget  int64
	DeleteAfter    time.Duration
	// CommitsInFlight is dispatch.Config.CommitsInFlight: 0 keeps the
	// dispatcher's default, a negative value sends every write on its own
	// (no batching across partitions; for benchmarks).
	CommitsInFlight int
	// AdminSecret, if not empty, is accepted as the admin credential
	// auth.BootstrapID (the secret of --admin-token-file; at least
	// auth.MinBootstrapBytes).
	AdminSecret string
	// Storage configures the member's part in compacting etcd and its
	// watch of etcd's size, quota and alarms. Namespace, Member, Clock,
	// Logger and Metrics are taken from this Config; zero fields take
	// storage.DefaultConfig's values (compaction every 5 minutes).
	Storage storage.Config
	// Clock is given to the session and controller; nil is the real clock.
	Clock clockwork.Clock
	// Logger; nil means no logs.
	Logger *zap.Logger
	// Registry receives the member's metrics; nil means not registered.
	Registry prometheus.Registerer
}

func (c *Config) setDefaults() {
	if c.Namespace == "" {
		c.Namespace = DefaultNamespace
	}
	if c.LeaseTTL == 0 {
		c.LeaseTTL = 5 * time.Second
	}
	if c.RebalanceDelay == 0 {
		c.RebalanceDelay = 200 * time.Millisecond
	}
	if c.LeaveTimeout == 0 {
		c.LeaveTimeout = 10 * time.Second
	}
	if c.Clock == nil {
		c.Clock = clockwork.NewRealClock()
	}
	if c.Logger == nil {
		c.Logger = zap.NewNop()
	}
}

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

	dispMet *dispatch.Metrics

	drainOnce sync.Once
	drain     chan struct{} // closed by Drain

	mu         sync.Mutex // guards the fields below
	partitions int        // 0 until the cluster's count is known
	controller *shard.Controller
	jobs       *store.Etcd
	dispatcher *dispatch.Dispatcher
	session    *membership.Session
	registered bool
	startErr   error
}

// New validates cfg and returns an orchestrator. It starts nothing.
func New(client *clientv3.Client, cfg Config) (*Orchestrator, error) {
	cfg.setDefaults()
	if err := membership.ValidateID(cfg.ID); err != nil {
		return nil, err
	}
	if cfg.Namespace[len(cfg.Namespace)-1] != '/' {
		return nil, fmt.Errorf("orchestrator: namespace %q must end in '/'", cfg.Namespace)
	}
	if cfg.Partitions < 0 || cfg.Partitions > shard.MaxPartitions {
		return nil, fmt.Errorf("orchestrator: partitions %d outside 0..%d", cfg.Partitions, shard.MaxPartitions)
	}
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
	creds, err := auth.NewCache(client, auth.CacheConfig{Namespace: cfg.Namespace, Bootstrap: cfg.AdminSecret, Clock: cfg.Clock, Logger: cfg.Logger.Named("credentials")})
	if err != nil {
		return nil, err
	}
	return &Orchestrator{
		client:    client,
		cfg:       cfg,
		lg:        cfg.Logger.With(zap.String("member", cfg.ID)),
		sessCfg:   sc,
		shardMet:  shard.NewMetrics(cfg.Registry),
		dispMet:   dispatch.NewMetrics(cfg.Registry),
		members:   members,
		owners:    owners,
		compactor: compactor,
		space:     space,
		creds:     creds,
		drain:     make(chan struct{}),
	}, nil
}

// ID returns the member ID.
func (o *Orchestrator) ID() string { return o.cfg.ID }

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
		o.mu.Unlock()
		return err
	}
	if p == 0 {
		return nil // stopped before the cluster was reachable
	}
	jobs := store.NewEtcd(o.client, o.cfg.Namespace, p, store.DefaultLimits(), o.cfg.Clock.Now).WithGuard(o.space.Admit)
	dcfg := dispatch.DefaultConfig(o.cfg.Namespace, p, o.cfg.ID, o.cfg.Advertise)
	if o.cfg.RunLease != 0 {
		dcfg.RunLease = o.cfg.RunLease
	}
	if o.cfg.HistoryMaxRuns != 0 {
		dcfg.HistoryMaxRuns = o.cfg.HistoryMaxRuns
	}
	if o.cfg.HistoryMaxAge != 0 {
		dcfg.HistoryMaxAge = max(o.cfg.HistoryMaxAge, 0)
	}
	if o.cfg.HistoryBudget != 0 {
		dcfg.HistoryBudget = o.cfg.HistoryBudget
	}
	if o.cfg.DeleteAfter != 0 {
		dcfg.DeleteAfter = o.cfg.DeleteAfter
	}
	if o.cfg.CommitsInFlight != 0 {
		dcfg.CommitsInFlight = max(o.cfg.CommitsInFlight, 0)
	}
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
	o.mu.Lock()
	o.partitions, o.controller, o.jobs, o.dispatcher = p, ctrl, jobs, disp
	o.mu.Unlock()

	// The member view, the owner table and the storage upkeep outlive
	// sessions.
	watchCtx, stopWatch := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() { o.members.Run(watchCtx) })
	wg.Go(func() { o.owners.Run(watchCtx) })
	wg.Go(func() { o.compactor.Run(watchCtx) })
	wg.Go(func() { o.space.Run(watchCtx) })
	defer func() { stopWatch(); wg.Wait() }()

	stop := make(chan struct{})
	defer context.AfterFunc(ctx, func() { close(stop) })()
	bo := backoff.NewExponentialBackOff()
	bo.InitialInterval = 100 * time.Millisecond
	bo.MaxInterval = o.cfg.LeaseTTL
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
		wait := bo.NextBackOff()
		o.lg.Warn("session ended; registering again with a new lease", zap.Error(err), zap.Duration("after", wait))
		select {
		case <-stop:
			return nil
		case <-o.drain:
			return nil
		case <-o.cfg.Clock.After(wait):
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
	m, err := membership.Register(ctx, o.client, s, o.cfg.Namespace, membership.Member{ID: o.cfg.ID, Addr: o.cfg.Advertise}, o.lg)
	if err != nil {
		return ctx.Err() != nil, err
	}
	o.lg.Info("registered", zap.String("addr", m.Addr), zap.String("lease", fmt.Sprintf("%x", m.LeaseID)))
	o.setSession(s, true)
	defer o.setSession(nil, false)

	runCtx, stopRun := context.WithCancel(context.Background())
	defer stopRun()
	errc := make(chan error, 1)
	go func() { errc <- o.controller.Run(runCtx, s) }()
	select {
	case err := <-errc:
		return false, err
	case <-ctx.Done():
	}
	o.leave(s, stopRun, errc)
	return true, nil
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
}

// ensurePartitions reads or creates the cluster's partition count,
// retrying while etcd is unreachable. It returns 0 if stopped first.
func (o *Orchestrator) ensurePartitions(ctx context.Context) (int, error) {
	bo := backoff.NewExponentialBackOff()
	bo.MaxInterval = 5 * time.Second
	for {
		rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		p, err := shard.EnsurePartitions(rctx, o.client, o.cfg.Namespace, o.cfg.Partitions)
		cancel()
		if err == nil {
			return p, nil
		}
		if errors.Is(err, shard.ErrPartitionMismatch) || errors.Is(err, shard.ErrInvalidConfig) {
			return 0, err
		}
		o.lg.Warn("cannot read the cluster's partition count; retrying", zap.Error(err))
		select {
		case <-ctx.Done():
			return 0, nil
		case <-o.drain:
			return 0, nil
		case <-o.cfg.Clock.After(bo.NextBackOff()):
		}
	}
}

// Jobs returns the job store, or ErrNotStarted before the cluster's
// partition count is known.
func (o *Orchestrator) Jobs() (*store.Etcd, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.jobs == nil {
		return nil, ErrNotStarted
	}
	return o.jobs, nil
}

// Dispatcher returns the worker protocol's server, or ErrNotStarted.
func (o *Orchestrator) Dispatcher() (*dispatch.Dispatcher, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.dispatcher == nil {
		return nil, ErrNotStarted
	}
	return o.dispatcher, nil
}

// owner returns partition p's owner as etcd records it, and its address.
func (o *Orchestrator) owner(p int) (string, string) {
	o.mu.Lock()
	n := o.partitions
	o.mu.Unlock()
	if p < 0 || p >= n {
		return "", ""
	}
	table, _, _ := o.owners.Table(n)
	id := table[p].Member
	m, _ := o.Members().Get(id)
	return id, m.Addr
}

// Members returns the current member view.
func (o *Orchestrator) Members() membership.View {
	v, _ := o.members.View()
	return v
}

// ErrNotStarted means the orchestrator does not know the cluster's
// partition count yet.
var ErrNotStarted = errors.New("orchestrator: not started")

// Partitions returns who owns each partition (read from etcd now) and who
// should (as the ring computed from this member's current view says).
func (o *Orchestrator) Partitions() (api.PartitionTable, error) {
	o.mu.Lock()
	p := o.partitions
	o.mu.Unlock()
	if p == 0 {
		return api.PartitionTable{}, ErrNotStarted
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	table, rev, err := shard.ReadOwners(ctx, o.client, o.cfg.Namespace, p)
	if err != nil {
		return api.PartitionTable{}, err
	}
	view := o.Members()
	ring, err := shard.NewRing(view.IDs(), shard.DefaultRingConfig(p))
	if err != nil {
		return api.PartitionTable{}, err
	}
	t := api.PartitionTable{Partitions: p, Revision: rev, Rows: make([]api.PartitionRow, p)}
	for i := range p {
		t.Rows[i] = api.PartitionRow{Partition: i, Owner: table[i].Member, Epoch: table[i].Epoch, Target: ring.Target(i)}
	}
	return t, nil
}

// Storage reads etcd's storage now: sizes, quota, high-water mark,
// revisions, the fleet's last compaction, key counts and alarms, with the
// run history of the partitions this member owns. Errors are classified
// by store.Classify.
func (o *Orchestrator) Storage(ctx context.Context) (storage.Report, error) {
	rep, err := o.space.Report(ctx)
	if err != nil {
		return storage.Report{}, err
	}
	if d, err := o.Dispatcher(); err == nil {
		st := d.Stats()
		rep.History = &storage.History{Member: o.cfg.ID, Partitions: len(d.Owned()), Runs: st.HistoryRuns, Bytes: st.HistoryBytes, BudgetBytes: st.HistoryBudget}
	}
	return rep, nil
}

// Ready reports whether the member is registered and owns exactly the
// partitions the ring assigns it; if not, it says why.
func (o *Orchestrator) Ready() (bool, string) {
	o.mu.Lock()
	ctrl, registered, startErr := o.controller, o.registered, o.startErr
	o.mu.Unlock()
	switch {
	case startErr != nil:
		return false, startErr.Error()
	case ctrl == nil:
		return false, "starting: reading the cluster's partition count"
	case !registered:
		return false, "not registered"
	}
	if err := o.space.WritesRefused(); err != nil {
		return false, "firing is stopped: " + err.Error()
	}
	st, _ := ctrl.Status()
	if !st.Ready {
		return false, st.Reason
	}
	if d, err := o.Dispatcher(); err == nil {
		if err := d.Health(); err != nil {
			return false, "writes to etcd are failing: " + err.Error()
		}
	}
	return true, ""
}

// WaitReady blocks until Ready reports true, or returns ctx's error with
// the last reason.
func (o *Orchestrator) WaitReady(ctx context.Context) error {
	t := o.cfg.Clock.NewTicker(20 * time.Millisecond)
	defer t.Stop()
	for {
		ok, reason := o.Ready()
		if ok {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w: %s", ctx.Err(), reason)
		case <-t.Chan():
		}
	}
}

// Healthy returns an error if the member holds partitions but has not
// renewed its lease within the TTL plus grace: it may be acting as an owner
// it no longer is, which self-fencing should have prevented.
func (o *Orchestrator) Healthy(grace time.Duration) error {
	o.mu.Lock()
	ctrl, s := o.controller, o.session
	o.mu.Unlock()
	if ctrl == nil || s == nil {
		return nil
	}
	st, _ := ctrl.Status()
	if len(st.Owned) == 0 {
		return nil
	}
	if since := o.cfg.Clock.Since(s.LastRenewal()); since > s.TTL()+grace {
		return fmt.Errorf("owns %d partitions but last renewed its lease %v ago (TTL %v)", len(st.Owned), since.Round(time.Millisecond), s.TTL())
	}
	return nil
}

// Status returns the shard controller's status; ok is false before the
// controller exists.
func (o *Orchestrator) Status() (st shard.Status, ok bool) {
	o.mu.Lock()
	ctrl := o.controller
	o.mu.Unlock()
	if ctrl == nil {
		return shard.Status{}, false
	}
	st, _ = ctrl.Status()
	return st, true
}
