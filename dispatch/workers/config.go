package workers

import (
	"fmt"
	"strings"
	"time"

	"github.com/jonboulle/clockwork"
	"github.com/spf13/pflag"
	"go.uber.org/zap"

	"github.com/jobfleet/jobfleet/api"
	"github.com/jobfleet/jobfleet/internal/settings"
)

// Defaults of Config.
const (
	// DefaultIDGrace is how long a worker ID stays bound to its credential
	// after its registration ended: long enough for a worker cut off from
	// the fleet, or a host rebooting, to come back under its ID.
	DefaultIDGrace = 15 * time.Minute
	// DefaultUpdateInterval is how often, at most, a worker's Active count
	// is stored.
	DefaultUpdateInterval = 30 * time.Second
	// DefaultMaxPerCredential is Config.MaxPerCredential's default.
	DefaultMaxPerCredential = 1024
	// DefaultRequestRate and DefaultRequestBurst bound the registration
	// requests of one credential on one member, a ceiling: the refreshes
	// of DefaultMaxPerCredential workers sharing a credential, all with
	// one member, at the default TTL (a third of 6s apart) take half of
	// it.
	DefaultRequestRate  = 1000.0
	DefaultRequestBurst = 2000
	// DefaultWriteRate and DefaultWriteBurst bound the registration writes
	// of one credential on one member, in KiB: 64 workers registering at
	// once, then 10 new or changed registrations a second (of the largest
	// allowed, about one).
	DefaultWriteRate  = 10.0
	DefaultWriteBurst = 64
)

// Config configures a Registry. Its settings follow the zero convention
// of package settings: a zero field takes its default, a negative one is
// unbounded where the field says so (the rates turn their limit off) and
// refused elsewhere. The settings with a flag bind to their fields
// through AddFlags.
type Config struct {
	// Namespace is the cluster's etcd key prefix.
	Namespace string
	// Member is this member's ID, recorded in the registrations it writes.
	Member string
	// TTL is a registration's lifetime without a refresh: whole seconds,
	// 2s to 5m. Default api.DefaultWorkerTTL (--worker-ttl).
	TTL time.Duration
	// IDGrace is how long a worker ID stays bound to the credential that
	// registered it after its registration ended (expired or removed):
	// until then another credential can neither register, poll nor
	// deregister under it. Whole seconds, 1s to 24h. Default
	// DefaultIDGrace (--worker-id-grace).
	IDGrace time.Duration
	// UpdateInterval is how often, at most, a registration is rewritten
	// for its Active count alone (which changes with every attempt the
	// worker takes or ends); at least 1s. A negative value stores Active
	// only with other changes. Default DefaultUpdateInterval.
	UpdateInterval time.Duration
	// MaxPerCredential bounds the live registrations of one credential;
	// the worker IDs it holds (live, or within their grace) are bounded by
	// four times as many. So what the registry keeps in etcd is bounded by
	// the credentials an admin issues, not by what their holders do.
	// Negative: unbounded. Default DefaultMaxPerCredential.
	MaxPerCredential int
	// RequestRate is the registration requests (registers and
	// deregisters, refreshes included) one credential may send to this
	// member per second, with bursts of RequestBurst; beyond it they are
	// refused (ErrRateLimited, 429). Negative: no limit. Defaults
	// DefaultRequestRate (--worker-register-rate) and twice the rate.
	RequestRate  float64
	RequestBurst int
	// WriteRate is the registration writes (a new registration, a changed
	// one, an update) one credential may cause on this member per second,
	// with bursts of WriteBurst (at least 8). A write counts one per KiB
	// it stores, begun: most registrations count one, the largest seven. A
	// new or changed registration beyond it is refused (ErrRateLimited,
	// 429); an update of Active or of the member it registers with beyond
	// it is skipped. Negative: no limit. Defaults DefaultWriteRate
	// (--worker-register-writes) and DefaultWriteBurst (or a second's
	// worth, if more).
	WriteRate  float64
	WriteBurst int
	// PresenceGrace is how long a worker whose presence stream
	// (api.PathPresence) ended without its end (its connection closed or
	// reset, as when its process dies) has to open a new one with this
	// member before its registration is revoked, so that its attempts are
	// retried at once instead of one TTL later. Default
	// DefaultPresenceGrace (--worker-presence-grace); at most half TTL;
	// negative: broken streams are not acted on (a dead worker's attempts
	// wait for its registration's TTL).
	PresenceGrace time.Duration
	// RequestTimeout bounds each etcd request. Default 5s.
	RequestTimeout time.Duration
	// Space, if set, is the fleet's guard of etcd's space: registrations
	// that need writing are refused while it refuses writes that grow the
	// store. Nil: writes are always tried.
	Space Space
	// Metrics, if set, receives the registry's metrics.
	Metrics *Metrics
	// Clock stamps registrations and drives the rate limits; nil is the
	// real clock. Leases run on etcd's clock.
	Clock clockwork.Clock
	// Logger; nil means no logs.
	Logger *zap.Logger
}

