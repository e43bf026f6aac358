package notify

import (
	"fmt"
	"math"
	"time"

	"github.com/jonboulle/clockwork"
	"go.uber.org/zap"

	"github.com/jobfleet/jobfleet/internal/retry"
)

// Config configures a Deliverer. For every count, 0 means its default
// and a negative value means no bound.
type Config struct {
	// Sender delivers the notifications; required.
	Sender Sender
	// Concurrency is the most deliveries in flight on the member, over
	// all its partitions. Default 32.
	Concurrency int
	// PerDestination is the most deliveries in flight to one destination
	// (the scheme, host and port of the URL). Default 4.
	PerDestination int
	// PerJob is the most deliveries in flight for one job. Default 2.
	PerJob int
	// MaxPendingPerJob is the most notifications a job may have pending:
	// beyond it the oldest are dropped (deleted and counted). Default 64.
	MaxPendingPerJob int
	// SendTimeout bounds one try. Default 10s.
	SendTimeout time.Duration
	// MaxAge is how long a notification is retried, from the status it
	// reports, before it is given up (counted and logged). Default 24h.
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

// withDefaults returns c with its zero fields set to DefaultConfig's and
// its negative counts to no bound.
func (c Config) withDefaults() Config {
	d := DefaultConfig()
	count := func(v *int, def int) {
		switch {
		case *v == 0:
			*v = def
		case *v < 0:
			*v = math.MaxInt
		}
	}
	count(&c.Concurrency, d.Concurrency)
	count(&c.PerDestination, d.PerDestination)
	count(&c.PerJob, d.PerJob)
	count(&c.MaxPendingPerJob, d.MaxPendingPerJob)
	count(&c.BreakerFailures, d.BreakerFailures)
	if c.SendTimeout == 0 {
		c.SendTimeout = d.SendTimeout
	}
	if c.MaxAge == 0 {
		c.MaxAge = d.MaxAge
	}
	if c.Backoff == (retry.Policy{}) {
		c.Backoff = d.Backoff
	}
	if c.BreakerBackoff == (retry.Policy{}) {
		c.BreakerBackoff = d.BreakerBackoff
	}
	if c.DeleteBackoff == (retry.Policy{}) {
		c.DeleteBackoff = d.DeleteBackoff
	}
	if c.Clock == nil {
		c.Clock = clockwork.NewRealClock()
	}
	if c.Logger == nil {
		c.Logger = zap.NewNop()
	}
	return c
}

// Validate reports the first problem with c; errors wrap
// ErrInvalidConfig.
func (c Config) Validate() error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: "+format, append([]any{ErrInvalidConfig}, args...)...)
	}
	policy := func(name string, p retry.Policy) error {
		if p != (retry.Policy{}) && (p.Initial <= 0 || p.Max < p.Initial) {
			return bad("%s back-off %v to %v: want 0 < initial <= max", name, p.Initial, p.Max)
		}
		return nil
	}
	switch {
	case c.Sender == nil:
		return bad("no sender")
	case c.SendTimeout < 0:
		return bad("send timeout %v is negative", c.SendTimeout)
	case c.MaxAge < 0:
		return bad("max age %v is negative", c.MaxAge)
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
