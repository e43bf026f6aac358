package schedule

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"pgregory.net/rapid"
)

// TestMain makes the zone compiled for the tests, Test/Shift
// (testdata/shift.zi), loadable by name: time.LoadLocation looks in
// $ZONEINFO first, then in the system's zone database. The variable is
// read once per process, so it is set before any test runs.
func TestMain(m *testing.M) {
	dir, err := filepath.Abs(filepath.Join("testdata", "zoneinfo"))
	if err == nil {
		err = os.Setenv("ZONEINFO", dir)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "set ZONEINFO:", err)
		os.Exit(1)
	}
	os.Exit(m.Run())
}

// mustZone loads an IANA zone or fails the test.
func mustZone(t testing.TB, name string) *time.Location {
	t.Helper()
	loc, err := time.LoadLocation(name)
	if err != nil {
		t.Fatalf("LoadLocation(%q): %v", name, err)
	}
	return loc
}

// fataler is the part of testing.TB and *rapid.T the helpers need.
type fataler interface {
	Helper()
	Fatalf(format string, args ...any)
}

// mustParse parses spec in timezone or fails the test.
func mustParse(t fataler, spec, timezone string) Schedule {
	t.Helper()
	s, err := Parse(spec, timezone)
	if err != nil {
		t.Fatalf("Parse(%q, %q): %v", spec, timezone, err)
	}
	return s
}

// nextN returns the first n instants of s after from, in UTC.
func nextN(s Schedule, from time.Time, n int) []time.Time {
	var out []time.Time
	for t := from; len(out) < n; {
		t = s.Next(t)
		if t.IsZero() {
			break
		}
		out = append(out, t.UTC())
	}
	return out
}

// utc parses an RFC 3339 time or panics; for test tables.
func utc(s string) time.Time {
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		panic(err)
	}
	return t.UTC()
}

func equalTimes(a, b []time.Time) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if !a[i].Equal(b[i]) {
			return false
		}
	}
	return true
}

func formatTimes(ts []time.Time) string {
	parts := make([]string, len(ts))
	for i, t := range ts {
		parts[i] = t.UTC().Format(time.RFC3339Nano)
	}
	return "[" + strings.Join(parts, " ") + "]"
}

func TestParseNext(t *testing.T) {
	tests := []struct {
		name     string
		spec     string
		timezone string
		from     time.Time
		want     []time.Time
	}{
		{
			name: "five fields every 15 minutes",
			spec: "*/15 * * * *",
			from: utc("2026-05-01T10:07:30Z"),
			want: []time.Time{utc("2026-05-01T10:15:00Z"), utc("2026-05-01T10:30:00Z"), utc("2026-05-01T10:45:00Z")},
		},
		{
			name: "five fields strictly after an exact match",
			spec: "0 2 * * *",
			from: utc("2026-05-01T02:00:00Z"),
			want: []time.Time{utc("2026-05-02T02:00:00Z"), utc("2026-05-03T02:00:00Z")},
		},
		{
			name: "five fields just before a match",
			spec: "0 2 * * *",
			from: utc("2026-05-01T01:59:59.999999999Z"),
			want: []time.Time{utc("2026-05-01T02:00:00Z")},
		},
		{
			name: "six fields with seconds",
			spec: "*/20 * * * * *",
			from: utc("2026-05-01T10:00:07Z"),
			want: []time.Time{utc("2026-05-01T10:00:20Z"), utc("2026-05-01T10:00:40Z"), utc("2026-05-01T10:01:00Z")},
		},
		{
			name: "six fields fixed second",
			spec: "30 0 12 * * MON-FRI",
			from: utc("2026-05-01T12:00:30Z"), // a Friday
			want: []time.Time{utc("2026-05-04T12:00:30Z"), utc("2026-05-05T12:00:30Z")},
		},
		{
			name: "names and lists",
			spec: "0 9 1 jan,jul *",
			from: utc("2026-05-01T00:00:00Z"),
			want: []time.Time{utc("2026-07-01T09:00:00Z"), utc("2027-01-01T09:00:00Z")},
		},
		{
			name: "day of month or day of week when both restricted",
			spec: "0 0 13 * FRI",
			from: utc("2026-02-10T00:00:00Z"),
			want: []time.Time{utc("2026-02-13T00:00:00Z"), utc("2026-02-20T00:00:00Z"), utc("2026-02-27T00:00:00Z"), utc("2026-03-06T00:00:00Z"), utc("2026-03-13T00:00:00Z")},
		},
		{
			name: "question mark is a star",
			spec: "0 0 1 * ?",
			from: utc("2026-05-15T00:00:00Z"),
			want: []time.Time{utc("2026-06-01T00:00:00Z")},
		},
		{
			name: "leading and trailing blanks",
			spec: "  0 0 * * *\t",
			from: utc("2026-05-01T12:00:00Z"),
			want: []time.Time{utc("2026-05-02T00:00:00Z")},
		},
		{
			name:     "time zone applied",
			spec:     "0 2 * * *",
			timezone: "Europe/Berlin",
			from:     utc("2026-07-01T00:00:00Z"),
			want:     []time.Time{utc("2026-07-02T00:00:00Z"), utc("2026-07-03T00:00:00Z")}, // 02:00 CEST
		},
		{
			name:     "time zone in winter",
			spec:     "0 2 * * *",
			timezone: "Europe/Berlin",
			from:     utc("2026-01-10T12:00:00Z"),
			want:     []time.Time{utc("2026-01-11T01:00:00Z")}, // 02:00 CET
		},
		{
			name: "leap day",
			spec: "0 0 29 2 *",
			from: utc("2026-01-01T00:00:00Z"),
			want: []time.Time{utc("2028-02-29T00:00:00Z"), utc("2032-02-29T00:00:00Z")},
		},
		{name: "hourly", spec: "@hourly", from: utc("2026-05-01T10:00:00Z"), want: []time.Time{utc("2026-05-01T11:00:00Z"), utc("2026-05-01T12:00:00Z")}},
		{name: "daily", spec: "@daily", from: utc("2026-05-01T10:00:00Z"), want: []time.Time{utc("2026-05-02T00:00:00Z")}},
		{name: "midnight", spec: "@midnight", from: utc("2026-05-01T10:00:00Z"), want: []time.Time{utc("2026-05-02T00:00:00Z")}},
		{name: "weekly is sunday", spec: "@weekly", from: utc("2026-05-01T10:00:00Z"), want: []time.Time{utc("2026-05-03T00:00:00Z")}},
		{name: "monthly", spec: "@monthly", from: utc("2026-05-01T10:00:00Z"), want: []time.Time{utc("2026-06-01T00:00:00Z")}},
		{name: "yearly", spec: "@yearly", from: utc("2026-05-01T10:00:00Z"), want: []time.Time{utc("2027-01-01T00:00:00Z")}},
		{name: "annually", spec: "@annually", from: utc("2026-05-01T10:00:00Z"), want: []time.Time{utc("2027-01-01T00:00:00Z")}},
		{
			name:     "daily in a zone",
			spec:     "@daily",
			timezone: "America/New_York",
			from:     utc("2026-05-01T10:00:00Z"),
			want:     []time.Time{utc("2026-05-02T04:00:00Z")},
		},
		{
			name: "every 30s is epoch anchored",
			spec: "@every 30s",
			from: utc("2026-05-01T10:00:07.5Z"),
			want: []time.Time{utc("2026-05-01T10:00:30Z"), utc("2026-05-01T10:01:00Z")},
		},
		{
			name:     "every 1h ignores the zone",
			spec:     "@every 1h",
			timezone: "Asia/Kolkata", // UTC+05:30
			from:     utc("2026-05-01T10:17:00Z"),
			want:     []time.Time{utc("2026-05-01T11:00:00Z"), utc("2026-05-01T12:00:00Z")},
		},
		{
			name: "every 90s",
			spec: "@every 1m30s",
			from: utc("1970-01-01T00:01:40Z"),
			want: []time.Time{utc("1970-01-01T00:03:00Z"), utc("1970-01-01T00:04:30Z")},
		},
		{
			name: "every before the epoch",
			spec: "@every 7s",
			from: utc("1969-12-31T23:59:50Z"), // unix -10
			want: []time.Time{utc("1969-12-31T23:59:53Z"), utc("1970-01-01T00:00:00Z"), utc("1970-01-01T00:00:07Z")},
		},
		{
			name: "every with extra blanks",
			spec: "@every   5m ",
			from: utc("2026-05-01T10:00:00Z"),
			want: []time.Time{utc("2026-05-01T10:05:00Z")},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := mustParse(t, tt.spec, tt.timezone)
			got := nextN(s, tt.from, len(tt.want))
			if !equalTimes(got, tt.want) {
				t.Errorf("Next from %s: got %s, want %s", tt.from.Format(time.RFC3339Nano), formatTimes(got), formatTimes(tt.want))
			}
		})
	}
}

