package schedule

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/robfig/cron/v3"
)

// cronField describes one field of a cron expression.
type cronField struct {
	name     string // as it appears in error messages
	min, max uint   // the values that may be written
	values   uint   // how many distinct values there are (day of week: 7, though 0-7 may be written)
	unit     string // what a step counts within, for the error on a step larger than the field
	every    string // the @every unit of a step in this field, "" if none fits
	names    map[string]uint
	question bool // '?' is accepted (as '*')
}

var (
	secondField = cronField{name: "second", min: 0, max: 59, values: 60, unit: "one minute", every: "s"}
	minuteField = cronField{name: "minute", min: 0, max: 59, values: 60, unit: "one hour", every: "m"}
	hourField   = cronField{name: "hour", min: 0, max: 23, values: 24, unit: "one day", every: "h"}
	domField    = cronField{name: "day-of-month", min: 1, max: 31, values: 31, unit: "one month", question: true}
	monthField  = cronField{name: "month", min: 1, max: 12, values: 12, unit: "one year", names: map[string]uint{
		"jan": 1, "feb": 2, "mar": 3, "apr": 4, "may": 5, "jun": 6,
		"jul": 7, "aug": 8, "sep": 9, "oct": 10, "nov": 11, "dec": 12,
	}}
	dowField = cronField{name: "day-of-week", min: 0, max: 7, values: 7, unit: "one week", question: true, names: map[string]uint{
		"sun": 0, "mon": 1, "tue": 2, "wed": 3, "thu": 4, "fri": 5, "sat": 6,
	}}
)

// starBit is robfig/cron's marker, in a day field's bit set, of a field
// that is unrestricted; its SpecSchedule.Next then combines day of month
// and day of week with AND instead of OR.
const starBit = 1 << 63

// descriptors are the accepted "@" shorthands, as 6-field expressions.
var descriptors = map[string]string{
	"@yearly":   "0 0 0 1 1 *",
	"@annually": "0 0 0 1 1 *",
	"@monthly":  "0 0 0 1 * *",
	"@weekly":   "0 0 0 * * 0",
	"@daily":    "0 0 0 * * *",
	"@midnight": "0 0 0 * * *",
	"@hourly":   "0 0 * * * *",
}

// cronExpr is a parsed cron expression.
type cronExpr struct {
	// wall holds the fields as robfig/cron bit sets, in UTC: its Next
	// walks wall-clock times, which Schedule maps onto instants of the
	// job's zone (see wallclock.go).
	wall cron.SpecSchedule
	// fixed is true when none of the second, minute and hour fields starts
	// with '*': a fixed-time job in cron's terms, whose daylight saving
	// time rule differs from that of interval and wildcard jobs.
	fixed bool
}

// parseCronExpr parses a 5- or 6-field cron expression or a descriptor.
// Its errors name the field, the value and the rule broken; they do not
// wrap a sentinel (Parse adds ErrInvalidCron).
func parseCronExpr(text string) (cronExpr, error) {
	if strings.HasPrefix(text, "@") {
		words := strings.Fields(text)
		name := strings.ToLower(words[0])
		expanded, ok := descriptors[name]
		switch {
		case name == "@reboot":
			return cronExpr{}, fmt.Errorf("@reboot is not supported: a schedule has no notion of a machine starting")
		case !ok:
			return cronExpr{}, fmt.Errorf("unknown descriptor %q; want @yearly, @annually, @monthly, @weekly, @daily, @midnight, @hourly or \"@every <duration>\"", words[0])
		case len(words) > 1:
			return cronExpr{}, fmt.Errorf("%s takes nothing after it", words[0])
		}
		text = expanded
	}
	fields := strings.Fields(text)
	switch len(fields) {
	case 5:
		fields = append([]string{"0"}, fields...)
	case 6:
	default:
		return cronExpr{}, fmt.Errorf("got %d fields; want 5 (minute hour day-of-month month day-of-week) or 6 (second first)", len(fields))
	}
	var (
		bits [6]uint64
		star [6]bool
	)
	for i, f := range []cronField{secondField, minuteField, hourField, domField, monthField, dowField} {
		b, err := f.parse(fields[i])
		if err != nil {
			return cronExpr{}, err
		}
		bits[i] = b
		star[i] = fields[i][0] == '*' || fields[i][0] == '?'
	}
	// Day of week 7 is Sunday, like 0.
	if bits[5]&(1<<7) != 0 {
		bits[5] = bits[5]&^(1<<7) | 1
	}
	// Vixie cron and cronie: a day field that starts with '*' (so "*/2"
	// as well as "*") is unrestricted, and then a day must match both
	// fields; only when both are restricted does either suffice.
	if star[3] {
		bits[3] |= starBit
	}
	if star[5] {
		bits[5] |= starBit
	}
	return cronExpr{
		wall: cron.SpecSchedule{
			Second: bits[0], Minute: bits[1], Hour: bits[2],
			Dom: bits[3], Month: bits[4], Dow: bits[5],
			Location: utcLocation,
		},
		fixed: !star[0] && !star[1] && !star[2],
	}, nil
}

