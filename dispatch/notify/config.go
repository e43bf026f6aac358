package notify

import (
	"fmt"
	"math"
	"time"

	"github.com/jonboulle/clockwork"
	"github.com/spf13/pflag"
	"go.uber.org/zap"

	"github.com/jobfleet/jobfleet/internal/retry"
	"github.com/jobfleet/jobfleet/internal/settings"
)

// Config configures a Deliverer. Its settings follow the zero convention
// of package settings: for every count and duration, 0 means its default;
// a negative count means no bound, a negative duration is refused. The
// settings with a flag bind to their fields through AddFlags.
type Config struct {
	// Sender delivers the notifications; New requires it.
	Sender Sender
	// Concurrency is the most deliveries in flight on the member, over
	// all its partitions. Default 32 (--notify-in-flight).
	Concurrency int
	// PerDestination is the most deliveries in flight to one destination
	// (the scheme, host and port of the URL). Default 4.
	PerDestination int
	// PerJob is the most deliveries in flight for one job. Default 2.
	PerJob int
	// MaxPendingPerJob is the most notifications a job may have pending:
	// beyond it the oldest are dropped (deleted and counted). Default 64
	// (--notify-max-pending).
	MaxPendingPerJob int
	// SendTimeout bounds one try. Default 10s.
	SendTimeout time.Duration
	// MaxAge is how long a notification is retried, from the status it
	// reports, before it is given up (counted and logged). Default 24h
	// (--notify-max-age).
	MaxAge time.Duration
	// Backoff paces one notification's tries after a failure. Default 1s
	// growing to 5m.
	Backoff retry.Policy
	// BreakerFailures is how many failed tries in a row open a
	// destination's circuit. Default 3.
	BreakerFailures int
	// BreakerBackoff is how long an open circuit stays open before one
	// probe is tried, lengthening with every failed probe. Default 5s
	// growing to 5m.
	BreakerBackoff retry.Policy
	// DeleteBackoff paces the retries of a failed deletion. Default
	// retry.Etcd.
	DeleteBackoff retry.Policy
	// Clock; nil is the real clock.
	Clock clockwork.Clock
	// Logger; nil logs nothing.
	Logger *zap.Logger
	// Metrics; nil records nothing.
	Metrics *Metrics
}

// Defaults.
const (
	DefaultConcurrency      = 32
	DefaultPerDestination   = 4
	DefaultPerJob           = 2
	DefaultMaxPendingPerJob = 64
	DefaultSendTimeout      = 10 * time.Second
	DefaultMaxAge           = 24 * time.Hour
	DefaultBreakerFailures  = 3
)

// DefaultConfig returns the defaults, without a Sender.
func DefaultConfig() Config {
	return Config{
		Concurrency:      DefaultConcurrency,
		PerDestination:   DefaultPerDestination,
		PerJob:           DefaultPerJob,
		MaxPendingPerJob: DefaultMaxPendingPerJob,
		SendTimeout:      DefaultSendTimeout,
		MaxAge:           DefaultMaxAge,
		Backoff:          retry.Policy{Initial: time.Second, Max: 5 * time.Minute},
		BreakerFailures:  DefaultBreakerFailures,
		BreakerBackoff:   retry.Policy{Initial: 5 * time.Second, Max: 5 * time.Minute},
		DeleteBackoff:    retry.Etcd,
	}
}

// WithDefaults returns c with its zero settings replaced by
// DefaultConfig's (negative counts as they are; the sender, clock, logger
// and metrics as they are).
func (c Config) WithDefaults() Config {
	d := DefaultConfig()
	settings.Default(&c.Concurrency, d.Concurrency)
	settings.Default(&c.PerDestination, d.PerDestination)
	settings.Default(&c.PerJob, d.PerJob)
	settings.Default(&c.MaxPendingPerJob, d.MaxPendingPerJob)
	settings.Default(&c.BreakerFailures, d.BreakerFailures)
	settings.Default(&c.SendTimeout, d.SendTimeout)
	settings.Default(&c.MaxAge, d.MaxAge)
	if c.Backoff == (retry.Policy{}) {
		c.Backoff = d.Backoff
	}
	if c.BreakerBackoff == (retry.Policy{}) {
		c.BreakerBackoff = d.BreakerBackoff
	}
	if c.DeleteBackoff == (retry.Policy{}) {
		c.DeleteBackoff = d.DeleteBackoff
	}
	return c
}

// withDefaults returns c with its zero fields set to DefaultConfig's, its
// negative counts to no bound, and the real clock and no logs for a nil
// Clock and Logger.
func (c Config) withDefaults() Config {
	c = c.WithDefaults()
	for _, v := range []*int{&c.Concurrency, &c.PerDestination, &c.PerJob, &c.MaxPendingPerJob, &c.BreakerFailures} {
		if *v < 0 {
			*v = math.MaxInt
		}
	}
	if c.Clock == nil {
		c.Clock = clockwork.NewRealClock()
	}
	if c.Logger == nil {
		c.Logger = zap.NewNop()
	}
	return c
}

// AddFlags defines the flags of c's settings in fs, each bound to its
// field with the field's current value as its default (call it on
// DefaultConfig): --notify-max-pending, --notify-in-flight and
// --notify-max-age.
func (c *Config) AddFlags(fs *pflag.FlagSet) {
	fs.IntVar(&c.MaxPendingPerJob, "notify-max-pending", c.MaxPendingPerJob, "pending notifications kept per job: beyond it the oldest are dropped (counted in jobfleet_notifications_total{result=\"dropped\"})")
	settings.Unbounded(fs, "notify-max-pending", "no bound")
	fs.IntVar(&c.Concurrency, "notify-in-flight", c.Concurrency, fmt.Sprintf("notification deliveries in flight at once on this member (at most %d to one destination, %d for one job)", DefaultPerDestination, DefaultPerJob))
	settings.Unbounded(fs, "notify-in-flight", "no bound")
	fs.DurationVar(&c.MaxAge, "notify-max-age", c.MaxAge, "how long an undelivered notification is retried before it is given up (counted in jobfleet_notifications_total{result=\"given_up\"})")
}

// Validate reports the first problem with c's settings (New also needs a
// Sender); errors wrap ErrInvalidConfig, a setting with a flag is
// reported as a *settings.Error naming its key.
func (c Config) Validate() error {
	bad, _ := settings.Refusals(ErrInvalidConfig)
	policy := func(name string, p retry.Policy) error {
		if p != (retry.Policy{}) && (p.Initial <= 0 || p.Max < p.Initial) {
			return bad("%s back-off %v to %v: want 0 < initial <= max", name, p.Initial, p.Max)
		}
		return nil
	}
	switch {
	case c.SendTimeout < 0:
		return bad("send timeout %v is negative", c.SendTimeout)
	case c.MaxAge < 0:
		return fmt.Errorf("%w: %w", ErrInvalidConfig, settings.Invalid("notify-max-age", c.MaxAge, "want a positive duration (0: the default, %v): notifications are not retried forever", DefaultMaxAge))
	}
	for _, p := range []struct {
		name string
		p    retry.Policy
	}{{"notification", c.Backoff}, {"breaker", c.BreakerBackoff}, {"deletion", c.DeleteBackoff}} {
		if err := policy(p.name, p.p); err != nil {
			return err
		}
	}
	return nil
}