// TestParseDialect pins down the Vixie cron (cronie) dialect on inputs
// users bring from it: day of week 7, ranges ending on Sunday, the
// day-of-month/day-of-week rule and steps.
func TestParseDialect(t *testing.T) {
	tests := []struct {
		name string
		spec string
		from time.Time
		want []time.Time
	}{
		{
			name: "7 is sunday",
			spec: "0 5 * * 7",
			from: utc("2026-11-30T00:00:00Z"), // a Monday
			want: []time.Time{utc("2026-12-06T05:00:00Z"), utc("2026-12-13T05:00:00Z")},
		},
		{
			name: "1-7 is monday to sunday",
			spec: "0 5 * * 1-7",
			from: utc("2026-12-05T06:00:00Z"), // a Saturday
			want: []time.Time{utc("2026-12-06T05:00:00Z"), utc("2026-12-07T05:00:00Z")},
		},
		{
			name: "5-7 is friday to sunday",
			spec: "0 5 * * 5-7",
			from: utc("2026-11-30T00:00:00Z"),
			want: []time.Time{utc("2026-12-04T05:00:00Z"), utc("2026-12-05T05:00:00Z"), utc("2026-12-06T05:00:00Z"), utc("2026-12-11T05:00:00Z")},
		},
		{
			name: "mon-sun is every day",
			spec: "0 5 * * mon-sun",
			from: utc("2026-12-05T06:00:00Z"),
			want: []time.Time{utc("2026-12-06T05:00:00Z"), utc("2026-12-07T05:00:00Z")},
		},
		{
			name: "0-7 is every day",
			spec: "0 5 * * 0-7",
			from: utc("2026-12-05T06:00:00Z"),
			want: []time.Time{utc("2026-12-06T05:00:00Z"), utc("2026-12-07T05:00:00Z")},
		},
		{
			name: "debian's weekly line",
			spec: "47 6 * * 7",
			from: utc("2026-11-30T00:00:00Z"),
			want: []time.Time{utc("2026-12-06T06:47:00Z")},
		},
		{
			name: "stepped day of month with a weekday combines with and",
			spec: "0 16 */2 * SAT",
			from: utc("2026-11-30T00:00:00Z"),                                           // a Monday
			want: []time.Time{utc("2026-12-05T16:00:00Z"), utc("2026-12-19T16:00:00Z")}, // Saturdays on odd days
		},
		{
			name: "star day of week with a day of month combines with and",
			spec: "0 0 13 * *",
			from: utc("2026-02-10T00:00:00Z"),
			want: []time.Time{utc("2026-02-13T00:00:00Z"), utc("2026-03-13T00:00:00Z")},
		},
		{
			name: "stepped day of week with a day of month combines with and",
			spec: "0 0 1-7 * */2",
			from: utc("2026-11-30T00:00:00Z"),
			want: []time.Time{utc("2026-12-01T00:00:00Z"), utc("2026-12-03T00:00:00Z"), utc("2026-12-05T00:00:00Z"), utc("2026-12-06T00:00:00Z"), utc("2027-01-02T00:00:00Z")}, // 2027-01-01 is a Friday
		},
		{
			name: "restricted day of month and day of week combine with or",
			spec: "0 0 1 * MON",
			from: utc("2026-11-30T00:00:00Z"),
			want: []time.Time{utc("2026-12-01T00:00:00Z"), utc("2026-12-07T00:00:00Z")},
		},
		{
			name: "step equal to the field's size fires once per period",
			spec: "*/60 * * * *",
			from: utc("2026-12-01T10:30:00Z"),
			want: []time.Time{utc("2026-12-01T11:00:00Z"), utc("2026-12-01T12:00:00Z")},
		},
		{
			name: "stepped range",
			spec: "10-40/15 * * * *",
			from: utc("2026-12-01T10:00:00Z"),
			want: []time.Time{utc("2026-12-01T10:10:00Z"), utc("2026-12-01T10:25:00Z"), utc("2026-12-01T10:40:00Z"), utc("2026-12-01T11:10:00Z")},
		},
		{
			name: "value with a step runs to the end of the field",
			spec: "50/5 * * * *",
			from: utc("2026-12-01T10:00:00Z"),
			want: []time.Time{utc("2026-12-01T10:50:00Z"), utc("2026-12-01T10:55:00Z"), utc("2026-12-01T11:50:00Z")},
		},
		{
			name: "upper case descriptor",
			spec: "@DAILY",
			from: utc("2026-12-01T10:00:00Z"),
			want: []time.Time{utc("2026-12-02T00:00:00Z")},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := nextN(mustParse(t, tt.spec, ""), tt.from, len(tt.want))
			if !equalTimes(got, tt.want) {
				t.Errorf("%q from %s: got %s, want %s", tt.spec, tt.from.Format(time.RFC3339), formatTimes(got), formatTimes(tt.want))
			}
		})
	}
}

