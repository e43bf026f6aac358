package orchestrator

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/jonboulle/clockwork"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/spf13/pflag"
	"go.uber.org/zap"

	"github.com/jobfleet/jobfleet/api"
	"github.com/jobfleet/jobfleet/auth"
	"github.com/jobfleet/jobfleet/dispatch"
	"github.com/jobfleet/jobfleet/dispatch/notify"
	"github.com/jobfleet/jobfleet/dispatch/workers"
	"github.com/jobfleet/jobfleet/egress"
	"github.com/jobfleet/jobfleet/internal/settings"
	"github.com/jobfleet/jobfleet/internal/storage"
	"github.com/jobfleet/jobfleet/membership"
	"github.com/jobfleet/jobfleet/membership/deathwatch"
	"github.com/jobfleet/jobfleet/shard"
)

// DefaultNamespace is the etcd key prefix used when none is given.
const DefaultNamespace = "/jobfleet/"

// DefaultLeaseTTL is the member lease's TTL: a crashed member's
// partitions move after it (docs/operations.md, "Tuning the lease TTL").
const DefaultLeaseTTL = 5 * time.Second

// Config configures an Orchestrator. Its settings follow the zero
// convention of package settings: a zero setting is its default (New and
// Validate apply DefaultConfig's values), a negative one is unbounded
// where the field says so and refused elsewhere. The settings with a flag
// bind to their fields through AddFlags.
type Config struct {
	// ID is the stable member ID (see membership.ValidateID). Required.
	ID string
	// Advertise is the URL others and workers use to reach this member.
	Advertise string
	// Namespace is the etcd key prefix; it must end in "/". Default
	// DefaultNamespace (--namespace).
	Namespace string
	// Partitions is the partition count to create the cluster with; 0
	// adopts the cluster's (or shard.DefaultPartitions for a new cluster).
	// A different non-zero count than the cluster's is refused
	// (--partitions).
	Partitions int
	// LeaseTTL is the member lease's TTL; whole seconds, at least 1s.
	// Default DefaultLeaseTTL (--lease-ttl).
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
	// Workers configures the worker registry (package dispatch/workers):
	// the registrations' TTL (the attempts of a worker silent that long
	// are retried at once), how long a worker ID stays bound to its
	// credential, the registrations' bounds and rates (--worker-ttl,
	// --worker-id-grace, --worker-register-rate, --worker-register-writes).
	// Its Namespace, Member, Space, Metrics, Clock and Logger are the
	// member's own, and its RequestTimeout is fitted to the lease.
	Workers workers.Config
	// DeadMembers configures the detector of dead members (package
	// membership/deathwatch): how often this member probes the others'
	// advertised addresses, and how far apart two refusals must be to
	// confirm a death, after which it revokes the dead member's lease so
	// its partitions move at once instead of after the lease's TTL
	// (--dead-member-probe-interval, --dead-member-confirm; a negative
	// interval turns it off). Its Namespace, Self, Clock, Logger and
	// Metrics are the member's own.
	DeadMembers deathwatch.Config
	// Notify configures the run notifications this member delivers: the
	// fleet's default subscription, the destination policy, and their
	// delivery's bounds (Notify.Delivery).
	Notify NotifyConfig
	// Dispatch holds the job scheduler's settings (run lease, loads,
	// history, commits; see dispatch.Config). The member sets its
	// identity, hooks and notifications itself: Namespace, Partitions,
	// MemberID, MemberAddr, Lookup, Space, Workers, Clock, Logger, Metrics
	// and Notify are ignored here, and RequestTimeout and Misfire.Grace
	// are fitted to the lease.
	Dispatch dispatch.Config
	// WarmStandby makes the member keep warm copies of the partitions it
	// is the heir of (dispatch.Standby): a takeover then builds them from
	// memory instead of reading them from etcd (--warm-standby). Off by
	// default: the copies cost memory and a watch of every partition's
	// writes.
	WarmStandby bool
	// AdminSecret, if not empty, is accepted as the admin credential
	// auth.BootstrapID (the secret of --admin-token-file; at least
	// auth.MinBootstrapBytes).
	AdminSecret string
	// Storage configures the member's part in compacting etcd and its
	// watch of etcd's size, quota and alarms. Namespace, Member, Clock,
	// Logger and Metrics are taken from this Config.
	Storage storage.Config
	// ActivityInterval is how often the member publishes its last hour per
	// minute (fires, outcomes, lag, attempts running and waiting) for the
	// console's charts of the fleet (--activity-interval; 0: 15s; negative:
	// never, and peers chart this member without figures).
	ActivityInterval time.Duration
	// Clock is given to the session and controller; nil is the real clock.
	Clock clockwork.Clock
	// Logger; nil means no logs.
	Logger *zap.Logger
	// Registry receives the member's metrics; nil means not registered.
	Registry prometheus.Registerer
}

// DefaultConfig returns the defaults for member id advertised at
// advertise: every zero setting New fills in, written out.
func DefaultConfig(id, advertise string) Config {
	return Config{ID: id, Advertise: advertise, Notify: DefaultNotifyConfig()}.WithDefaults()
}

