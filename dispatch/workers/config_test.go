package workers_test

import (
	"testing"
	"time"

	"github.com/spf13/pflag"

	"github.com/jobfleet/jobfleet/api"
	"github.com/jobfleet/jobfleet/dispatch/workers"
	"github.com/jobfleet/jobfleet/internal/testkit/configtest"
)

// TestConfigSettings: the flags show DefaultConfig's values and set
// their fields; zero settings are the defaults, negative rates no limit;
// a setting out of range is refused naming its key.
func TestConfigSettings(t *testing.T) {
	c := workers.DefaultConfig()
	fs := pflag.NewFlagSet("test", pflag.ContinueOnError)
	c.AddFlags(fs)
	for name, want := range map[string]string{
		"worker-ttl": api.DefaultWorkerTTL.String(), "worker-id-grace": "15m0s", "worker-register-rate": "1000", "worker-register-writes": "10",
	} {
		if f := fs.Lookup(name); f == nil || f.DefValue != want {
			t.Errorf("--%s: %+v, want the default %s", name, f, want)
		}
	}
	if err := fs.Parse([]string{"--worker-ttl=9s", "--worker-id-grace=1h", "--worker-register-rate=-1", "--worker-register-writes=20"}); err != nil {
		t.Fatal(err)
	}
	if c.TTL != 9*time.Second || c.IDGrace != time.Hour || c.RequestRate != -1 || c.WriteRate != 20 {
		t.Errorf("flags set %v, %v, %v, %v", c.TTL, c.IDGrace, c.RequestRate, c.WriteRate)
	}
	id := func(c workers.Config) workers.Config { c.Namespace, c.Member = "/jf/", "m1"; return c }
	if err := id(c).Validate(); err != nil {
		t.Errorf("no limit on the rates is refused: %v", err)
	}
	if got, want := (workers.Config{}).WithDefaults(), workers.DefaultConfig(); got.TTL != want.TTL || got.IDGrace != want.IDGrace ||
		got.RequestRate != want.RequestRate || got.WriteRate != want.WriteRate || got.RequestBurst != 0 || got.WriteBurst != 0 {
		t.Errorf("WithDefaults of zero settings = %+v, want %+v with the bursts left to the rates", got, want)
	}
	for name, tt := range map[string]struct {
		change func(*workers.Config)
		key    string
	}{
		"negative TTL":         {func(c *workers.Config) { c.TTL = -time.Second }, "worker-ttl"},
		"TTL not whole":        {func(c *workers.Config) { c.TTL = 2500 * time.Millisecond }, "worker-ttl"},
		"TTL above 5m":         {func(c *workers.Config) { c.TTL = 6 * time.Minute }, "worker-ttl"},
		"negative ID grace":    {func(c *workers.Config) { c.IDGrace = -time.Second }, "worker-id-grace"},
		"ID grace above a day": {func(c *workers.Config) { c.IDGrace = 25 * time.Hour }, "worker-id-grace"},
		"write burst 1":        {func(c *workers.Config) { c.WriteBurst = 1 }, ""},
	} {
		c := id(workers.DefaultConfig())
		tt.change(&c)
		configtest.Invalid(t, name, c.Validate(), workers.ErrInvalidConfig, "", tt.key)
	}
}
