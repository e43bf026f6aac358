package admin

import (
	"errors"
	"fmt"

	"github.com/spf13/pflag"

	"github.com/jobfleet/jobfleet/internal/settings"
)

// ErrInvalidConfig means a Config's settings failed Validate.
var ErrInvalidConfig = errors.New("admin: invalid config")

// DefaultConfig returns the defaults of the API's settings written out:
// DefaultLimits and the per-job trigger limit. The other fields are the
// caller's to fill.
func DefaultConfig() Config {
	return Config{Limits: DefaultLimits(), TriggerRate: DefaultTriggerRate, TriggerBurst: DefaultTriggerBurst}
}

// WithDefaults returns c with its zero settings (Limits, TriggerRate,
// TriggerBurst) replaced by their defaults; the other fields as they are.
func (c Config) WithDefaults() Config {
	c.Limits = c.Limits.withDefaults()
	if c.TriggerRate == 0 {
		c.TriggerRate = DefaultTriggerRate
	}
	if c.TriggerBurst == 0 {
		c.TriggerBurst = DefaultTriggerBurst
	}
	return c
}

// AddFlags defines the flags of c's settings in fs, each bound to its
// field with the field's current value as its default (call it on
// DefaultConfig): --api-rate, --api-burst, --api-write-bytes,
// --api-write-bytes-burst, --api-write-revisions,
// --api-write-revisions-burst, --max-polls,
// --max-polls-per-credential, --max-streams,
// --max-streams-per-credential, --trigger-rate and --trigger-burst.
func (c *Config) AddFlags(fs *pflag.FlagSet) {
	l := &c.Limits
	fs.Float64Var(&l.Rate, "api-rate", l.Rate, "requests per second each credential may make to the API, worker protocol excluded: a ceiling; the write budgets bound what requests store")
	settings.Unbounded(fs, "api-rate", "no limit")
	fs.IntVar(&l.Burst, "api-burst", l.Burst, "burst of --api-rate")
	fs.Float64Var(&l.WriteBytes, "api-write-bytes", l.WriteBytes, "bytes per second of etcd writes each credential may cause through this member, worker protocol included; beyond, 429; 0: a sixteenth of the room between the etcd quota's high-water mark and the quota (25.6 MiB/s on 2 GiB), bursts of a quarter")
	settings.Unbounded(fs, "api-write-bytes", "no budget")
	fs.IntVar(&l.WriteBytesBurst, "api-write-bytes-burst", l.WriteBytesBurst, "burst of a --api-write-bytes set, in bytes (0: the larger of it and 4 MiB)")
	fs.Float64Var(&l.WriteRevisions, "api-write-revisions", l.WriteRevisions, "key versions per second each credential may write to etcd through this member; beyond, 429")
	settings.Unbounded(fs, "api-write-revisions", "no budget")
	fs.IntVar(&l.WriteRevisionsBurst, "api-write-revisions-burst", l.WriteRevisionsBurst, "burst of --api-write-revisions")
	fs.IntVar(&l.MaxPolls, "max-polls", l.MaxPolls, "worker long polls this member holds at once")
	fs.IntVar(&l.MaxPollsPerCredential, "max-polls-per-credential", l.MaxPollsPerCredential, "worker long polls this member holds at once per credential (at most --max-polls)")
	fs.IntVar(&l.MaxStreams, "max-streams", l.MaxStreams, "partition streams (the console's live map) this member serves at once")
	fs.IntVar(&l.MaxStreamsPerCredential, "max-streams-per-credential", l.MaxStreamsPerCredential, "partition streams this member serves at once per credential")
	fs.Float64Var(&c.TriggerRate, "trigger-rate", c.TriggerRate, "manual triggers accepted per second per job on this member (beyond: 429)")
	settings.Unbounded(fs, "trigger-rate", "no limit")
	fs.IntVar(&c.TriggerBurst, "trigger-burst", c.TriggerBurst, "manual triggers of one job this member accepts at once")
}

// Validate reports the first of c's settings (Limits, TriggerRate,
// TriggerBurst) that makes no sense, as a *settings.Error naming it,
// wrapped in ErrInvalidConfig. Zero settings are their defaults.
func (c Config) Validate() error {
	err := c.Limits.Validate()
	if err == nil && c.TriggerBurst < 0 {
		err = settings.Invalid("trigger-burst", c.TriggerBurst, "want at least 1 (0: the default, %d)", DefaultTriggerBurst)
	}
	if err != nil {
		return fmt.Errorf("%w: %w", ErrInvalidConfig, err)
	}
	return nil
}