func TestParseErrors(t *testing.T) {
	tests := []struct {
		name     string
		spec     string
		timezone string
		want     error
		wantMsg  string
	}{
		{name: "empty", spec: "", want: ErrInvalidCron, wantMsg: "invalid cron expression: empty"},
		{name: "blank", spec: "  \t", want: ErrInvalidCron},
		{name: "garbage", spec: "x", want: ErrInvalidCron, wantMsg: `invalid cron expression "x": got 1 fields; want 5 (minute hour day-of-month month day-of-week) or 6 (second first)`},
		{name: "four fields", spec: "* * * *", want: ErrInvalidCron},
		{name: "seven fields", spec: "0 0 0 * * * 2026", want: ErrInvalidCron},
		{name: "minute out of range", spec: "60 * * * *", want: ErrInvalidCron, wantMsg: `minute field "60": value 60 is out of range 0-59`},
		{name: "hour out of range", spec: "0 24 * * *", want: ErrInvalidCron, wantMsg: `hour field "24": value 24 is out of range 0-23`},
		{name: "day of week 8", spec: "0 0 * * 8", want: ErrInvalidCron, wantMsg: `day-of-week field "8": value 8 is out of range 0-7 (0 and 7 are Sunday)`},
		{name: "day of month 0", spec: "0 0 0 * *", want: ErrInvalidCron, wantMsg: "out of range 1-31"},
		{name: "zero step", spec: "*/0 * * * *", want: ErrInvalidCron, wantMsg: `step "0" is not a whole number from 1 to 60`},
		{name: "empty step", spec: "*/ * * * *", want: ErrInvalidCron},
		{name: "step of 90 minutes", spec: "*/90 * * * *", want: ErrInvalidCron,
			wantMsg: `minute field "*/90": step 90 is larger than the field's range 0-59: steps count within one hour, so it would fire once per hour, not every 90; for every 90 minutes use "@every 90m"`},
		{name: "step of 61 seconds", spec: "*/61 * * * * *", want: ErrInvalidCron, wantMsg: `second field "*/61": step 61 is larger than the field's range 0-59`},
		{name: "step of 25 hours", spec: "0 */25 * * *", want: ErrInvalidCron, wantMsg: `hour field "*/25": step 25 is larger than the field's range 0-23`},
		{name: "step of 32 days", spec: "0 0 */32 * *", want: ErrInvalidCron, wantMsg: `day-of-month field "*/32": step 32 is larger than the field's range 1-31`},
		{name: "step of 13 months", spec: "0 0 1 */13 *", want: ErrInvalidCron, wantMsg: `month field "*/13": step 13 is larger than the field's range 1-12`},
		{name: "step of 8 weekdays", spec: "0 0 * * */8", want: ErrInvalidCron, wantMsg: `day-of-week field "*/8": step 8 is larger`},
		{name: "step larger than the field on a range", spec: "0-30/90 * * * *", want: ErrInvalidCron, wantMsg: "step 90 is larger"},
		{name: "step larger than the field in a list", spec: "0 1,*/30 * * *", want: ErrInvalidCron, wantMsg: `hour field "1,*/30": step 30`},
		{name: "reversed range", spec: "5-1 * * * *", want: ErrInvalidCron, wantMsg: "range 5-1 is reversed"},
		{name: "wrapping weekday range", spec: "0 0 * * FRI-MON", want: ErrInvalidCron, wantMsg: "range FRI-MON is reversed"},
		{name: "empty list element", spec: "1,,2 * * * *", want: ErrInvalidCron, wantMsg: "empty list element"},
		{name: "quartz last day", spec: "0 0 L * *", want: ErrInvalidCron, wantMsg: `day-of-month field "L": "L" (the last day of the month or the last weekday of a kind) is not supported`},
		{name: "quartz last friday", spec: "0 0 * * 5L", want: ErrInvalidCron, wantMsg: `"L" (the last day`},
		{name: "quartz last day offset", spec: "0 0 L-3 * *", want: ErrInvalidCron, wantMsg: `"L" (the last day`},
		{name: "quartz nearest weekday", spec: "0 0 15W * *", want: ErrInvalidCron, wantMsg: `day-of-month field "15W": "W" (the weekday nearest a day of the month) is not supported`},
		{name: "quartz last weekday", spec: "0 0 LW * *", want: ErrInvalidCron, wantMsg: `"LW" (the last weekday of the month) is not supported`},
		{name: "quartz nth weekday", spec: "0 0 * * MON#2", want: ErrInvalidCron, wantMsg: `day-of-week field "MON#2": "#" (the nth weekday of the month, as in "MON#2") is not supported`},
		{name: "jenkins hash", spec: "H * * * *", want: ErrInvalidCron, wantMsg: `"H" (a hashed value`},
		{name: "question mark in minutes", spec: "? * * * *", want: ErrInvalidCron, wantMsg: `minute field "?": '?' is only accepted in the day-of-month and day-of-week fields`},
		{name: "unknown month name", spec: "0 0 1 JANUARY *", want: ErrInvalidCron, wantMsg: `unknown name "JANUARY"`},
		{name: "name in the wrong field", spec: "0 0 MON * *", want: ErrInvalidCron, wantMsg: `day-of-month field "MON": "MON" is not a number from 1 to 31`},
		{name: "negative value", spec: "-1 * * * *", want: ErrInvalidCron, wantMsg: "missing value"},
		{name: "huge value", spec: "99999999999999999999 * * * *", want: ErrInvalidCron, wantMsg: "is not a number"},
		{name: "reboot", spec: "@reboot", want: ErrInvalidCron, wantMsg: "@reboot is not supported"},
		{name: "unknown descriptor", spec: "@fortnightly", want: ErrInvalidCron, wantMsg: `unknown descriptor "@fortnightly"`},
		{name: "descriptor with extra field", spec: "@daily 5", want: ErrInvalidCron, wantMsg: "@daily takes nothing after it"},
		{name: "cron tz prefix", spec: "CRON_TZ=UTC 0 0 * * *", want: ErrInvalidCron, wantMsg: "time zone prefix"},
		{name: "cron tz prefix alone", spec: "CRON_TZ=UTC", want: ErrInvalidCron},
		{name: "tz prefix alone", spec: "TZ=Europe/Berlin", want: ErrInvalidCron},
		{name: "february 30th", spec: "0 0 30 2 *", want: ErrNeverFires, wantMsg: `schedule never fires: "0 0 30 2 *" names no existing date`},
		{name: "april 31st", spec: "0 0 0 31 4 *", want: ErrNeverFires},
		{name: "every missing interval", spec: "@every", want: ErrInvalidEvery},
		{name: "every two intervals", spec: "@every 1s 2s", want: ErrInvalidEvery},
		{name: "every garbage", spec: "@every soon", want: ErrInvalidEvery},
		{name: "every below a second", spec: "@every 500ms", want: ErrInvalidEvery, wantMsg: "below the minimum of 1s"},
		{name: "every zero", spec: "@every 0s", want: ErrInvalidEvery},
		{name: "every negative", spec: "@every -5s", want: ErrInvalidEvery},
		{name: "every fractional seconds", spec: "@every 1.5s", want: ErrInvalidEvery, wantMsg: "whole number of seconds"},
		{name: "unknown zone", spec: "0 0 * * *", timezone: "Mars/Olympus_Mons", want: ErrUnknownZone, wantMsg: `unknown time zone "Mars/Olympus_Mons"`},
		{name: "local zone", spec: "0 0 * * *", timezone: "Local", want: ErrUnknownZone},
		{name: "lower case utc", spec: "0 0 * * *", timezone: "utc", want: ErrUnknownZone},
		{name: "zone path escape", spec: "0 0 * * *", timezone: "../../etc/passwd", want: ErrUnknownZone},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, err := Parse(tt.spec, tt.timezone)
			if !errors.Is(err, tt.want) {
				t.Fatalf("Parse(%q, %q): got error %v, want %v", tt.spec, tt.timezone, err, tt.want)
			}
			if !strings.Contains(err.Error(), tt.wantMsg) {
				t.Errorf("Parse(%q, %q): got message %q, want it to contain %q", tt.spec, tt.timezone, err, tt.wantMsg)
			}
			if !s.IsZero() {
				t.Errorf("Parse(%q, %q): got schedule %v with the error, want the zero Schedule", tt.spec, tt.timezone, s)
			}
		})
	}
}

