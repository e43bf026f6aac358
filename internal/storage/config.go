package storage

import (
	"time"

	"github.com/jonboulle/clockwork"
	"go.uber.org/zap"

	"github.com/jobfleet/jobfleet/internal/settings"
)

// Defaults of Config.
const (
	// DefaultCompactionInterval is how often the fleet compacts, and how
	// much history it keeps: kube-apiserver's choice for its etcd.
	DefaultCompactionInterval = 5 * time.Minute
	// CompactionOff as Config.CompactionInterval leaves compaction to
	// etcd's own --auto-compaction-mode and --auto-compaction-retention.
	CompactionOff time.Duration = -1
	// DefaultQuotaBytes is etcd's default --quota-backend-bytes, 2 GiB,
	// assumed when neither Config.QuotaBytes nor etcd says otherwise.
	DefaultQuotaBytes = 2 << 30
	// DefaultHighWater is the fraction of the quota above which new work
	// is refused.
	DefaultHighWater = 0.8
	// DefaultCheckInterval is how often the database size and the alarms
	// are read.
	DefaultCheckInterval = 10 * time.Second
	// DefaultRequestTimeout bounds each etcd request.
	DefaultRequestTimeout = 5 * time.Second
	// MinCompactionGap is the least time between two compactions a
	// member makes when history grows fast (Config.CompactionBytes), and
	// so the least history kept: a watcher less than this behind never
	// loses history it still needs.
	MinCompactionGap = time.Second
	// minCompactionBytes is the least history size that starts a
	// compaction by default (a quota of a few MiB).
	minCompactionBytes = 1 << 20
)

// Config configures a member's Compactor and Monitor. A zero setting
// means its default; a negative CompactionInterval turns the fleet's
// compaction off, other negative settings are refused.
type Config struct {
	// Namespace is the fleet's etcd key prefix, ending in "/". The
	// compaction record lives at <Namespace>compaction.
	Namespace string
	// Member is this member's ID, recorded with the compactions it makes.
	Member string
	// CompactionInterval is how often one member of the fleet compacts,
	// and the age of the revision it compacts to (the history kept).
	// Default DefaultCompactionInterval; CompactionOff (any negative
	// value) turns the fleet's compaction off.
	CompactionInterval time.Duration
	// CompactionBytes is the history written since the last compaction
	// above which a member compacts at once, without waiting for the end
	// of the interval: etcd keeps every version of every key written until
	// it is compacted, and a fleet written to fast (by its work, or by a
	// caller within its write budget) may fill the quota's room within an
	// interval. History is measured as the growth of etcd's database in
	// use since the check after the last compaction, and as the bytes this
	// member's API wrote meanwhile (NoteWritten), whichever is larger.
	// Such compactions are at least MinCompactionGap apart, each to the
	// revision of the one before. 0 means a quarter of the room between
	// the high-water mark and the quota ((1 − HighWater) × quota / 4, at
	// least 1 MiB): 102 MiB of etcd's default 2 GiB; a negative value
	// compacts on the clock only.
	CompactionBytes int64
	// QuotaBytes is etcd's space quota (its --quota-backend-bytes). 0
	// takes the quota etcd reports (etcd v3.6 and later report it in
	// their status), or DefaultQuotaBytes from an etcd that does not; when
	// both are known the smaller one counts.
	QuotaBytes int64
	// HighWater is the fraction of the quota, in (0, 1], above which
	// writes that grow the database are refused. Default
	// DefaultHighWater.
	HighWater float64
	// CheckInterval is how often the Monitor reads sizes and alarms.
	// Default DefaultCheckInterval.
	CheckInterval time.Duration
	// RequestTimeout bounds each etcd request. Default
	// DefaultRequestTimeout.
	RequestTimeout time.Duration
	// Clock drives both loops; nil is the real clock.
	Clock clockwork.Clock
	// Logger; nil means no logs.
	Logger *zap.Logger
	// Metrics; nil records nothing.
	Metrics *Metrics
}

// DefaultConfig returns the defaults for member of namespace ns.
func DefaultConfig(ns, member string) Config {
	c := Config{Namespace: ns, Member: member}
	c.setDefaults()
	return c
}

func (c *Config) setDefaults() {
	settings.Default(&c.CompactionInterval, DefaultCompactionInterval)
	if c.CompactionInterval < 0 {
		c.CompactionInterval = CompactionOff
	}
	settings.Default(&c.HighWater, DefaultHighWater)
	settings.Default(&c.CheckInterval, DefaultCheckInterval)
	settings.Default(&c.RequestTimeout, DefaultRequestTimeout)
	if c.Clock == nil {
		c.Clock = clockwork.NewRealClock()
	}
	if c.Logger == nil {
		c.Logger = zap.NewNop()
	}
}

// Validate reports the first problem with c, defaults applied: a field
// out of its range. Errors wrap ErrInvalidConfig and start with
// "storage: invalid config".
func (c Config) Validate() error {
	c.setDefaults()
	bad, invalid := settings.Refusals(ErrInvalidConfig)
	switch {
	case c.Namespace == "" || c.Namespace[len(c.Namespace)-1] != '/':
		return bad("namespace %q must end in '/'", c.Namespace)
	case c.Member == "":
		return bad("empty member ID")
	case c.CompactionInterval > 0 && c.CompactionInterval < time.Second:
		return invalid("compaction-interval", c.CompactionInterval, "want at least 1s: watchers need time to catch up (0: the default, 5m; negative: no compaction by the fleet)")
	case c.QuotaBytes < 0:
		return invalid("etcd-quota-bytes", c.QuotaBytes, "want a size (0: what etcd reports)")
	case !(c.HighWater > 0 && c.HighWater <= 1):
		return invalid("storage-high-water", c.HighWater, "want a fraction of the quota, above 0 and at most 1, like 0.8 (0: the default)")
	case c.CheckInterval < 10*time.Millisecond:
		return invalid("storage-check-interval", c.CheckInterval, "want at least 10ms (0: the default, 10s)")
	case c.RequestTimeout <= 0:
		return bad("request timeout %v must be positive", c.RequestTimeout)
	}
	return nil
}
