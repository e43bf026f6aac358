package orchestrator_test

import (
	"errors"
	"testing"
	"time"

	"github.com/jobfleet/jobfleet/api"

	"github.com/spf13/pflag"

	"github.com/jobfleet/jobfleet/internal/orchestrator"
	"github.com/jobfleet/jobfleet/internal/testkit/configtest"
)

// TestConfigValidate checks that the defaults pass and that each field out
// of range is refused with ErrInvalidConfig, by Validate and by New, with
// the setting's key when it has a flag (its own, or one of Dispatch's or
// Storage's).
func TestConfigValidate(t *testing.T) {
	if err := orchestrator.DefaultConfig("m1", "http://m1").Validate(); err != nil {
		t.Fatalf("the defaults are refused: %v", err)
	}
	if err := (orchestrator.Config{ID: "m1"}).Validate(); err != nil {
		t.Fatalf("zero settings (the defaults) are refused: %v", err)
	}
	cases := map[string]struct {
		change func(*orchestrator.Config)
		key    string
	}{
		"empty ID":                 {func(c *orchestrator.Config) { c.ID = "" }, "id"},
		"ID with a slash":          {func(c *orchestrator.Config) { c.ID = "a/b" }, "id"},
		"namespace without slash":  {func(c *orchestrator.Config) { c.Namespace = "/jf" }, "namespace"},
		"negative partitions":      {func(c *orchestrator.Config) { c.Partitions = -1 }, "partitions"},
		"too many partitions":      {func(c *orchestrator.Config) { c.Partitions = 1 << 20 }, "partitions"},
		"lease TTL not whole":      {func(c *orchestrator.Config) { c.LeaseTTL = 1500 * time.Millisecond }, "lease-ttl"},
		"negative lease TTL":       {func(c *orchestrator.Config) { c.LeaseTTL = -time.Second }, "lease-ttl"},
		"negative rebalance delay": {func(c *orchestrator.Config) { c.RebalanceDelay = -time.Second }, ""},
		"negative leave timeout":   {func(c *orchestrator.Config) { c.LeaveTimeout = -time.Second }, ""},
		"run lease under 1s":       {func(c *orchestrator.Config) { c.Dispatch.RunLease = time.Millisecond }, "run-lease"},
		"negative history runs":    {func(c *orchestrator.Config) { c.Dispatch.HistoryMaxRuns = -1 }, "history-max-runs"},
		"negative history budget":  {func(c *orchestrator.Config) { c.Dispatch.HistoryBudget = -1 }, "history-budget"},
		"budget below 1024 shares": {func(c *orchestrator.Config) { c.Dispatch.HistoryBudget = 1 << 20 }, "history-budget"},
		"worker TTL under 2s":      {func(c *orchestrator.Config) { c.Workers.TTL = time.Second }, "worker-ttl"},
		"worker TTL not whole":     {func(c *orchestrator.Config) { c.Workers.TTL = 2500 * time.Millisecond }, "worker-ttl"},
		"worker ID grace under 1s": {func(c *orchestrator.Config) { c.Workers.IDGrace = time.Millisecond }, "worker-id-grace"},
		"negative worker ID grace": {func(c *orchestrator.Config) { c.Workers.IDGrace = -time.Second }, "worker-id-grace"},
		"worker write burst 1":     {func(c *orchestrator.Config) { c.Workers.WriteBurst = 1 }, ""},
		"negative history floor":   {func(c *orchestrator.Config) { c.Dispatch.HistoryFloor = -1 }, "history-floor"},
		"history floor over max":   {func(c *orchestrator.Config) { c.Dispatch.HistoryFloor = 100001 }, "history-floor"},
		"notify URL not http":      {func(c *orchestrator.Config) { c.Notify.URL = "ftp://x/" }, "notify-url"},
		"notify on unknown status": {func(c *orchestrator.Config) { c.Notify.URL, c.Notify.On = "https://x/", []api.RunStatus{"running"} }, "notify-on"},
		"notify allow not a rule":  {func(c *orchestrator.Config) { c.Notify.Policy.Allow = []string{"10.0.0.0/99"} }, "notify-allow"},
		"negative notify max age":  {func(c *orchestrator.Config) { c.Notify.Delivery.MaxAge = -time.Second }, "notify-max-age"},
		"negative send timeout":    {func(c *orchestrator.Config) { c.Notify.Delivery.SendTimeout = -time.Second }, ""},
		"high water above 1":       {func(c *orchestrator.Config) { c.Storage.HighWater = 1.5 }, "storage-high-water"},
		"admin secret too short":   {func(c *orchestrator.Config) { c.AdminSecret = "short" }, ""},
	}
	for name, tt := range cases {
		c := orchestrator.DefaultConfig("m1", "http://m1")
		tt.change(&c)
		if !configtest.Invalid(t, name, c.Validate(), orchestrator.ErrInvalidConfig, "orchestrator: invalid config: ", tt.key) {
			continue
		}
		if _, err := orchestrator.New(nil, c); !errors.Is(err, orchestrator.ErrInvalidConfig) {
			t.Errorf("%s: New = %v, want ErrInvalidConfig", name, err)
		}
	}
}

// TestConfigFlags: the flags of the member, its scheduler and its
// storage upkeep show DefaultConfig's values and set their fields.
func TestConfigFlags(t *testing.T) {
	c := orchestrator.DefaultConfig("", "")
	fs := pflag.NewFlagSet("test", pflag.ContinueOnError)
	c.AddFlags(fs)
	for name, want := range map[string]string{
		"namespace": orchestrator.DefaultNamespace, "partitions": "0", "lease-ttl": "5s", "worker-ttl": "6s",
		"warm-standby": "false", "notify-on": "[dead]", "load-jobs-in-flight": "2048", "compaction-interval": "5m0s",
		"worker-id-grace": "15m0s", "worker-register-rate": "1000", "worker-register-writes": "10", "history-floor": "3",
		"notify-max-pending": "64", "notify-in-flight": "32", "notify-max-age": "24h0m0s",
	} {
		if f := fs.Lookup(name); f == nil || f.DefValue != want {
			t.Errorf("--%s: %+v, want the default %s", name, f, want)
		}
	}
	if err := fs.Parse([]string{"--lease-ttl=10s", "--notify-on=failed,dead", "--loads-in-flight=-1", "--storage-high-water=0.5",
		"--worker-register-rate=-1", "--notify-in-flight=-1", "--history-floor=5"}); err != nil {
		t.Fatal(err)
	}
	if c.LeaseTTL != 10*time.Second || len(c.Notify.On) != 2 || c.Notify.On[0] != api.RunFailed || c.Dispatch.LoadsInFlight != -1 || c.Storage.HighWater != 0.5 {
		t.Errorf("flags set %v, %v, %d, %v", c.LeaseTTL, c.Notify.On, c.Dispatch.LoadsInFlight, c.Storage.HighWater)
	}
	if c.Workers.RequestRate != -1 || c.Notify.Delivery.Concurrency != -1 || c.Dispatch.HistoryFloor != 5 {
		t.Errorf("flags set %v, %d, %d; want -1, -1, 5", c.Workers.RequestRate, c.Notify.Delivery.Concurrency, c.Dispatch.HistoryFloor)
	}
	c.ID = "m1"
	if err := c.Validate(); err != nil {
		t.Errorf("unbounded registrations and deliveries are refused: %v", err)
	}
}