// TestNextDST pins down the daylight saving time rules of real zones
// (documented in doc.go): a fixed-time job's wall time that occurs twice
// fires once, one that does not occur fires at the jump; wildcard-hour and
// interval jobs follow real time.
func TestNextDST(t *testing.T) {
	tests := []struct {
		name     string
		spec     string
		timezone string
		from     time.Time
		until    time.Time
		want     []time.Time
	}{
		{
			name:     "new york spring forward runs 02:30 at 03:00",
			spec:     "30 2 * * *",
			timezone: "America/New_York",
			from:     utc("2026-03-07T00:00:00Z"),
			until:    utc("2026-03-10T00:00:00Z"),
			want:     []time.Time{utc("2026-03-07T07:30:00Z"), utc("2026-03-08T07:00:00Z"), utc("2026-03-09T06:30:00Z")}, // 02:30 EST, 03:00 EDT, 02:30 EDT
		},
		{
			name:     "new york spring forward hourly has no 02:00",
			spec:     "0 * * * *",
			timezone: "America/New_York",
			from:     utc("2026-03-08T05:00:00Z"), // 00:00 EST
			until:    utc("2026-03-08T08:00:00Z"),
			want:     []time.Time{utc("2026-03-08T06:00:00Z"), utc("2026-03-08T07:00:00Z"), utc("2026-03-08T08:00:00Z")}, // 01:00 EST, 03:00 EDT, 04:00 EDT
		},
		{
			name:     "new york spring forward 02:30 and 03:00 fire once at the jump",
			spec:     "0,30 2,3 * * *",
			timezone: "America/New_York",
			from:     utc("2026-03-08T05:00:00Z"),
			until:    utc("2026-03-08T08:00:00Z"),
			want:     []time.Time{utc("2026-03-08T07:00:00Z"), utc("2026-03-08T07:30:00Z")}, // 03:00 EDT (for 02:00, 02:30 and 03:00), 03:30 EDT
		},
		{
			name:     "new york fall back runs 01:30 once",
			spec:     "30 1 * * *",
			timezone: "America/New_York",
			from:     utc("2026-10-31T12:00:00Z"),
			until:    utc("2026-11-02T12:00:00Z"),
			want:     []time.Time{utc("2026-11-01T05:30:00Z"), utc("2026-11-02T06:30:00Z")}, // 01:30 EDT, then 01:30 EST the next day
		},
		{
			name:     "new york fall back hourly follows real time",
			spec:     "0 * * * *",
			timezone: "America/New_York",
			from:     utc("2026-11-01T04:00:00Z"), // 00:00 EDT
			until:    utc("2026-11-01T07:00:00Z"),
			want:     []time.Time{utc("2026-11-01T05:00:00Z"), utc("2026-11-01T06:00:00Z"), utc("2026-11-01T07:00:00Z")}, // 01:00 EDT, 01:00 EST, 02:00 EST
		},
		{
			name:     "new york fall back interval minutes follow real time",
			spec:     "*/30 1 * * *",
			timezone: "America/New_York",
			from:     utc("2026-11-01T04:59:00Z"),
			until:    utc("2026-11-01T07:00:00Z"),
			want:     []time.Time{utc("2026-11-01T05:00:00Z"), utc("2026-11-01T05:30:00Z"), utc("2026-11-01T06:00:00Z"), utc("2026-11-01T06:30:00Z")},
		},
		{
			name:     "new york fall back midnight once",
			spec:     "@daily",
			timezone: "America/New_York",
			from:     utc("2026-10-31T12:00:00Z"),
			until:    utc("2026-11-02T12:00:00Z"),
			want:     []time.Time{utc("2026-11-01T04:00:00Z"), utc("2026-11-02T05:00:00Z")},
		},
		{
			name:     "berlin spring forward runs 02:30 at 03:00",
			spec:     "30 2 * * *",
			timezone: "Europe/Berlin",
			from:     utc("2026-03-28T00:00:00Z"),
			until:    utc("2026-03-31T00:00:00Z"),
			want:     []time.Time{utc("2026-03-28T01:30:00Z"), utc("2026-03-29T01:00:00Z"), utc("2026-03-30T00:30:00Z")},
		},
		{
			name:     "berlin fall back runs 02:00 once",
			spec:     "0 2 * * *",
			timezone: "Europe/Berlin",
			from:     utc("2026-10-24T12:00:00Z"),
			until:    utc("2026-10-26T12:00:00Z"),
			want:     []time.Time{utc("2026-10-25T00:00:00Z"), utc("2026-10-26T01:00:00Z")}, // 02:00 CEST only
		},
		{
			name:     "berlin seconds field across fall back",
			spec:     "0 59 2 * * *",
			timezone: "Europe/Berlin",
			from:     utc("2026-10-25T00:00:00Z"),
			until:    utc("2026-10-25T02:00:00Z"),
			want:     []time.Time{utc("2026-10-25T00:59:00Z")},
		},
		{
			name:     "lord howe half-hour spring forward runs 02:15 at 02:30",
			spec:     "15 2 * * *",
			timezone: "Australia/Lord_Howe", // 2026-10-04 02:00 +1030 becomes 02:30 +11
			from:     utc("2026-10-03T00:00:00Z"),
			until:    utc("2026-10-04T12:00:00Z"),
			want:     []time.Time{utc("2026-10-03T15:30:00Z")},
		},
		{
			name:     "every is unaffected by dst",
			spec:     "@every 1h",
			timezone: "America/New_York",
			from:     utc("2026-03-08T05:30:00Z"),
			until:    utc("2026-03-08T08:00:00Z"),
			want:     []time.Time{utc("2026-03-08T06:00:00Z"), utc("2026-03-08T07:00:00Z"), utc("2026-03-08T08:00:00Z")},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			checkFires(t, mustParse(t, tt.spec, tt.timezone), tt.from, tt.until, tt.want)
		})
	}
}

