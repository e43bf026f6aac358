package dispatch_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/jobfleet/jobfleet/dispatch"
)

// TestConfigValidate checks that the defaults pass and that each field out
// of range, and each pair of fields that do not fit together, is refused
// with ErrInvalidConfig.
func TestConfigValidate(t *testing.T) {
	if err := dispatch.DefaultConfig("/jf/", 64, "m1", "http://m1").Validate(); err != nil {
		t.Fatalf("the defaults are refused: %v", err)
	}
	cases := map[string]func(*dispatch.Config){
		"empty namespace":               func(c *dispatch.Config) { c.Namespace = "" },
		"namespace without slash":       func(c *dispatch.Config) { c.Namespace = "/jf" },
		"no partitions":                 func(c *dispatch.Config) { c.Partitions = 0 },
		"too many partitions":           func(c *dispatch.Config) { c.Partitions = 1 << 20 },
		"empty member":                  func(c *dispatch.Config) { c.MemberID = "" },
		"fire batch 0":                  func(c *dispatch.Config) { c.FireBatch = 0 },
		"fire batch over a transaction": func(c *dispatch.Config) { c.FireBatch = 31 },
		"negative commits in flight":    func(c *dispatch.Config) { c.CommitsInFlight = -1 },
		"negative loads in flight":      func(c *dispatch.Config) { c.LoadsInFlight = -1 },
		"run lease under 1s":            func(c *dispatch.Config) { c.RunLease = 999 * time.Millisecond },
		"no active runs":                func(c *dispatch.Config) { c.MaxActivePerJob = 0 },
		"no history":                    func(c *dispatch.Config) { c.HistoryMaxRuns = 0 },
		"negative history age":          func(c *dispatch.Config) { c.HistoryMaxAge = -time.Second },
		"budget below partitions' share": func(c *dispatch.Config) {
			c.HistoryBudget = int64(c.Partitions) * 1024
		},
		"run budget tiny":          func(c *dispatch.Config) { c.MaxRunBytes = 10 },
		"run budget over etcd's":   func(c *dispatch.Config) { c.MaxRunBytes = 2 << 20 },
		"no request timeout":       func(c *dispatch.Config) { c.RequestTimeout = 0 },
		"negative request timeout": func(c *dispatch.Config) { c.RequestTimeout = -time.Second },
		"negative latency target":  func(c *dispatch.Config) { c.CommitLatencyTarget = -time.Millisecond },
		"latency target at the request timeout": func(c *dispatch.Config) {
			c.CommitLatencyTarget = c.RequestTimeout
		},
	}
	for name, change := range cases {
		c := dispatch.DefaultConfig("/jf/", 64, "m1", "http://m1")
		change(&c)
		err := c.Validate()
		if !errors.Is(err, dispatch.ErrInvalidConfig) {
			t.Errorf("%s: Validate = %v, want ErrInvalidConfig", name, err)
			continue
		}
		if !strings.HasPrefix(err.Error(), "dispatch: invalid config: ") {
			t.Errorf("%s: %q does not start with the package's prefix", name, err)
		}
	}
}
