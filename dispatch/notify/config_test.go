package notify_test

import (
	"errors"
	"testing"
	"time"

	"github.com/spf13/pflag"

	"github.com/jobfleet/jobfleet/dispatch/notify"
	"github.com/jobfleet/jobfleet/internal/settings"
)

// TestConfigSettings: the flags show DefaultConfig's values and set
// their fields; zero settings are the defaults and negative counts stay
// (no bound); a negative max age is refused naming its key, and New
// wants a sender.
func TestConfigSettings(t *testing.T) {
	c := notify.DefaultConfig()
	fs := pflag.NewFlagSet("test", pflag.ContinueOnError)
	c.AddFlags(fs)
	for name, want := range map[string]string{"notify-max-pending": "64", "notify-in-flight": "32", "notify-max-age": "24h0m0s"} {
		if f := fs.Lookup(name); f == nil || f.DefValue != want {
			t.Errorf("--%s: %+v, want the default %s", name, f, want)
		}
	}
	if err := fs.Parse([]string{"--notify-max-pending=-1", "--notify-in-flight=8", "--notify-max-age=1h"}); err != nil {
		t.Fatal(err)
	}
	if c.MaxPendingPerJob != -1 || c.Concurrency != 8 || c.MaxAge != time.Hour {
		t.Errorf("flags set %d, %d, %v; want -1, 8, 1h", c.MaxPendingPerJob, c.Concurrency, c.MaxAge)
	}
	if err := c.Validate(); err != nil {
		t.Errorf("no bound on the pending notifications is refused: %v", err)
	}
	if got := c.WithDefaults(); got.MaxPendingPerJob != -1 || got.PerDestination != notify.DefaultPerDestination {
		t.Errorf("WithDefaults: pending %d, per destination %d; want -1 kept and the default %d", got.MaxPendingPerJob, got.PerDestination, notify.DefaultPerDestination)
	}
	if got, want := (notify.Config{}).WithDefaults(), notify.DefaultConfig(); got != want {
		t.Errorf("WithDefaults of zero settings = %+v, want DefaultConfig's %+v", got, want)
	}
	c.MaxAge = -time.Second
	var se *settings.Error
	if err := c.Validate(); !errors.Is(err, notify.ErrInvalidConfig) || !errors.As(err, &se) || se.Key != "notify-max-age" {
		t.Errorf("negative max age: %v, want ErrInvalidConfig naming notify-max-age", err)
	}
	if _, err := notify.New(notify.DefaultConfig()); !errors.Is(err, notify.ErrInvalidConfig) {
		t.Errorf("New without a sender: %v, want ErrInvalidConfig", err)
	}
}
