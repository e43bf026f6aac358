package settings_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"

	"github.com/jobfleet/jobfleet/internal/settings"
)

func TestBytes(t *testing.T) {
	for _, tt := range []struct {
		in   string
		want int64
		out  string // FormatBytes(want)
	}{
		{"0", 0, "0"},
		{"1000", 1000, "1000"},
		{"1GiB", 1 << 30, "1GiB"},
		{"1 gib", 1 << 30, "1GiB"},
		{"1536MiB", 1536 << 20, "1536MiB"},
		{"2048MiB", 2 << 30, "2GiB"},
		{"500MB", 500_000_000, "500000000"},
		{"8589934592", 8 << 30, "8GiB"},
		{"64KiB", 64 << 10, "64KiB"},
		{"3TB", 3_000_000_000_000, "2929687500KiB"},
	} {
		got, err := settings.ParseBytes(tt.in)
		if err != nil || got != tt.want {
			t.Errorf("ParseBytes(%q) = %d, %v; want %d", tt.in, got, err, tt.want)
			continue
		}
		if out := settings.FormatBytes(got); out != tt.out {
			t.Errorf("FormatBytes(%d) = %q, want %q", got, out, tt.out)
		}
		if back, err := settings.ParseBytes(settings.FormatBytes(got)); err != nil || back != got {
			t.Errorf("FormatBytes(%d) = %q reads back as %d, %v", got, settings.FormatBytes(got), back, err)
		}
	}
	for _, bad := range []string{"", "-1", "1.5GiB", "lots", "1XB", "GiB", "99999999999TiB"} {
		if n, err := settings.ParseBytes(bad); err == nil {
			t.Errorf("ParseBytes(%q) = %d, want an error", bad, n)
		}
	}
}

func TestFlags(t *testing.T) {
	var (
		budget int64
		limit  int
		on     []string
	)
	fs := pflag.NewFlagSet("test", pflag.ContinueOnError)
	settings.BytesVar(fs, &budget, "budget", 1<<30, "bytes kept")
	fs.IntVar(&limit, "limit", 16, "things at once")
	settings.Unbounded(fs, "limit", "no bound")
	settings.StringsVar(fs, &on, "on", []string{"dead"}, "outcomes")
	fs.String("password", "", "a secret")
	settings.Secret(fs, "password")

	if f := fs.Lookup("budget"); f.DefValue != "1GiB" || f.Value.Type() != "bytes" {
		t.Errorf("--budget: default %q of type %q, want 1GiB of type bytes", f.DefValue, f.Value.Type())
	}
	f := fs.Lookup("limit")
	if m, ok := settings.NegativeMeaning(f); !ok || m != "no bound" || !strings.HasSuffix(f.Usage, "; negative: no bound") {
		t.Errorf("--limit: %q, %v, usage %q", m, ok, f.Usage)
	}
	if _, ok := settings.NegativeMeaning(fs.Lookup("budget")); ok {
		t.Errorf("--budget is marked unbounded")
	}
	if !settings.IsSecret(fs.Lookup("password")) || settings.IsSecret(f) {
		t.Errorf("secrets: password %v, limit %v", settings.IsSecret(fs.Lookup("password")), settings.IsSecret(f))
	}
	if d := fs.Lookup("on").DefValue; d != "[dead]" {
		t.Errorf("--on default %q, want [dead]", d)
	}
	if err := fs.Parse([]string{"--budget=2GiB", "--limit=-1", "--on=failed,dead", "--on=succeeded"}); err != nil {
		t.Fatal(err)
	}
	if budget != 2<<30 || limit != -1 || strings.Join(on, " ") != "failed dead succeeded" {
		t.Errorf("parsed %d, %d, %q", budget, limit, on)
	}
	if err := fs.Set("budget", "-1"); err == nil {
		t.Errorf("--budget=-1 accepted")
	}
	if got := fs.Lookup("on").Value.(pflag.SliceValue).GetSlice(); len(got) != 3 {
		t.Errorf("GetSlice = %q", got)
	}
	defer func() {
		if recover() == nil {
			t.Errorf("Unbounded of a flag that does not exist did not panic")
		}
	}()
	settings.Unbounded(fs, "nope", "x")
}

func TestError(t *testing.T) {
	err := fmt.Errorf("%w: %w", errors.New("pkg: invalid config"), settings.Invalid("lease-ttl", 1500*time.Millisecond, "want whole seconds (0: the default, %v)", 5*time.Second))
	var se *settings.Error
	if !errors.As(err, &se) || se.Key != "lease-ttl" || se.Value != 1500*time.Millisecond {
		t.Fatalf("errors.As: %+v", se)
	}
	if want := "pkg: invalid config: lease-ttl 1.5s: want whole seconds (0: the default, 5s)"; err.Error() != want {
		t.Errorf("%q, want %q", err, want)
	}
	if got := settings.Invalid("token", settings.Redacted, "not ASCII").Error(); got != "token (secret, not shown): not ASCII" {
		t.Errorf("%q", got)
	}
	if got := settings.Invalid("allow", []string{"a", "b"}, "bad").Error(); got != `allow "a,b": bad` {
		t.Errorf("%q", got)
	}
}

// A Config binds its settings with the flags' helpers, and its Validate
// names a refused setting by its key.
func Example() {
	type Config struct {
		Loads  int
		Budget int64
	}
	c := Config{Loads: 16, Budget: 1 << 30} // DefaultConfig
	fs := pflag.NewFlagSet("member", pflag.ContinueOnError)
	fs.IntVar(&c.Loads, "loads-in-flight", c.Loads, "partitions loaded at once")
	settings.Unbounded(fs, "loads-in-flight", "no bound")
	settings.BytesVar(fs, &c.Budget, "history-budget", c.Budget, "bytes of history kept")
	_ = fs.Parse([]string{"--loads-in-flight=-1", "--history-budget=512KiB"})

	fmt.Println(c.Loads, settings.FormatBytes(c.Budget))
	if c.Budget < 1<<20 {
		fmt.Println(settings.Invalid("history-budget", settings.FormatBytes(c.Budget), "want at least 1MiB"))
	}
	// Output:
	// -1 512KiB
	// history-budget "512KiB": want at least 1MiB
}