// firesIn lists s's fires in (from, until], in UTC.
func firesIn(s Schedule, from, until time.Time) []time.Time {
	var got []time.Time
	for at := s.Next(from); !at.IsZero() && !at.After(until); at = s.Next(at) {
		got = append(got, at.UTC())
	}
	return got
}

// checkFires compares the fires of s in (from, until] with want.
func checkFires(t *testing.T, s Schedule, from, until time.Time, want []time.Time) {
	t.Helper()
	got := firesIn(s, from, until)
	if !equalTimes(got, want) {
		t.Errorf("%v: fires in (%s, %s]: got %s, want %s", s, from.Format(time.RFC3339), until.Format(time.RFC3339), formatTimes(got), formatTimes(want))
	}
}

// TestShiftZone checks that the compiled test zone (testdata/shift.zi) has
// its transitions where the DST tests expect them.
func TestShiftZone(t *testing.T) {
	loc := mustZone(t, "Test/Shift")
	tests := []struct {
		at         time.Time
		wantOffset int
	}{
		{utc("2030-03-10T08:59:59Z"), 3600},
		{utc("2030-03-10T09:00:00Z"), 7200},
		{utc("2030-10-20T08:59:59Z"), 7200},
		{utc("2030-10-20T09:00:00Z"), 3600},
	}
	for _, tt := range tests {
		if _, got := tt.at.In(loc).Zone(); got != tt.wantOffset {
			t.Errorf("offset of Test/Shift at %v: got %d, want %d", tt.at, got, tt.wantOffset)
		}
	}
}

