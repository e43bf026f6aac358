package deathwatch

import (
	"context"
	"errors"
	"net"
	"strings"
	"time"

	"github.com/jonboulle/clockwork"
	"github.com/spf13/pflag"
	"go.uber.org/zap"

	"github.com/jobfleet/jobfleet/internal/settings"
)

// ErrInvalidConfig means a Config failed validation.
var ErrInvalidConfig = errors.New("deathwatch: invalid config")

// Defaults of Config.
const (
	// DefaultInterval is how often a member's address is probed: with
	// DefaultConfirm, the 200 ms rebalance debounce and an acquisition, a
	// death the held connection does not reveal at once still has its
	// partitions owned again well within a second.
	DefaultInterval = 200 * time.Millisecond
	// DefaultConfirm is the least time between the two refusals that
	// confirm a death: long enough that a refusal from a process just
	// exiting (or a reset in flight) is not counted twice, short against
	// the second the whole failover may take.
	DefaultConfirm = 50 * time.Millisecond
	// DefaultDialTimeout bounds one probe; one that times out is no
	// evidence.
	DefaultDialTimeout = time.Second
	// DefaultRequestTimeout bounds each etcd request of a revocation.
	DefaultRequestTimeout = 2 * time.Second
)

// Config configures a Detector. Its settings follow the zero convention
// of package settings: a zero field takes its default, a negative
// Interval turns the detector off, other negative settings are refused.
// The settings with a flag bind to their fields through AddFlags.
type Config struct {
	// Namespace is the cluster's etcd key prefix, ending in "/".
	Namespace string
	// Self is this member's ID; it is never probed.
	Self string
	// Interval is the time between two probes of one member while no
	// connection to it is held open (ten times that while one is: its end
	// brings the next probe forward). Default DefaultInterval
	// (--dead-member-probe-interval); negative turns the detector off (Run
	// returns at once and the fleet relies on lease expiry alone).
	Interval time.Duration
	// Confirm is the least time between the first refusal and the one
	// that confirms it; below Interval. Default DefaultConfirm, or half
	// Interval if that is less (--dead-member-confirm).
	Confirm time.Duration
	// DialTimeout bounds one probe. Default DefaultDialTimeout.
	DialTimeout time.Duration
	// RequestTimeout bounds each etcd request. Default
	// DefaultRequestTimeout.
	RequestTimeout time.Duration
	// Dial makes one probe's connection; nil is a net.Dialer's
	// DialContext. Tests give their own.
	Dial func(ctx context.Context, network, addr string) (net.Conn, error)
	// Clock paces the probes; nil is the real clock.
	Clock clockwork.Clock
	// Logger receives one line per detection and per revocation; nil
	// means no logs.
	Logger *zap.Logger
	// Metrics records the detector's metrics; nil records nothing.
	Metrics *Metrics
}

// Off reports whether c turns the detector off (a negative Interval).
func (c Config) Off() bool { return c.Interval < 0 }

// DefaultConfig returns the defaults of the settings, without the
// identity (Namespace, Self) and hooks a detector is given by its member.
func DefaultConfig() Config { return Config{}.WithDefaults() }

// WithDefaults returns c with its zero settings replaced by their
// defaults (the identity, hooks, clock and logger as they are).
func (c Config) WithDefaults() Config {
	settings.Default(&c.Interval, DefaultInterval)
	if c.Confirm == 0 {
		c.Confirm = DefaultConfirm
		if c.Interval > 0 {
			c.Confirm = min(c.Confirm, c.Interval/2)
		}
	}
	settings.Default(&c.DialTimeout, DefaultDialTimeout)
	settings.Default(&c.RequestTimeout, DefaultRequestTimeout)
	return c
}

// setDefaults applies WithDefaults, a net.Dialer, the real clock and no
// logs.
func (c *Config) setDefaults() {
	*c = c.WithDefaults()
	if c.Dial == nil {
		var d net.Dialer
		c.Dial = d.DialContext
	}
	if c.Clock == nil {
		c.Clock = clockwork.NewRealClock()
	}
	if c.Logger == nil {
		c.Logger = zap.NewNop()
	}
}

// AddFlags defines the flags of c's settings in fs, each bound to its
// field with the field's current value as its default (call it on
// DefaultConfig): --dead-member-probe-interval and --dead-member-confirm.
func (c *Config) AddFlags(fs *pflag.FlagSet) {
	fs.DurationVar(&c.Interval, "dead-member-probe-interval", c.Interval, "how often this member probes each other member's advertised address (ten times less often while it holds a connection to it open, whose end brings the next probe forward); two refused connections (nothing listens there: its process died) --dead-member-confirm apart revoke that member's lease, so its partitions move at once instead of after its lease TTL")
	settings.Unbounded(fs, "dead-member-probe-interval", "off, a dead member's partitions move after its lease TTL")
	fs.DurationVar(&c.Confirm, "dead-member-confirm", c.Confirm, "the least time between the two refused probes that confirm a member's death (below --dead-member-probe-interval)")
}

// Validate reports the first problem with c after the defaults are
// applied to its zero fields; errors wrap ErrInvalidConfig and name the
// field, a setting with a flag as a *settings.Error naming its key. A
// Config that turns the detector off is valid whatever its other
// timings.
func (c Config) Validate() error {
	c.setDefaults()
	bad, invalid := settings.Refusals(ErrInvalidConfig)
	switch {
	case !strings.HasSuffix(c.Namespace, "/"):
		return bad("namespace %q must end in '/'", c.Namespace)
	case c.Self == "":
		return bad("empty member ID (Self)")
	case c.Off():
		return nil
	case c.Confirm < 0 || c.Confirm >= c.Interval:
		return invalid("dead-member-confirm", c.Confirm, "confirm delay must be at least 0 and below --dead-member-probe-interval, %v (0: the default, %v or half the interval)", c.Interval, DefaultConfirm)
	case c.DialTimeout < 0:
		return bad("dial timeout %v is negative", c.DialTimeout)
	case c.RequestTimeout < 0:
		return bad("request timeout %v is negative", c.RequestTimeout)
	}
	return nil
}
