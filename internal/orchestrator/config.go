package orchestrator

import (
	"fmt"
	"strings"
	"time"

	"github.com/jonboulle/clockwork"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	"github.com/jobfleet/jobfleet/auth"
	"github.com/jobfleet/jobfleet/dispatch/workers"
	"github.com/jobfleet/jobfleet/internal/storage"
	"github.com/jobfleet/jobfleet/membership"
	"github.com/jobfleet/jobfleet/membership/deathwatch"
	"github.com/jobfleet/jobfleet/shard"
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
	// Workers configures the worker registry (package dispatch/workers):
	// the registrations' TTL (the attempts of a worker silent that long
	// are retried at once), how long a worker ID stays bound to its
	// credential, the registrations' bounds and rates. Its Namespace,
	// Member, Space, Metrics, Clock and Logger are the member's own.
	Workers workers.Config
	// DeadMembers configures the detector of dead members (package
	// membership/deathwatch): how often this member probes the others'
	// advertised addresses, and how far apart two refusals must be to
	// confirm a death, after which it revokes the dead member's lease so
	// its partitions move at once instead of after the lease's TTL. Zero
	// fields take the detector's defaults (probes every 200ms, refusals
	// 50ms apart); a negative Interval turns it off. Its Namespace, Self,
	// Clock, Logger and Metrics are the member's own.
	DeadMembers deathwatch.Config
	// Notify configures the run notifications this member delivers.
	Notify NotifyConfig
	// HistoryMaxRuns, HistoryMaxAge, HistoryBudget and DeleteAfter are
	// the dispatcher's history bounds (dispatch.Config): 0 keeps the
	// dispatcher's default; a negative DeleteAfter keeps finished one-off
	// jobs, a negative HistoryMaxAge keeps runs whatever their age.
	HistoryMaxRuns int
	HistoryMaxAge  time.Duration
	HistoryBudget  int64
	DeleteAfter    time.Duration
	// HistoryFloor is dispatch.Config.HistoryFloor, the newest final runs
	// of each job the history budget never trims: 0 keeps the
	// dispatcher's default (3).
	HistoryFloor int
	// CommitsInFlight is dispatch.Config.CommitsInFlight: 0 keeps the
	// dispatcher's default, a negative value sends every write on its own
	// (no batching across partitions; for benchmarks).
	CommitsInFlight int
	// LoadsInFlight is dispatch.Config.LoadsInFlight, the partitions the
	// member loads from etcd at once: 0 keeps the dispatcher's default
	// (16), a negative value sets no bound on the partitions.
	LoadsInFlight int
	// LoadJobsInFlight is dispatch.Config.LoadJobsInFlight, the jobs the
	// member loads from etcd at once over the partitions loading: 0 keeps
	// the dispatcher's default (2048), a negative value sets no bound on
	// the jobs.
	LoadJobsInFlight int
	// WarmStandby makes the member keep warm copies of the partitions it
	// is the heir of (dispatch.Standby): a takeover then builds them from
	// memory instead of reading them from etcd.
	WarmStandby bool
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

// DefaultConfig returns the defaults for member id advertised at
// advertise: the zero fields New fills in, written out.
func DefaultConfig(id, advertise string) Config {
	c := Config{ID: id, Advertise: advertise}
	c.setDefaults()
	return c
}

// Validate reports the first problem with c, after New's defaults are
// applied to its zero fields: a field out of its range or fields that do
// not fit together. Errors wrap ErrInvalidConfig and start with
// "orchestrator: invalid config".
func (c Config) Validate() error {
	c.setDefaults()
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: "+format, append([]any{ErrInvalidConfig}, args...)...)
	}
	if err := membership.ValidateID(c.ID); err != nil {
		return bad("%v", err)
	}
	if _, err := c.Notify.defaults(); err != nil {
		return bad("%v", err)
	}
	if err := c.deadMembersConfig().Validate(); err != nil {
		return bad("%s", strings.TrimPrefix(err.Error(), deathwatch.ErrInvalidConfig.Error()+": "))
	}
	if err := c.workersConfig().Validate(); err != nil {
		return bad("%s", strings.TrimPrefix(err.Error(), workers.ErrInvalidConfig.Error()+": "))
	}
	switch {
	case !strings.HasSuffix(c.Namespace, "/"):
		return bad("namespace %q must end in '/'", c.Namespace)
	case c.Partitions < 0 || c.Partitions > shard.MaxPartitions:
		return bad("partitions %d outside 0..%d", c.Partitions, shard.MaxPartitions)
	case c.LeaseTTL < time.Second || c.LeaseTTL%time.Second != 0:
		return bad("lease TTL %v must be a whole number of seconds, at least 1s", c.LeaseTTL)
	case c.RebalanceDelay < 0:
		return bad("rebalance delay %v is negative", c.RebalanceDelay)
	case c.LeaveTimeout < 0:
		return bad("leave timeout %v is negative", c.LeaveTimeout)
	case c.RunLease != 0 && c.RunLease < time.Second:
		return bad("run lease %v below 1s", c.RunLease)
	case c.Notify.MaxAge < 0:
		return bad("notify max age %v is negative", c.Notify.MaxAge)
	case c.HistoryFloor < 0:
		return bad("history floor %d is negative", c.HistoryFloor)
	case c.HistoryMaxRuns < 0:
		return bad("history max runs %d is negative", c.HistoryMaxRuns)
	case c.HistoryBudget < 0:
		return bad("history budget %d bytes is negative", c.HistoryBudget)
	case c.AdminSecret != "" && len(c.AdminSecret) < auth.MinBootstrapBytes:
		return bad("admin secret of %d bytes; at least %d", len(c.AdminSecret), auth.MinBootstrapBytes)
	}
	return nil
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

// deadMembersConfig is the dead member detector's configuration:
// c.DeadMembers with the member's namespace, ID, clock and logger.
func (c Config) deadMembersConfig() deathwatch.Config {
	dc := c.DeadMembers
	dc.Namespace, dc.Self, dc.Clock, dc.Logger = c.Namespace, c.ID, c.Clock, c.Logger.Named("deathwatch")
	return dc
}

// workersConfig is the worker registry's configuration: c.Workers with
// the member's namespace, ID, clock and logger.
func (c Config) workersConfig() workers.Config {
	wc := c.Workers
	wc.Namespace, wc.Member, wc.Clock, wc.Logger = c.Namespace, c.ID, c.Clock, c.Logger
	return wc
}