// TestNextDSTShift tests both transitions of a zone compiled for the test
// (testdata/shift.zi): on 2030-03-10 the wall times 10:00-10:59 do not
// occur (09:00Z is 11:00 XDT); on 2030-10-20 they occur twice (08:00Z-08:59Z
// in XDT, then 09:00Z-09:59Z in XST).
func TestNextDSTShift(t *testing.T) {
	tests := []struct {
		name  string
		spec  string
		from  time.Time
		until time.Time
		want  []time.Time
	}{
		{
			name: "fall back: fixed time in the repeated hour runs once",
			spec: "0 27 10 * * *",
			from: utc("2030-10-19T00:00:00Z"), until: utc("2030-10-21T23:00:00Z"),
			want: []time.Time{utc("2030-10-19T08:27:00Z"), utc("2030-10-20T08:27:00Z"), utc("2030-10-21T09:27:00Z")},
		},
		{
			name: "fall back: created during the repeated hour, after the first 10:27",
			spec: "0 27 10 * * *",
			from: utc("2030-10-20T09:10:00Z"), until: utc("2030-10-21T23:00:00Z"),
			want: []time.Time{utc("2030-10-21T09:27:00Z")},
		},
		{
			name: "fall back: fixed hours list skips the repeated hour",
			spec: "0 9-11 * * *",
			from: utc("2030-10-20T06:30:00Z"), until: utc("2030-10-20T11:00:00Z"),
			want: []time.Time{utc("2030-10-20T07:00:00Z"), utc("2030-10-20T08:00:00Z"), utc("2030-10-20T10:00:00Z")}, // 09 XDT, 10 XDT, 11 XST
		},
		{
			name: "fall back: wildcard hour follows real time",
			spec: "27 * * * *",
			from: utc("2030-10-20T07:00:00Z"), until: utc("2030-10-20T10:00:00Z"),
			want: []time.Time{utc("2030-10-20T07:27:00Z"), utc("2030-10-20T08:27:00Z"), utc("2030-10-20T09:27:00Z")},
		},
		{
			name: "fall back: interval seconds follow real time",
			spec: "*/20 27 10 * * *",
			from: utc("2030-10-20T08:00:00Z"), until: utc("2030-10-20T10:00:00Z"),
			want: []time.Time{
				utc("2030-10-20T08:27:00Z"), utc("2030-10-20T08:27:20Z"), utc("2030-10-20T08:27:40Z"),
				utc("2030-10-20T09:27:00Z"), utc("2030-10-20T09:27:20Z"), utc("2030-10-20T09:27:40Z"),
			},
		},
		{
			name: "spring forward: fixed time in the skipped hour runs at the jump",
			spec: "0 27 10 * * *",
			from: utc("2030-03-09T00:00:00Z"), until: utc("2030-03-11T23:00:00Z"),
			want: []time.Time{utc("2030-03-09T09:27:00Z"), utc("2030-03-10T09:00:00Z"), utc("2030-03-11T08:27:00Z")},
		},
		{
			name: "spring forward: several times in the skipped hour run once",
			spec: "15,45 10 * * *",
			from: utc("2030-03-10T00:00:00Z"), until: utc("2030-03-11T23:00:00Z"),
			want: []time.Time{utc("2030-03-10T09:00:00Z"), utc("2030-03-11T08:15:00Z"), utc("2030-03-11T08:45:00Z")},
		},
		{
			name: "spring forward: 11:00 is not in the gap and runs once",
			spec: "0 11 * * *",
			from: utc("2030-03-10T00:00:00Z"), until: utc("2030-03-10T23:00:00Z"),
			want: []time.Time{utc("2030-03-10T09:00:00Z")},
		},
		{
			name: "spring forward: wildcard hour has no fire in the gap",
			spec: "27 * * * *",
			from: utc("2030-03-10T07:00:00Z"), until: utc("2030-03-10T10:00:00Z"),
			want: []time.Time{utc("2030-03-10T07:27:00Z"), utc("2030-03-10T08:27:00Z"), utc("2030-03-10T09:27:00Z")}, // 08:27 XST, 09:27 XST, 11:27 XDT
		},
		{
			name: "spring forward: a job just after the jump is unaffected",
			spec: "0 0 0 * * *",
			from: utc("2030-03-09T00:00:00Z"), until: utc("2030-03-11T00:00:00Z"),
			want: []time.Time{utc("2030-03-09T23:00:00Z"), utc("2030-03-10T22:00:00Z")},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			checkFires(t, mustParse(t, tt.spec, "Test/Shift"), tt.from, tt.until, tt.want)
		})
	}
}

// TestNextDSTOracle compares Next, around real and test zone transitions,
// with a brute-force reading of the rules: walk every minute of real time;
// a wildcard job fires when the wall clock matches; a fixed-time job fires
// when the wall clock shows a matching time it has not shown before, or
// jumps over one.
func TestNextDSTOracle(t *testing.T) {
	specs := []string{
		"30 2 * * *", "0 2 * * *", "15,45 1-3 * * *", "0 0 * * *", "59 23 * * *", "*/20 * * * *", "0 * * * *",
		"30 * * * *", "*/45 2 * * *", "0 1-3/2 * * SUN", "0 12 * * *",
	}
	zones := []string{"Test/Shift", "America/New_York", "Europe/Berlin", "Australia/Lord_Howe", "America/Santiago", "Asia/Tehran", "America/Havana"}
	rapid.Check(t, func(rt *rapid.T) {
		spec := rapid.SampledFrom(specs).Draw(rt, "spec")
		zone := rapid.SampledFrom(zones).Draw(rt, "zone")
		s := mustParse(rt, spec, zone)
		loc := s.Location()
		// A transition between 2020 and 2031 (or Test/Shift's), and a window around it.
		probe := utc("2020-01-01T00:00:00Z").Add(time.Duration(rapid.Int64Range(0, 11*365*24).Draw(rt, "hour")) * time.Hour)
		if zone == "Test/Shift" {
			probe = utc("2030-01-01T00:00:00Z").Add(time.Duration(rapid.Int64Range(0, 364*24).Draw(rt, "hour")) * time.Hour)
		}
		_, end := probe.In(loc).ZoneBounds()
		if end.IsZero() {
			return
		}
		from := end.Add(-time.Duration(rapid.Int64Range(0, 36*60).Draw(rt, "before")) * time.Minute)
		until := from.Add(30 * time.Hour)

		want := bruteForce(s, from, until)
		got := firesIn(s, from, until)
		if !equalTimes(got, want) {
			rt.Fatalf("%q in %s, fires in (%v, %v]:\n got %s\nwant %s", spec, zone, from.UTC(), until.UTC(), formatTimes(got), formatTimes(want))
		}
	})
}

