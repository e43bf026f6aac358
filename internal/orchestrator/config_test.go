package orchestrator_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/jobfleet/jobfleet/internal/orchestrator"
	"github.com/jobfleet/jobfleet/store"
)

// TestConfigValidate checks that the defaults pass and that each field out
// of range is refused with ErrInvalidConfig, by Validate and by New.
func TestConfigValidate(t *testing.T) {
	if err := orchestrator.DefaultConfig("m1", "http://m1").Validate(); err != nil {
		t.Fatalf("the defaults are refused: %v", err)
	}
	cases := map[string]func(*orchestrator.Config){
		"empty ID":                 func(c *orchestrator.Config) { c.ID = "" },
		"ID with a slash":          func(c *orchestrator.Config) { c.ID = "a/b" },
		"namespace without slash":  func(c *orchestrator.Config) { c.Namespace = "/jf" },
		"negative partitions":      func(c *orchestrator.Config) { c.Partitions = -1 },
		"too many partitions":      func(c *orchestrator.Config) { c.Partitions = 1 << 20 },
		"lease TTL not whole":      func(c *orchestrator.Config) { c.LeaseTTL = 1500 * time.Millisecond },
		"lease TTL under 1s":       func(c *orchestrator.Config) { c.LeaseTTL = -time.Second },
		"negative rebalance delay": func(c *orchestrator.Config) { c.RebalanceDelay = -time.Second },
		"negative leave timeout":   func(c *orchestrator.Config) { c.LeaveTimeout = -time.Second },
		"run lease under 1s":       func(c *orchestrator.Config) { c.RunLease = time.Millisecond },
		"negative history runs":    func(c *orchestrator.Config) { c.HistoryMaxRuns = -1 },
		"negative history budget":  func(c *orchestrator.Config) { c.HistoryBudget = -1 },
		"worker TTL under 2s":      func(c *orchestrator.Config) { c.Workers.TTL = time.Second },
		"worker TTL not whole":     func(c *orchestrator.Config) { c.Workers.TTL = 2500 * time.Millisecond },
		"worker ID grace under 1s": func(c *orchestrator.Config) { c.Workers.IDGrace = time.Millisecond },
		"worker write burst 1":     func(c *orchestrator.Config) { c.Workers.WriteBurst = 1 },
		"notify URL not http":      func(c *orchestrator.Config) { c.Notify.URL = "ftp://x/" },
		"notify on unknown status": func(c *orchestrator.Config) { c.Notify.URL, c.Notify.On = "https://x/", []store.RunStatus{"running"} },
		"negative notify max age":  func(c *orchestrator.Config) { c.Notify.MaxAge = -time.Second },
		"admin secret too short":   func(c *orchestrator.Config) { c.AdminSecret = "short" },
	}
	for name, change := range cases {
		c := orchestrator.DefaultConfig("m1", "http://m1")
		change(&c)
		err := c.Validate()
		if !errors.Is(err, orchestrator.ErrInvalidConfig) {
			t.Errorf("%s: Validate = %v, want ErrInvalidConfig", name, err)
			continue
		}
		if !strings.HasPrefix(err.Error(), "orchestrator: invalid config: ") {
			t.Errorf("%s: %q does not start with the package's prefix", name, err)
		}
		if _, err := orchestrator.New(nil, c); !errors.Is(err, orchestrator.ErrInvalidConfig) {
			t.Errorf("%s: New = %v, want ErrInvalidConfig", name, err)
		}
	}
}