// WithDefaults returns c with its zero settings, and those of Workers,
// DeadMembers, Notify.Delivery, Dispatch and Storage, replaced by their defaults (the
// clock, logger and registry as they are).
func (c Config) WithDefaults() Config {
	if c.Namespace == "" {
		c.Namespace = DefaultNamespace
	}
	settings.Default(&c.LeaseTTL, DefaultLeaseTTL)
	settings.Default(&c.RebalanceDelay, 200*time.Millisecond)
	settings.Default(&c.LeaveTimeout, 10*time.Second)
	settings.Default(&c.ActivityInterval, 15*time.Second)
	c.Workers = c.Workers.WithDefaults()
	c.DeadMembers = c.DeadMembers.WithDefaults()
	c.Notify.Delivery = c.Notify.Delivery.WithDefaults()
	c.Dispatch = c.Dispatch.WithDefaults()
	c.Storage = c.Storage.WithDefaults()
	return c
}

// AddFlags defines the flags of c's settings in fs, each bound to its
// field with the field's current value as its default (call it on
// DefaultConfig): the member's (--namespace, --partitions, --lease-ttl,
// --warm-standby), the notifications' (--notify-*), and those of
// Workers, DeadMembers, Dispatch and Storage. ID, Advertise and AdminSecret are the
// command's: their defaults are derived from other flags.
func (c *Config) AddFlags(fs *pflag.FlagSet) {
	fs.StringVar(&c.Namespace, "namespace", c.Namespace, "etcd key prefix of the cluster (ends in '/')")
	fs.IntVar(&c.Partitions, "partitions", c.Partitions, fmt.Sprintf("partition count, used when the cluster is created (0: the cluster's, or %d for a new cluster; must match an existing cluster's; at most %d)", shard.DefaultPartitions, shard.MaxPartitions))
	fs.DurationVar(&c.LeaseTTL, "lease-ttl", c.LeaseTTL, "member lease TTL, whole seconds; a crashed member's partitions move after it")
	fs.DurationVar(&c.ActivityInterval, "activity-interval", c.ActivityInterval, "how often this member publishes its last hour per minute and its late runs for the console's charts and late-runs view (one put of about 15 KiB)")
	settings.Unbounded(fs, "activity-interval", "never (peers show this member without figures)")
	fs.BoolVar(&c.WarmStandby, "warm-standby", c.WarmStandby, "keep a warm copy of the partitions this member would be given if their owner went away (their heir), followed by one watch, so that a takeover builds them from memory instead of reading them from etcd; costs memory for the copies and a watch of every partition's writes")
	c.Notify.addFlags(fs)
	c.Workers.AddFlags(fs)
	c.DeadMembers.AddFlags(fs)
	c.Dispatch.AddFlags(fs)
	c.Storage.AddFlags(fs)
}

// Validate reports the first problem with c, after WithDefaults: a field
// out of its range or fields that do not fit together, its own or those
// of Workers, DeadMembers, Notify.Delivery, Dispatch and Storage. Errors
// wrap ErrInvalidConfig and start with "orchestrator: invalid config"; a setting with a flag is reported as a
// *settings.Error naming it.
func (c Config) Validate() error {
	c = c.WithDefaults()
	bad, invalid := settings.Refusals(ErrInvalidConfig)
	// of returns err of a part's Validate: its *settings.Error if it has
	// one (the part's own prefix would only repeat this one).
	of := func(err error) error {
		var se *settings.Error
		if errors.As(err, &se) {
			return fmt.Errorf("%w: %w", ErrInvalidConfig, se)
		}
		return bad("%v", err)
	}
	if err := membership.ValidateID(c.ID); err != nil {
		return invalid("id", c.ID, "%v", err)
	}
	if err := c.Notify.validate(); err != nil {
		return of(err)
	}
	switch {
	case !strings.HasSuffix(c.Namespace, "/"):
		return invalid("namespace", c.Namespace, "must end in '/'")
	case c.Partitions < 0 || c.Partitions > shard.MaxPartitions:
		return invalid("partitions", c.Partitions, "want 1 to %d (0: the cluster's, or %d for a new cluster)", shard.MaxPartitions, shard.DefaultPartitions)
	case c.ActivityInterval > 0 && c.ActivityInterval < 100*time.Millisecond:
		return invalid("activity-interval", c.ActivityInterval, "want at least 100ms, or a negative value for never (0: the default, 15s)")
	case c.LeaseTTL < time.Second || c.LeaseTTL%time.Second != 0:
		return invalid("lease-ttl", c.LeaseTTL, "want a whole number of seconds, at least 1s (0: the default, %v)", DefaultLeaseTTL)
	case c.RebalanceDelay < 0:
		return bad("rebalance delay %v is negative", c.RebalanceDelay)
	case c.LeaveTimeout < 0:
		return bad("leave timeout %v is negative", c.LeaveTimeout)
	case c.AdminSecret != "" && len(c.AdminSecret) < auth.MinBootstrapBytes:
		return bad("admin secret of %d bytes; at least %d", len(c.AdminSecret), auth.MinBootstrapBytes)
	}
	if err := c.workersConfig().Validate(); err != nil {
		return of(err)
	}
	if err := c.deadMembersConfig().Validate(); err != nil {
		return of(err)
	}
	d := c.Dispatch
	d.Namespace, d.MemberID, d.MemberAddr, d.Partitions = c.Namespace, c.ID, c.Advertise, c.Partitions
	if d.Partitions == 0 {
		d.Partitions = shard.DefaultPartitions // checked again with the cluster's count when the member starts
	}
	if err := d.Validate(); err != nil {
		return of(err)
	}
	s := c.Storage
	s.Namespace, s.Member = c.Namespace, c.ID
	if err := s.Validate(); err != nil {
		return of(err)
	}
	return nil
}

