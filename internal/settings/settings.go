package settings

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/pflag"
)

// Error is a setting that a Validate refuses. Validate methods return it
// wrapped (fmt.Errorf("%w: %w", ErrInvalidConfig, err)); callers find it
// with errors.As.
type Error struct {
	// Key is the setting's name: its flag without the dashes, and its
	// config file key.
	Key string
	// Value is the value refused.
	Value any
	// Rule says what the value must be, such as "want at least 1s".
	Rule string
}

// Invalid returns the Error of setting key with value, breaking the rule
// format (with args).
func Invalid(key string, value any, format string, args ...any) *Error {
	return &Error{Key: key, Value: value, Rule: fmt.Sprintf(format, args...)}
}

// Refusals returns the errors a Validate refuses its Config with, each
// wrapping sentinel (the package's ErrInvalidConfig): bad for a rule of
// no one setting, its message format with args (a %w among them wraps
// too); invalid for setting key's value v breaking the rule format, as
// an *Error (Invalid).
func Refusals(sentinel error) (bad func(format string, args ...any) error, invalid func(key string, v any, format string, args ...any) error) {
	bad = func(format string, args ...any) error {
		return fmt.Errorf("%w: "+format, append([]any{sentinel}, args...)...)
	}
	invalid = func(key string, v any, format string, args ...any) error {
		return fmt.Errorf("%w: %w", sentinel, Invalid(key, v, format, args...))
	}
	return bad, invalid
}

func (e *Error) Error() string {
	return e.Key + " " + FormatValue(e.Value) + ": " + e.Rule
}

// FormatValue writes v as a setting's value in messages: strings quoted,
// durations as Go writes them, lists comma separated.
func FormatValue(v any) string {
	switch v := v.(type) {
	case string:
		return strconv.Quote(v)
	case []string:
		return strconv.Quote(strings.Join(v, ","))
	case time.Duration:
		return v.String()
	case fmt.Stringer:
		return v.String()
	default:
		return fmt.Sprint(v)
	}
}

// Annotations of flags (pflag.Flag.Annotations).
const (
	// annNegative holds what a negative value of the flag means.
	annNegative = "jobfleet.settings/negative"
	// annSecret marks a flag whose value is a secret.
	annSecret = "jobfleet.settings/secret"
)

// Unbounded records that a negative value of flag name of fs means
// meaning (such as "no bound", "kept forever"), and adds "; negative:
// meaning" to its help. It panics if fs has no such flag (a programming
// error, found by any test that builds the flags).
func Unbounded(fs *pflag.FlagSet, name, meaning string) {
	f := mustLookup(fs, name)
	f.Usage += "; negative: " + meaning
	annotate(f, annNegative, meaning)
}

// NegativeMeaning returns what a negative value of f means, and false if
// a negative value of f is refused (or f is not a number).
func NegativeMeaning(f *pflag.Flag) (string, bool) {
	v, ok := f.Annotations[annNegative]
	if !ok || len(v) == 0 {
		return "", false
	}
	return v[0], true
}

// Secret marks flag name of fs as a secret: its value is never printed.
// It panics if fs has no such flag.
func Secret(fs *pflag.FlagSet, name string) {
	annotate(mustLookup(fs, name), annSecret, "true")
}

// IsSecret reports whether f was marked with Secret.
func IsSecret(f *pflag.Flag) bool {
	_, ok := f.Annotations[annSecret]
	return ok
}

func mustLookup(fs *pflag.FlagSet, name string) *pflag.Flag {
	f := fs.Lookup(name)
	if f == nil {
		panic("settings: no flag --" + name)
	}
	return f
}

func annotate(f *pflag.Flag, key, value string) {
	if f.Annotations == nil {
		f.Annotations = map[string][]string{}
	}
	f.Annotations[key] = []string{value}
}

// BytesVar defines flag name of fs, a size in bytes bound to p with
// default value: it reads "1GiB", "512MB", "500KiB" or a plain count of
// bytes, and prints the exact size in the largest binary unit that
// divides it ("1GiB", "1536MiB", "1000").
func BytesVar(fs *pflag.FlagSet, p *int64, name string, value int64, usage string) {
	*p = value
	fs.Var((*bytesValue)(p), name, usage)
}

// bytesValue is a pflag.Value of a size in bytes.
type bytesValue int64

func (b *bytesValue) String() string { return FormatBytes(int64(*b)) }

func (b *bytesValue) Set(s string) error {
	n, err := ParseBytes(s)
	if errors.Is(err, errSize) {
		return errSize // the flag's message quotes the value already
	}
	if err != nil {
		return err
	}
	*b = bytesValue(n)
	return nil
}

func (b *bytesValue) Type() string { return "bytes" }

// units are the binary and decimal units ParseBytes reads, by suffix
// (lower case).
var units = map[string]int64{
	"": 1, "b": 1,
	"k": 1000, "kb": 1000, "m": 1000 * 1000, "mb": 1000 * 1000, "g": 1000 * 1000 * 1000, "gb": 1000 * 1000 * 1000,
	"t": 1000 * 1000 * 1000 * 1000, "tb": 1000 * 1000 * 1000 * 1000,
	"ki": 1 << 10, "kib": 1 << 10, "mi": 1 << 20, "mib": 1 << 20, "gi": 1 << 30, "gib": 1 << 30, "ti": 1 << 40, "tib": 1 << 40,
}

// errSize is the rule of a size that ParseBytes refuses.
var errSize = errors.New("want a whole number of bytes, optionally with a unit (like 2GiB, 512MB or 8589934592)")

// ParseBytes reads a size: a whole number of bytes, optionally followed
// by a unit (KiB, MiB, GiB, TiB; KB, MB, GB, TB; case does not matter,
// spaces are allowed before it). Negative sizes and fractions are
// refused.
func ParseBytes(s string) (int64, error) {
	t := strings.TrimSpace(s)
	i := 0
	for i < len(t) && t[i] >= '0' && t[i] <= '9' {
		i++
	}
	unit, ok := units[strings.ToLower(strings.TrimSpace(t[i:]))]
	if i == 0 || !ok {
		return 0, fmt.Errorf("%q is not a size: %w", s, errSize)
	}
	n, err := strconv.ParseInt(t[:i], 10, 64)
	if err != nil || n > math.MaxInt64/unit {
		return 0, fmt.Errorf("size %q is too large", s)
	}
	return n * unit, nil
}

// FormatBytes writes n exactly, in the largest binary unit that divides
// it: 1GiB, 1536MiB, 1000.
func FormatBytes(n int64) string {
	if n == 0 {
		return "0"
	}
	for _, u := range []struct {
		name string
		size int64
	}{{"TiB", 1 << 40}, {"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10}} {
		if n%u.size == 0 {
			return strconv.FormatInt(n/u.size, 10) + u.name
		}
	}
	return strconv.FormatInt(n, 10)
}

// Redacted stands for a secret's value in an Error: it prints as
// "(secret, not shown)".
var Redacted fmt.Stringer = redacted{}

type redacted struct{}

func (redacted) String() string { return "(secret, not shown)" }