// bruteForce lists the fires of a 5-field cron schedule in (from, until]
// minute by minute; see TestNextDSTOracle. It starts a day early to know
// which wall times the clock has shown before from.
func bruteForce(s Schedule, from, until time.Time) []time.Time {
	b := s.p.cron.wall
	matches := func(w time.Time) bool {
		dom := b.Dom&(1<<w.Day()) != 0
		dow := b.Dow&(1<<w.Weekday()) != 0
		day := dom || dow
		if b.Dom&starBit != 0 || b.Dow&starBit != 0 {
			day = dom && dow
		}
		return w.Second() == 0 && b.Minute&(1<<w.Minute()) != 0 && b.Hour&(1<<w.Hour()) != 0 &&
			b.Month&(1<<w.Month()) != 0 && day
	}
	wallOf := func(t time.Time) time.Time {
		_, off := t.In(s.p.loc).Zone()
		return t.Add(time.Duration(off) * time.Second).UTC()
	}
	var out []time.Time
	start := from.Add(-26 * time.Hour).Truncate(time.Minute)
	seen := wallOf(start) // the latest wall time shown so far
	for at := start.Add(time.Minute); !at.After(until); at = at.Add(time.Minute) {
		w := wallOf(at)
		fire := false
		if !s.p.cron.fixed {
			fire = matches(w)
		} else {
			for skipped := seen.Truncate(time.Minute).Add(time.Minute); !skipped.After(w); skipped = skipped.Add(time.Minute) {
				fire = fire || matches(skipped)
			}
		}
		if fire && at.After(from) {
			out = append(out, at)
		}
		if w.After(seen) {
			seen = w
		}
	}
	return out
}

// TestNextPastZoneTable walks schedules across the ends of leap years
// after the last transition of their zone's table, where zones follow
// their yearly rule: the time package reports the year's last segment as
// ending a day early there, and Next once looped on that bound for ever.
// Every walk must finish (a deadline turns a hang into a failure) and
// agree with the minute-by-minute oracle.
func TestNextPastZoneTable(t *testing.T) {
	specs := []string{"0 0 * * *", "30 2 * * *", "59 23 * * *", "0 0 1 1 *", "*/20 * * * *", "0 12 * * SUN"}
	zones := []string{"Europe/Berlin", "America/New_York", "America/Santiago", "Australia/Lord_Howe"}
	for _, year := range []int{2040, 2044, 2096} {
		for _, zone := range zones {
			for _, spec := range specs {
				s := mustParse(t, spec, zone)
				from := time.Date(year, time.December, 29, 12, 0, 0, 0, time.UTC)
				until := from.Add(4 * 24 * time.Hour)
				got := walkWithin(t, s, from, until)
				if want := bruteForce(s, from, until); !equalTimes(got, want) {
					t.Errorf("%q in %s, fires in (%v, %v]:\n got %s\nwant %s", spec, zone, from, until, formatTimes(got), formatTimes(want))
				}
			}
		}
	}
	// February 29th, from a December that ends a leap year, to the next one.
	for _, zone := range zones {
		s := mustParse(t, "0 0 29 2 *", zone)
		got := walkWithin(t, s, time.Date(2040, time.December, 24, 0, 0, 0, 0, time.UTC), time.Date(2048, time.March, 1, 0, 0, 0, 0, time.UTC))
		loc := mustZone(t, zone)
		want := []time.Time{time.Date(2044, time.February, 29, 0, 0, 0, 0, loc), time.Date(2048, time.February, 29, 0, 0, 0, 0, loc)}
		if !equalTimes(got, want) {
			t.Errorf("\"0 0 29 2 *\" in %s: got %s, want %s", zone, formatTimes(got), formatTimes(want))
		}
	}
}

// walkWithin lists s's fires in (from, until], failing the test if the
// walk takes more than a generous deadline (microseconds are expected).
func walkWithin(t *testing.T, s Schedule, from, until time.Time) []time.Time {
	t.Helper()
	done := make(chan []time.Time, 1)
	go func() { done <- firesIn(s, from, until) }()
	select {
	case got := <-done:
		return got
	case <-time.After(30 * time.Second):
		t.Fatalf("%q in %s: Next did not return within 30s walking (%v, %v]", s, s.Location(), from, until)
		return nil
	}
}

func TestNextLocation(t *testing.T) {
	tokyo := mustZone(t, "Asia/Tokyo")
	from := time.Date(2026, 5, 1, 9, 0, 0, 0, tokyo)
	tests := []struct {
		name string
		s    Schedule
	}{
		{name: "cron", s: mustParse(t, "0 * * * *", "Europe/Berlin")},
		{name: "every", s: mustParse(t, "@every 1m", "")},
		{name: "once", s: Once(from.Add(time.Hour).UTC())},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := tt.s.Next(from)
			if got.Location() != tokyo {
				t.Errorf("Next location: got %v, want %v", got.Location(), tokyo)
			}
			if !got.After(from) {
				t.Errorf("Next(%v): got %v, want a later time", from, got)
			}
		})
	}
}

func TestOnce(t *testing.T) {
	at := utc("2026-12-01T00:00:00.5Z")
	tests := []struct {
		name  string
		at    time.Time
		after time.Time
		want  time.Time
	}{
		{name: "before", at: at, after: at.Add(-time.Hour), want: at},
		{name: "just before", at: at, after: at.Add(-time.Nanosecond), want: at},
		{name: "equal", at: at, after: at, want: time.Time{}},
		{name: "after", at: at, after: at.Add(time.Second), want: time.Time{}},
		{name: "zero never fires", at: time.Time{}, after: utc("2000-01-01T00:00:00Z"), want: time.Time{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Once(tt.at).Next(tt.after)
			if !got.Equal(tt.want) || got.IsZero() != tt.want.IsZero() {
				t.Errorf("Once(%v).Next(%v): got %v, want %v", tt.at, tt.after, got, tt.want)
			}
		})
	}
}

