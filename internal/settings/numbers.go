package settings

import (
	"errors"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/pflag"
)

// decimal is a number written in decimal: an optional minus, digits
// without leading zeros, an optional fraction.
var decimal = regexp.MustCompile(`^-?(0|[1-9][0-9]*)(\.[0-9]+)?$`)

// IsDecimal reports whether s is a number written in decimal, such as
// 16, -1 or 0.8: not 0x10, 0o20, 010, 1e3, +16, 1_000, inf or NaN, which
// strconv (and so pflag) or YAML 1.1 would read as numbers.
func IsDecimal(s string) bool { return decimal.MatchString(s) }

// errNotDecimal is Decimal's refusal.
var errNotDecimal = errors.New("write the number in decimal, such as 16 or 0.8 (not hexadecimal, octal, with an exponent, a sign or underscores)")

// Decimal makes every int, int64 and float64 flag of fs refuse a value
// not written in decimal (IsDecimal), naming the rule: pflag reads such
// flags with strconv, which takes "0x10" as 16, "010" as 8 and "1e3" as
// 1000. Call it once the flags are defined; flags defined later are not
// changed. The flags keep their type (Value.Type()).
func Decimal(fs *pflag.FlagSet) {
	fs.VisitAll(func(f *pflag.Flag) {
		switch f.Value.Type() {
		case "int", "int64", "float64":
			if _, done := f.Value.(decimalValue); !done {
				f.Value = decimalValue{f.Value}
			}
		}
	})
}

// decimalValue is a number flag's Value that takes only decimal numbers.
type decimalValue struct{ pflag.Value }

func (d decimalValue) Set(s string) error {
	if !IsDecimal(s) && readsAsNumber(s) {
		return errNotDecimal
	}
	return d.Value.Set(s) // refuses what is no number at all, its own way
}

// readsAsNumber reports whether strconv reads s as a number in some
// notation.
func readsAsNumber(s string) bool {
	_, ierr := strconv.ParseInt(s, 0, 64)
	_, ferr := strconv.ParseFloat(s, 64)
	return ierr == nil || ferr == nil
}

// Kind describes the values flag f takes, for messages such as "\"lots\"
// is not an integer": "an integer", "a number", "a duration such as
// 30s", "a size such as 64MiB", "true or false", "a list" or, for any
// other flag, "a valid value".
func Kind(f *pflag.Flag) string {
	switch f.Value.Type() {
	case "int", "int8", "int16", "int32", "int64", "uint", "uint8", "uint16", "uint32", "uint64":
		return "an integer"
	case "float32", "float64":
		return "a number"
	case "duration":
		return "a duration such as 30s"
	case "bytes":
		return "a size such as 64MiB"
	case "bool":
		return "true or false"
	case "string":
		return "a string"
	}
	if _, ok := f.Value.(pflag.SliceValue); ok {
		return "a list"
	}
	return "a valid value"
}

// FormatDuration writes d as Go does, without the zero units Go adds
// after hours and minutes: 24h, 15m, 1h30m, -1s (not 24h0m0s, 15m0s).
// time.ParseDuration reads it back to d.
func FormatDuration(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = s[:len(s)-2]
	}
	if strings.HasSuffix(s, "h0m") {
		s = s[:len(s)-2]
	}
	return s
}

// Default applies the zero convention to one setting: it sets *v to def
// where *v is zero, and leaves any other value, a negative one included,
// as it is.
func Default[T ~int | ~int64 | ~float64](v *T, def T) {
	if *v == 0 {
		*v = def
	}
}