// parse returns the bit set of the values a field's text names: a
// comma-separated list of "*", "?" (day fields only), a value, or a range
// "a-b", each optionally followed by "/step".
func (f cronField) parse(text string) (uint64, error) {
	var bits uint64
	for item := range strings.SplitSeq(text, ",") {
		b, err := f.parseItem(item)
		if err != nil {
			return 0, fmt.Errorf("%s field %q: %w", f.name, text, err)
		}
		bits |= b
	}
	return bits, nil
}

func (f cronField) parseItem(item string) (uint64, error) {
	if item == "" {
		return 0, fmt.Errorf("empty list element")
	}
	base, stepText, hasStep := strings.Cut(item, "/")
	var lo, hi uint
	switch {
	case base == "*":
		lo, hi = f.min, f.max
		if f.name == dowField.name {
			hi = 6 // "*" is 0-6; 7 would only repeat Sunday
		}
	case base == "?":
		if !f.question {
			return 0, fmt.Errorf("'?' is only accepted in the day-of-month and day-of-week fields, where it means '*'")
		}
		if hasStep {
			return 0, fmt.Errorf("'?' takes no step")
		}
		lo, hi = f.min, f.max
	default:
		first, last, isRange := strings.Cut(base, "-")
		var err error
		if lo, err = f.value(first); err != nil {
			return 0, err
		}
		hi = lo
		switch {
		case isRange:
			if hi, err = f.value(last); err != nil {
				return 0, err
			}
			if f.name == dowField.name && hi == 0 && lo > 0 {
				hi = 7 // "mon-sun", "5-0": Sunday ends the week
			}
			if lo > hi {
				return 0, fmt.Errorf("range %s is reversed: ranges run from the lower to the higher value and do not wrap around", base)
			}
		case hasStep:
			hi = f.max // "a/step" means "a-max/step"
		}
	}
	step := uint(1)
	if hasStep {
		n, err := strconv.ParseUint(stepText, 10, 32)
		if err != nil || n == 0 {
			return 0, fmt.Errorf("step %q is not a whole number from 1 to %d", stepText, f.values)
		}
		if uint(n) > f.values {
			msg := fmt.Sprintf("step %d is larger than the field's range %d-%d: steps count within %s, so it would fire once per %s, not every %d",
				n, f.min, f.max, f.unit, strings.TrimPrefix(f.unit, "one "), n)
			if f.every != "" {
				msg += fmt.Sprintf(`; for every %d %ss use "@every %d%s"`, n, f.name, n, f.every)
			}
			return 0, fmt.Errorf("%s", msg)
		}
		step = uint(n)
	}
	var bits uint64
	for v := lo; v <= hi; v += step {
		bits |= 1 << v
	}
	return bits, nil
}

// value parses one value of the field: a number in its range or, in the
// month and day-of-week fields, a three-letter English name.
func (f cronField) value(text string) (uint, error) {
	if text == "" {
		return 0, fmt.Errorf("missing value")
	}
	if text[0] >= '0' && text[0] <= '9' {
		n, err := strconv.ParseUint(text, 10, 32)
		if err != nil {
			if unsupported := unsupportedSpecifier(text); unsupported != "" {
				return 0, fmt.Errorf("%s", unsupported)
			}
			return 0, fmt.Errorf("%q is not a number", text)
		}
		if uint(n) < f.min || uint(n) > f.max {
			if f.name == dowField.name {
				return 0, fmt.Errorf("value %d is out of range %d-%d (0 and 7 are Sunday)", n, f.min, f.max)
			}
			return 0, fmt.Errorf("value %d is out of range %d-%d", n, f.min, f.max)
		}
		return uint(n), nil
	}
	if v, ok := f.names[strings.ToLower(text)]; ok {
		return v, nil
	}
	if unsupported := unsupportedSpecifier(text); unsupported != "" {
		return 0, fmt.Errorf("%s", unsupported)
	}
	if f.names != nil {
		return 0, fmt.Errorf("unknown name %q; want a number from %d to %d or a three-letter English name such as %q", text, f.min, f.max, exampleName(f))
	}
	return 0, fmt.Errorf("%q is not a number from %d to %d", text, f.min, f.max)
}

func exampleName(f cronField) string {
	if f.name == monthField.name {
		return "JAN"
	}
	return "MON"
}

// unsupportedSpecifier names the Quartz and Jenkins extensions a value
// uses, or returns "".
func unsupportedSpecifier(text string) string {
	upper := strings.ToUpper(text)
	switch {
	case strings.Contains(upper, "#"):
		return `"#" (the nth weekday of the month, as in "MON#2") is not supported`
	case upper == "LW":
		return `"LW" (the last weekday of the month) is not supported`
	case strings.HasPrefix(upper, "L") || strings.HasSuffix(upper, "L"):
		return `"L" (the last day of the month or the last weekday of a kind) is not supported`
	case strings.HasSuffix(upper, "W"):
		return `"W" (the weekday nearest a day of the month) is not supported`
	case upper == "H" || strings.HasPrefix(upper, "H("):
		return `"H" (a hashed value, as in Jenkins) is not supported`
	}
	return ""
}