// Space is the fleet's guard of etcd's space; *storage.Monitor
// implements it. Its methods answer from memory and are safe for
// concurrent use.
type Space interface {
	// Admit returns why a write that grows etcd's database is refused now
	// (an error wrapping store.ErrHighWater or store.ErrNoSpace), nil if
	// it is admitted.
	Admit() error
	// NoteWriteError is told of each failed write, classified by
	// store.Classify.
	NoteWriteError(err error)
}

// DefaultConfig returns the defaults of the settings, without the
// identity (Namespace, Member) and hooks a registry is given by its
// member. The bursts are left zero: they follow the rates.
func DefaultConfig() Config { return Config{}.WithDefaults() }

// WithDefaults returns c with its zero settings replaced by their
// defaults, except the bursts, which follow the rates New is given (a
// zero RequestBurst is twice RequestRate, a zero WriteBurst the larger of
// DefaultWriteBurst and WriteRate); the identity, hooks, clock and
// logger as they are.
func (c Config) WithDefaults() Config {
	settings.Default(&c.TTL, api.DefaultWorkerTTL)
	settings.Default(&c.IDGrace, DefaultIDGrace)
	settings.Default(&c.UpdateInterval, DefaultUpdateInterval)
	settings.Default(&c.MaxPerCredential, DefaultMaxPerCredential)
	settings.Default(&c.RequestRate, DefaultRequestRate)
	settings.Default(&c.WriteRate, DefaultWriteRate)
	settings.Default(&c.RequestTimeout, 5*time.Second)
	settings.Default(&c.PresenceGrace, DefaultPresenceGrace)
	return c
}

// setDefaults applies WithDefaults, the bursts of the rates, the real
// clock and no logs.
func (c *Config) setDefaults() {
	*c = c.WithDefaults()
	settings.Default(&c.RequestBurst, max(1, int(2*c.RequestRate))) // DefaultRequestBurst at the default rate
	settings.Default(&c.WriteBurst, max(DefaultWriteBurst, int(c.WriteRate)))
	if c.Clock == nil {
		c.Clock = clockwork.NewRealClock()
	}
	if c.Logger == nil {
		c.Logger = zap.NewNop()
	}
}