func TestEvery(t *testing.T) {
	tests := []struct {
		name    string
		d       time.Duration
		wantErr bool
	}{
		{name: "one second", d: time.Second},
		{name: "one day", d: 24 * time.Hour},
		{name: "odd", d: 7*time.Minute + 3*time.Second},
		{name: "below a second", d: 999 * time.Millisecond, wantErr: true},
		{name: "fraction", d: 1500 * time.Millisecond, wantErr: true},
		{name: "zero", d: 0, wantErr: true},
		{name: "negative", d: -time.Minute, wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, err := Every(tt.d)
			if tt.wantErr {
				if !errors.Is(err, ErrInvalidEvery) {
					t.Errorf("Every(%v): got error %v, want %v", tt.d, err, ErrInvalidEvery)
				}
				return
			}
			if err != nil {
				t.Fatalf("Every(%v): %v", tt.d, err)
			}
			from := utc("2026-05-01T10:17:23.25Z")
			a := s.Next(from)
			b := s.Next(a)
			if got := b.Sub(a); got != tt.d {
				t.Errorf("gap between fires: got %v, want %v", got, tt.d)
			}
			if got := a.Unix() % int64(tt.d/time.Second); got != 0 {
				t.Errorf("fire %v is %ds off the epoch grid, want 0", a, got)
			}
			if !a.After(from) || a.Sub(from) > tt.d {
				t.Errorf("Next(%v): got %v, want within (from, from+%v]", from, a, tt.d)
			}
		})
	}
}

func TestScheduleAccessors(t *testing.T) {
	berlin := mustZone(t, "Europe/Berlin")
	tests := []struct {
		name     string
		s        Schedule
		wantStr  string
		wantLoc  *time.Location
		wantZero bool
	}{
		{name: "cron", s: mustParse(t, " 0 2 * * * ", "Europe/Berlin"), wantStr: "0 2 * * *", wantLoc: berlin},
		{name: "cron utc", s: mustParse(t, "@hourly", ""), wantStr: "@hourly", wantLoc: time.UTC},
		{name: "parsed every", s: mustParse(t, "@every 90s", "Europe/Berlin"), wantStr: "@every 90s", wantLoc: time.UTC},
		{name: "once", s: Once(time.Date(2026, 12, 1, 1, 0, 0, 0, berlin)), wantStr: "once at 2026-12-01T00:00:00Z", wantLoc: time.UTC},
		{name: "zero", s: Schedule{}, wantStr: "never", wantLoc: time.UTC, wantZero: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.s.String(); got != tt.wantStr {
				t.Errorf("String: got %q, want %q", got, tt.wantStr)
			}
			if got := tt.s.Location(); got.String() != tt.wantLoc.String() {
				t.Errorf("Location: got %v, want %v", got, tt.wantLoc)
			}
			if got := tt.s.IsZero(); got != tt.wantZero {
				t.Errorf("IsZero: got %v, want %v", got, tt.wantZero)
			}
		})
	}
	every, err := Every(90 * time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := every.String(), "@every 1m30s"; got != want {
		t.Errorf("Every(90s).String: got %q, want %q", got, want)
	}
	if got := (Schedule{}).Next(utc("2026-01-01T00:00:00Z")); !got.IsZero() {
		t.Errorf("zero Schedule Next: got %v, want the zero time", got)
	}
}

func TestLoadLocation(t *testing.T) {
	tests := []struct {
		name    string
		zone    string
		want    string
		wantErr bool
	}{
		{name: "empty is utc", zone: "", want: "UTC"},
		{name: "utc", zone: "UTC", want: "UTC"},
		{name: "iana", zone: "America/New_York", want: "America/New_York"},
		{name: "iana again from cache", zone: "America/New_York", want: "America/New_York"},
		{name: "etc offset", zone: "Etc/GMT+5", want: "Etc/GMT+5"},
		{name: "local", zone: "Local", wantErr: true},
		{name: "unknown", zone: "Nowhere/Special", wantErr: true},
		{name: "absolute path", zone: "/etc/localtime", wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			loc, err := LoadLocation(tt.zone)
			if tt.wantErr {
				if !errors.Is(err, ErrUnknownZone) {
					t.Errorf("LoadLocation(%q): got error %v, want %v", tt.zone, err, ErrUnknownZone)
				}
				return
			}
			if err != nil {
				t.Fatalf("LoadLocation(%q): %v", tt.zone, err)
			}
			if got := loc.String(); got != tt.want {
				t.Errorf("LoadLocation(%q): got %q, want %q", tt.zone, got, tt.want)
			}
		})
	}
}

// FuzzParse checks that Parse never panics and that whatever it accepts
// has a next fire strictly after the probe time.
func FuzzParse(f *testing.F) {
	for _, seed := range []string{
		"* * * * *", "*/5 1-3 * JAN-MAR MON", "0 0 30 2 *", "@every 1s", "@daily",
		"CRON_TZ=UTC", "TZ=", "@", "@every", "1-2-3 * * * *", "*/ * * * *",
		"0-59/60 * * * * *", ", , , , ,", "? ? ? ? ?",
	} {
		f.Add(seed, "")
		f.Add(seed, "Europe/Berlin")
	}
	from := utc("2026-05-01T10:00:00Z")
	f.Fuzz(func(t *testing.T, spec, timezone string) {
		s, err := Parse(spec, timezone)
		if err != nil {
			return
		}
		next := s.Next(from)
		if next.IsZero() || !next.After(from) {
			t.Errorf("Parse(%q, %q).Next(%v): got %v, want a later time", spec, timezone, from, next)
		}
	})
}
