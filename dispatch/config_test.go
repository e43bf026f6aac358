package dispatch_test

import (
	"testing"
	"time"

	"github.com/spf13/pflag"

	"github.com/jobfleet/jobfleet/dispatch"
	"github.com/jobfleet/jobfleet/internal/testkit/configtest"
)

// TestConfigValidate checks that the defaults pass and that each field out
// of range, and each pair of fields that do not fit together, is refused
// with ErrInvalidConfig; a setting with a flag is named by its key.
func TestConfigValidate(t *testing.T) {
	if err := dispatch.DefaultConfig("/jf/", 64, "m1", "http://m1").Validate(); err != nil {
		t.Fatalf("the defaults are refused: %v", err)
	}
	cases := map[string]struct {
		change func(*dispatch.Config)
		key    string // the setting's key, "" for one without a flag
	}{
		"empty namespace":               {func(c *dispatch.Config) { c.Namespace = "" }, ""},
		"namespace without slash":       {func(c *dispatch.Config) { c.Namespace = "/jf" }, ""},
		"no partitions":                 {func(c *dispatch.Config) { c.Partitions = 0 }, ""},
		"too many partitions":           {func(c *dispatch.Config) { c.Partitions = 1 << 20 }, ""},
		"empty member":                  {func(c *dispatch.Config) { c.MemberID = "" }, ""},
		"negative fire batch":           {func(c *dispatch.Config) { c.FireBatch = -1 }, ""},
		"fire batch over a transaction": {func(c *dispatch.Config) { c.FireBatch = 31 }, ""},
		"fires in flight below a batch": {func(c *dispatch.Config) { c.FiresInFlight = 24 }, ""},
		"run lease under 1s":            {func(c *dispatch.Config) { c.RunLease = 999 * time.Millisecond }, "run-lease"},
		"negative run lease":            {func(c *dispatch.Config) { c.RunLease = -time.Second }, "run-lease"},
		"negative active runs":          {func(c *dispatch.Config) { c.MaxActivePerJob = -1 }, ""},
		"negative history":              {func(c *dispatch.Config) { c.HistoryMaxRuns = -1 }, "history-max-runs"},
		"history beyond the job limit":  {func(c *dispatch.Config) { c.HistoryMaxRuns = 100001 }, "history-max-runs"},
		"budget below partitions' share": {func(c *dispatch.Config) {
			c.HistoryBudget = int64(c.Partitions) * 1024
		}, "history-budget"},
		"negative budget":          {func(c *dispatch.Config) { c.HistoryBudget = -1 }, "history-budget"},
		"run budget tiny":          {func(c *dispatch.Config) { c.MaxRunBytes = 10 }, ""},
		"run budget over etcd's":   {func(c *dispatch.Config) { c.MaxRunBytes = 2 << 20 }, ""},
		"negative request timeout": {func(c *dispatch.Config) { c.RequestTimeout = -time.Second }, ""},
		"latency target at the request timeout": {func(c *dispatch.Config) {
			c.CommitLatencyTarget = c.RequestTimeout
		}, ""},
		"negative history floor": {func(c *dispatch.Config) { c.HistoryFloor = -1 }, "history-floor"},
		"history floor over max": {func(c *dispatch.Config) { c.HistoryFloor = 100001 }, "history-floor"},
	}
	for name, tt := range cases {
		c := dispatch.DefaultConfig("/jf/", 64, "m1", "http://m1")
		tt.change(&c)
		configtest.Invalid(t, name, c.Validate(), dispatch.ErrInvalidConfig, "dispatch: invalid config: ", tt.key)
	}
}

// TestConfigZeroConvention: 0 is the default for every setting, and a
// negative value is accepted (unbounded) exactly where the field says so.
func TestConfigZeroConvention(t *testing.T) {
	zero := dispatch.Config{Namespace: "/jf/", Partitions: 64, MemberID: "m1", MemberAddr: "http://m1"}
	if err := zero.Validate(); err != nil {
		t.Fatalf("zero settings (all defaults) are refused: %v", err)
	}
	got, want := zero.WithDefaults(), dispatch.DefaultConfig("/jf/", 64, "m1", "http://m1")
	if got.FireBatch != want.FireBatch || got.LoadsInFlight != want.LoadsInFlight || got.LoadJobsInFlight != want.LoadJobsInFlight ||
		got.HistoryMaxAge != want.HistoryMaxAge || got.DeleteAfter != want.DeleteAfter || got.HistoryFloor != want.HistoryFloor ||
		got.RunLease != want.RunLease || got.HistoryBudget != want.HistoryBudget || got.CommitLatencyTarget != want.CommitLatencyTarget {
		t.Errorf("WithDefaults of zero settings = %+v, want DefaultConfig's %+v", got, want)
	}
	for name, change := range map[string]func(*dispatch.Config){
		"commits in flight":     func(c *dispatch.Config) { c.CommitsInFlight = -1 },
		"commit latency target": func(c *dispatch.Config) { c.CommitLatencyTarget = -time.Millisecond },
		"loads in flight":       func(c *dispatch.Config) { c.LoadsInFlight = -1 },
		"load jobs in flight":   func(c *dispatch.Config) { c.LoadJobsInFlight = -1 },
		"fires in flight":       func(c *dispatch.Config) { c.FiresInFlight = -1 },
		"history max age":       func(c *dispatch.Config) { c.HistoryMaxAge = -time.Second },
		"delete after":          func(c *dispatch.Config) { c.DeleteAfter = -time.Second },
	} {
		c := dispatch.DefaultConfig("/jf/", 64, "m1", "http://m1")
		change(&c)
		if err := c.Validate(); err != nil {
			t.Errorf("negative %s (unbounded) is refused: %v", name, err)
		}
	}
}

// TestConfigFlags: the flags show DefaultConfig's values and set the
// fields they are bound to.
func TestConfigFlags(t *testing.T) {
	c := dispatch.DefaultConfig("/jf/", 64, "m1", "http://m1")
	fs := pflag.NewFlagSet("test", pflag.ContinueOnError)
	c.AddFlags(fs)
	for name, want := range map[string]string{
		"run-lease": "30s", "loads-in-flight": "16", "load-jobs-in-flight": "2048", "history-max-runs": "100",
		"history-max-age": "720h0m0s", "history-budget": "1GiB", "delete-after": "168h0m0s", "history-floor": "3",
	} {
		f := fs.Lookup(name)
		if f == nil || f.DefValue != want {
			t.Errorf("--%s: %+v, want the default %s", name, f, want)
		}
	}
	if err := fs.Parse([]string{"--load-jobs-in-flight=-1", "--history-budget=2GiB", "--delete-after=-1s"}); err != nil {
		t.Fatal(err)
	}
	if c.LoadJobsInFlight != -1 || c.HistoryBudget != 2<<30 || c.DeleteAfter != -time.Second {
		t.Errorf("flags set %d, %d, %v; want -1, 2GiB, -1s", c.LoadJobsInFlight, c.HistoryBudget, c.DeleteAfter)
	}
}