// AddFlags defines the flags of c's settings in fs, each bound to its
// field with the field's current value as its default (call it on
// DefaultConfig): --worker-ttl, --worker-id-grace,
// --worker-presence-grace, --worker-register-rate and
// --worker-register-writes.
func (c *Config) AddFlags(fs *pflag.FlagSet) {
	fs.DurationVar(&c.TTL, "worker-ttl", c.TTL, "how long a worker's registration lives without a refresh (whole seconds, 2s to 5m); the attempts of a worker silent that long are retried at once")
	fs.DurationVar(&c.IDGrace, "worker-id-grace", c.IDGrace, "how long a worker ID stays bound to the credential that registered it after its registration ended (whole seconds, 1s to 24h); until then another credential cannot use the ID")
	fs.DurationVar(&c.PresenceGrace, "worker-presence-grace", c.PresenceGrace, "how long a worker whose presence stream with this member broke without its end (its connection closed or reset, as when its process dies) has to open a new one before its registration is revoked and its attempts retried at once (at most half --worker-ttl)")
	settings.Unbounded(fs, "worker-presence-grace", "wait for the registration's TTL")
	fs.Float64Var(&c.RequestRate, "worker-register-rate", c.RequestRate, "worker registration requests (refreshes included) each credential may send this member per second, with bursts of twice as many")
	settings.Unbounded(fs, "worker-register-rate", "no limit")
	fs.Float64Var(&c.WriteRate, "worker-register-writes", c.WriteRate, fmt.Sprintf("KiB of worker registrations (new, changed, updated) each credential may make this member write per second, with bursts of %d (or a second's worth); a new or changed registration beyond it gets 429, an update of its active count is skipped", DefaultWriteBurst))
	settings.Unbounded(fs, "worker-register-writes", "no limit")
}

// Validate reports the first problem with c after defaults are applied;
// errors wrap ErrInvalidConfig and name the field, a setting with a flag
// as a *settings.Error naming its key.
func (c Config) Validate() error {
	c.setDefaults()
	bad, invalid := settings.Refusals(ErrInvalidConfig)
	switch {
	case !strings.HasSuffix(c.Namespace, "/"):
		return bad("namespace %q must end in '/'", c.Namespace)
	case c.Member == "":
		return bad("member ID is empty")
	case c.TTL < 2*time.Second || c.TTL > 5*time.Minute || c.TTL%time.Second != 0:
		return invalid("worker-ttl", c.TTL, "want whole seconds from 2s to 5m (0: the default, %v)", api.DefaultWorkerTTL)
	case c.IDGrace < time.Second || c.IDGrace > 24*time.Hour || c.IDGrace%time.Second != 0:
		return invalid("worker-id-grace", c.IDGrace, "want whole seconds from 1s to 24h (0: the default, %v)", DefaultIDGrace)
	case c.UpdateInterval > 0 && c.UpdateInterval < time.Second:
		return bad("update interval %v must be at least 1s (or negative: never on its own)", c.UpdateInterval)
	case c.RequestRate > 0 && c.RequestBurst < 1:
		return bad("request burst %d must be at least 1", c.RequestBurst)
	case c.WriteRate > 0 && c.WriteBurst < maxWriteCost:
		return bad("write burst %d must be at least %d (what the largest registration costs)", c.WriteBurst, maxWriteCost)
	case c.PresenceGrace > c.TTL/2:
		return invalid("worker-presence-grace", c.PresenceGrace, "want at most half --worker-ttl, %v (0: the default, %v; negative: wait for the registration's TTL)", c.TTL/2, DefaultPresenceGrace)
	case c.RequestTimeout <= 0:
		return bad("request timeout %v must be positive", c.RequestTimeout)
	}
	return nil
}

// maxWriteCost is what the largest registration the protocol allows
// costs of the write rate (costOf of about 7 KiB).
const maxWriteCost = 8

// claimTTL is the lease TTL of an ID's binding to its credential, and
// claimRenewal how often a member renews it while the registration lives:
// the binding outlives the registration's end by at least IDGrace (and at
// most claimRenewal more).
func (c Config) claimTTL() time.Duration { return c.TTL + c.IDGrace + c.claimRenewal() }

func (c Config) claimRenewal() time.Duration {
	return min(max(c.IDGrace/4, time.Second), 5*time.Minute)
}

// maxClaims is the most worker IDs one credential holds; negative:
// unbounded.
func (c Config) maxClaims() int {
	if c.MaxPerCredential < 0 {
		return -1
	}
	return 4 * c.MaxPerCredential
}
