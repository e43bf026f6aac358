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

// TestDecimal: after Decimal, number flags take decimal numbers only,
// whatever strconv would read, and keep their type; other flags are left
// as they are.
func TestDecimal(t *testing.T) {
	var (
		n    int
		n64  int64
		frac float64
		d    time.Duration
	)
	fs := pflag.NewFlagSet("test", pflag.ContinueOnError)
	fs.IntVar(&n, "n", 0, "")
	fs.Int64Var(&n64, "n64", 0, "")
	fs.Float64Var(&frac, "frac", 0, "")
	fs.DurationVar(&d, "d", 0, "")
	settings.Decimal(fs)
	settings.Decimal(fs) // twice: still one check
	for _, tt := range []struct{ flag, value string }{{"n", "16"}, {"n", "-1"}, {"n", "0"}, {"n64", "8589934592"}, {"frac", "0.8"}, {"frac", "-1"}, {"frac", "100"}} {
		if err := fs.Set(tt.flag, tt.value); err != nil {
			t.Errorf("--%s=%s: %v", tt.flag, tt.value, err)
		}
	}
	if n != 0 || n64 != 8589934592 || frac != 100 {
		t.Errorf("set %d, %d, %v", n, n64, frac)
	}
	for _, tt := range []struct{ flag, value string }{{"n", "0x10"}, {"n", "010"}, {"n", "0o10"}, {"n", "0b11"}, {"n", "+5"}, {"n", "1_000"},
		{"frac", "1e3"}, {"frac", "inf"}, {"frac", "NaN"}, {"frac", ".5"}, {"frac", "0x1p-2"}, {"n64", "0x10"}} {
		if err := fs.Set(tt.flag, tt.value); err == nil || !strings.Contains(err.Error(), "decimal") {
			t.Errorf("--%s=%s: got %v, want it refused as not decimal", tt.flag, tt.value, err)
		}
	}
	if err := fs.Set("n", "lots"); err == nil || strings.Contains(err.Error(), "decimal") {
		t.Errorf("--n=lots: got %v, want the flag's own refusal", err)
	}
	if err := fs.Set("d", "1h"); err != nil {
		t.Errorf("--d=1h: %v", err)
	}
	for _, name := range []string{"n", "n64", "frac", "d"} {
		if got, want := fs.Lookup(name).Value.Type(), map[string]string{"n": "int", "n64": "int64", "frac": "float64", "d": "duration"}[name]; got != want {
			t.Errorf("--%s has type %q, want %q", name, got, want)
		}
	}
}

func TestKindAndFormatDuration(t *testing.T) {
	var b int64
	var l []string
	fs := pflag.NewFlagSet("test", pflag.ContinueOnError)
	fs.Int("n", 0, "")
	fs.Float64("f", 0, "")
	fs.Duration("d", 0, "")
	fs.Bool("b", false, "")
	settings.BytesVar(fs, &b, "size", 0, "")
	settings.StringsVar(fs, &l, "list", nil, "")
	settings.Decimal(fs)
	for name, want := range map[string]string{"n": "an integer", "f": "a number", "d": "a duration such as 30s", "b": "true or false", "size": "a size such as 64MiB", "list": "a list"} {
		if got := settings.Kind(fs.Lookup(name)); got != want {
			t.Errorf("Kind(--%s) = %q, want %q", name, got, want)
		}
	}
	for d, want := range map[time.Duration]string{-1: "-1ns", -time.Second: "-1s", 24 * time.Hour: "24h", 15 * time.Minute: "15m", 90 * time.Minute: "1h30m",
		time.Hour + time.Second: "1h0m1s", 1500 * time.Millisecond: "1.5s", 0: "0s", -2 * time.Hour: "-2h"} {
		got := settings.FormatDuration(d)
		if back, err := time.ParseDuration(got); got != want || err != nil || back != d {
			t.Errorf("FormatDuration(%v) = %q (reads back as %v, %v), want %q", int64(d), got, back, err, want)
		}
	}
}

// TestRefusals: both refusals wrap the sentinel; bad wraps a %w argument
// too, and invalid is an *Error naming the setting.
func TestRefusals(t *testing.T) {
	sentinel, cause := errors.New("x: invalid config"), errors.New("cause")
	bad, invalid := settings.Refusals(sentinel)
	err := bad("ttl %v: %w", 3, cause)
	if !errors.Is(err, sentinel) || !errors.Is(err, cause) || err.Error() != "x: invalid config: ttl 3: cause" {
		t.Errorf("bad = %q, want it to wrap the sentinel and the cause", err)
	}
	err = invalid("lease-ttl", 3, "want at least %d", 5)
	var se *settings.Error
	if !errors.Is(err, sentinel) || !errors.As(err, &se) || se.Key != "lease-ttl" || err.Error() != "x: invalid config: lease-ttl 3: want at least 5" {
		t.Errorf("invalid = %q (%+v), want the sentinel and an *Error of lease-ttl", err, se)
	}
}

// TestDefault: zero takes the default; a set value, negative (unbounded)
// included, stays.
func TestDefault(t *testing.T) {
	for _, tt := range []struct{ v, want time.Duration }{{0, time.Second}, {-1, -1}, {time.Minute, time.Minute}} {
		v := tt.v
		settings.Default(&v, time.Second)
		if v != tt.want {
			t.Errorf("Default(%v, 1s) = %v, want %v", tt.v, v, tt.want)
		}
	}
	n := 0.0
	settings.Default(&n, 2.5)
	if n != 2.5 {
		t.Errorf("Default(0, 2.5) = %v", n)
	}
}
