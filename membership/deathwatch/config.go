package deathwatch

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"time"

	"github.com/jonboulle/clockwork"
	"go.uber.org/zap"
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

// Config configures a Detector. Zero fields take the defaults.
type Config struct {
	// Namespace is the cluster's etcd key prefix, ending in "/".
	Namespace string
	// Self is this member's ID; it is never probed.
	Self string
	// Interval is the time between two probes of one member while no
	// connection to it is held open (ten times that while one is: its end
	// brings the next probe forward). Default DefaultInterval; negative
	// turns the detector off (Run returns at once and the fleet relies on
	// lease expiry alone).
	Interval time.Duration
	// Confirm is the least time between the first refusal and the one
	// that confirms it; below Interval. Default DefaultConfirm.
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

func (c *Config) setDefaults() {
	if c.Interval == 0 {
		c.Interval = DefaultInterval
	}
	if c.Confirm == 0 {
		c.Confirm = min(DefaultConfirm, c.Interval/2)
	}
	if c.DialTimeout == 0 {
		c.DialTimeout = DefaultDialTimeout
	}
	if c.RequestTimeout == 0 {
		c.RequestTimeout = DefaultRequestTimeout
	}
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

// Validate reports the first problem with c after the defaults are
// applied to its zero fields; errors wrap ErrInvalidConfig and name the
// field. A Config that turns the detector off is valid whatever its
// other timings.
func (c Config) Validate() error {
	c.setDefaults()
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: "+format, append([]any{ErrInvalidConfig}, args...)...)
	}
	switch {
	case !strings.HasSuffix(c.Namespace, "/"):
		return bad("namespace %q must end in '/'", c.Namespace)
	case c.Self == "":
		return bad("empty member ID (Self)")
	case c.Off():
		return nil
	case c.Confirm < 0 || c.Confirm >= c.Interval:
		return bad("confirm delay %v must be at least 0 and below the probe interval %v", c.Confirm, c.Interval)
	case c.DialTimeout < 0:
		return bad("dial timeout %v is negative", c.DialTimeout)
	case c.RequestTimeout < 0:
		return bad("request timeout %v is negative", c.RequestTimeout)
	}
	return nil
}
