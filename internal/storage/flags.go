package storage

import (
	"github.com/spf13/pflag"

	"github.com/jobfleet/jobfleet/internal/settings"
)

// WithDefaults returns c with its zero settings replaced by their
// defaults (the identity fields, the clock, the logger and the metrics as
// they are).
func (c Config) WithDefaults() Config {
	clock, lg := c.Clock, c.Logger
	c.setDefaults()
	c.Clock, c.Logger = clock, lg
	return c
}

// AddFlags defines the flags of c's settings in fs, each bound to its
// field with the field's current value as its default (call it on
// DefaultConfig): --compaction-interval, --compaction-bytes,
// --etcd-quota-bytes,
// --storage-high-water and --storage-check-interval.
func (c *Config) AddFlags(fs *pflag.FlagSet) {
	fs.DurationVar(&c.CompactionInterval, "compaction-interval", c.CompactionInterval, "how often the fleet compacts etcd's history, keeping this much of it (at least 1s)")
	settings.Unbounded(fs, "compaction-interval", "the fleet never compacts, leaving it to etcd's own --auto-compaction-*")
	settings.BytesVar(fs, &c.CompactionBytes, "compaction-bytes", c.CompactionBytes, "etcd history written since the last compaction above which a member compacts at once, at most every second (like 64MiB); 0: a quarter of the room between the quota's high-water mark and the quota (102 MiB of 2 GiB)")
	settings.BytesVar(fs, &c.QuotaBytes, "etcd-quota-bytes", c.QuotaBytes, "etcd's space quota: set it to etcd's --quota-backend-bytes (like 8GiB); 0 takes what etcd reports (v3.6+), else etcd's default 2GiB")
	fs.Float64Var(&c.HighWater, "storage-high-water", c.HighWater, "fraction of the etcd quota above which new jobs, replacements that do not shrink their job, and triggers are refused with 507 (above 0, at most 1)")
	fs.DurationVar(&c.CheckInterval, "storage-check-interval", c.CheckInterval, "how often each member reads etcd's database size and alarms (at least 10ms)")
}