// setDefaults applies WithDefaults, and the real clock and no logs for a
// nil Clock and Logger.
func (c *Config) setDefaults() {
	*c = c.WithDefaults()
	if c.Clock == nil {
		c.Clock = clockwork.NewRealClock()
	}
	if c.Logger == nil {
		c.Logger = zap.NewNop()
	}
}

// deadMembersConfig is the dead member detector's configuration:
// c.DeadMembers with the member's namespace, ID and clock (New names its
// logger).
func (c Config) deadMembersConfig() deathwatch.Config {
	dc := c.DeadMembers
	dc.Namespace, dc.Self, dc.Clock = c.Namespace, c.ID, c.Clock
	return dc
}

// DefaultNotifyConfig returns the defaults of the notification settings:
// no default subscription; a --notify-url is told of dead runs; the
// delivery's defaults (notify.DefaultConfig).
func DefaultNotifyConfig() NotifyConfig {
	return NotifyConfig{On: []api.RunStatus{api.RunDead}, Delivery: notify.DefaultConfig()}
}

// notifyStatuses are the events a subscription may name.
var notifyStatuses = api.NotifyEvents

// addFlags defines the --notify-* flags, bound to c's fields (those of
// the delivery by notify.Config.AddFlags).
func (c *NotifyConfig) addFlags(fs *pflag.FlagSet) {
	fs.StringVar(&c.URL, "notify-url", c.URL, "URL told of the runs of jobs without notify entries of their own (POST of the run document)")
	settings.StringsVar(fs, &c.On, "notify-on", c.On, "events --notify-url is told of: failed, dead, succeeded, cancelled, paused, skipped, missed (comma separated)")
	fs.StringSliceVar(&c.Policy.Allow, "notify-allow", c.Policy.Allow, "destinations notifications may reach although denied by default, as the worker's --http-allow")
	fs.StringSliceVar(&c.Policy.Deny, "notify-deny", c.Policy.Deny, "destinations notifications must never reach, as the worker's --http-deny")
	fs.StringSliceVar(&c.SecretEnv, "notify-secret-env", c.SecretEnv, "variables of this process's environment that notify headers' secret references may name (NAME,...)")
	fs.StringVar(&c.ConsoleURL, "notify-console-url", c.ConsoleURL, "the console's URL as operators reach it (https://jobfleet.example/ui/), for links to runs in \"slack\" notifications; empty: no link")
	c.Delivery.AddFlags(fs)
}

// validate checks the default subscription, the destination policy and
// the delivery's settings.
func (c NotifyConfig) validate() error {
	for _, s := range c.On {
		if !slices.Contains(notifyStatuses, s) {
			return settings.Invalid("notify-on", statusStrings(c.On), "%q is not an event: want failed, dead, succeeded, cancelled, paused, skipped or missed", s)
		}
	}
	if _, err := c.defaults(); err != nil {
		return settings.Invalid("notify-url", c.URL, "%v", err)
	}
	if c.ConsoleURL != "" {
		if err := api.ValidateURL("notify-console-url", c.ConsoleURL); err != nil {
			return settings.Invalid("notify-console-url", c.ConsoleURL, "%v", err)
		}
	}
	if _, err := egress.NewTransport(egress.Policy{Allow: c.Policy.Allow}); err != nil {
		return settings.Invalid("notify-allow", c.Policy.Allow, "%v", err)
	}
	if _, err := egress.NewTransport(egress.Policy{Deny: c.Policy.Deny}); err != nil {
		return settings.Invalid("notify-deny", c.Policy.Deny, "%v", err)
	}
	return c.Delivery.Validate()
}

func statusStrings(ss []api.RunStatus) []string {
	out := make([]string, len(ss))
	for i, s := range ss {
		out[i] = string(s)
	}
	return out
}

// workersConfig is the worker registry's configuration: c.Workers with
// the member's namespace, ID, clock and logger.
func (c Config) workersConfig() workers.Config {
	wc := c.Workers
	wc.Namespace, wc.Member, wc.Clock, wc.Logger = c.Namespace, c.ID, c.Clock, c.Logger
	return wc
}
