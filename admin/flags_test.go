package admin_test

import (
	"errors"
	"testing"

	"github.com/spf13/pflag"

	"github.com/jobfleet/jobfleet/admin"
	"github.com/jobfleet/jobfleet/internal/settings"
)

// TestConfigSettings: the API's settings show their defaults as flags,
// zero ones are the defaults, a negative rate is no limit, and a refused
// value is named by its key.
func TestConfigSettings(t *testing.T) {
	c := admin.DefaultConfig()
	fs := pflag.NewFlagSet("test", pflag.ContinueOnError)
	c.AddFlags(fs)
	for name, want := range map[string]string{"api-rate": "5000", "api-burst": "10000", "api-write-bytes": "0", "api-write-revisions": "50000", "api-write-revisions-burst": "100000", "max-polls": "1024", "max-streams-per-credential": "16", "trigger-rate": "1", "trigger-burst": "10"} {
		if f := fs.Lookup(name); f == nil || f.DefValue != want {
			t.Errorf("--%s: %+v, want the default %s", name, f, want)
		}
	}
	if err := (admin.Config{}).Validate(); err != nil {
		t.Errorf("zero settings (the defaults) are refused: %v", err)
	}
	if d := (admin.Config{}).WithDefaults(); d.Limits != admin.DefaultLimits() || d.TriggerRate != admin.DefaultTriggerRate || d.TriggerBurst != admin.DefaultTriggerBurst {
		t.Errorf("WithDefaults of zero settings: %+v", d)
	}
	if err := (admin.Config{Limits: admin.Limits{Rate: -1, WriteBytes: -1, WriteRevisions: -1}, TriggerRate: -1}).Validate(); err != nil {
		t.Errorf("negative rates (no limit) are refused: %v", err)
	}
	for key, c := range map[string]admin.Config{
		"api-burst":                 {Limits: admin.Limits{Burst: -1}},
		"api-write-bytes":           {Limits: admin.Limits{WriteBytes: 100}},
		"api-write-bytes-burst":     {Limits: admin.Limits{WriteBytesBurst: -1}},
		"api-write-revisions-burst": {Limits: admin.Limits{WriteRevisionsBurst: -1}},
		"max-polls":                 {Limits: admin.Limits{MaxPolls: -1}},
		"max-polls-per-credential":  {Limits: admin.Limits{MaxPolls: 10, MaxPollsPerCredential: 11}},
		"max-streams":               {Limits: admin.Limits{MaxStreams: -1}},
		"trigger-burst":             {TriggerBurst: -1},
	} {
		err := c.Validate()
		var se *settings.Error
		if !errors.Is(err, admin.ErrInvalidConfig) || !errors.As(err, &se) || se.Key != key {
			t.Errorf("%+v: %v, want ErrInvalidConfig naming %s", c, err, key)
		}
	}
}
