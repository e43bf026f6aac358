package schedule

import (
	"errors"
	"strings"
	"testing"
	"time"
)

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
		{name: "garbage", spec: "x", want: ErrInvalidCron, wantMsg: `invalid cron expression "x": expected 5 to 6 fields`},
		{name: "four fields", spec: "* * * *", want: ErrInvalidCron},
		{name: "seven fields", spec: "0 0 0 * * * 2026", want: ErrInvalidCron},
		{name: "minute out of range", spec: "60 * * * *", want: ErrInvalidCron, wantMsg: "above maximum"},
		{name: "hour out of range", spec: "0 24 * * *", want: ErrInvalidCron},
		{name: "sunday as 7", spec: "0 0 * * 7", want: ErrInvalidCron},
		{name: "zero step", spec: "*/0 * * * *", want: ErrInvalidCron},
		{name: "reversed range", spec: "5-1 * * * *", want: ErrInvalidCron},
		{name: "quartz last day", spec: "0 0 L * *", want: ErrInvalidCron},
		{name: "reboot", spec: "@reboot", want: ErrInvalidCron, wantMsg: "unrecognized descriptor"},
		{name: "unknown descriptor", spec: "@fortnightly", want: ErrInvalidCron},
		{name: "descriptor with extra field", spec: "@daily 5", want: ErrInvalidCron},
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

// TestNextDST pins down robfig/cron's behaviour at daylight saving time
// transitions (documented in doc.go): a wall time that does not exist is
// skipped that day; a wall time that occurs twice fires twice.
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
			name:     "new york spring forward skips 02:30 that day",
			spec:     "30 2 * * *",
			timezone: "America/New_York",
			from:     utc("2026-03-07T00:00:00Z"),
			until:    utc("2026-03-10T00:00:00Z"),
			want:     []time.Time{utc("2026-03-07T07:30:00Z"), utc("2026-03-09T06:30:00Z")},
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
			name:     "new york spring forward 03:00 still fires",
			spec:     "0 3 * * *",
			timezone: "America/New_York",
			from:     utc("2026-03-08T00:00:00Z"),
			until:    utc("2026-03-09T00:00:00Z"),
			want:     []time.Time{utc("2026-03-08T07:00:00Z")}, // 03:00 EDT
		},
		{
			name:     "new york fall back fires 01:30 twice",
			spec:     "30 1 * * *",
			timezone: "America/New_York",
			from:     utc("2026-10-31T12:00:00Z"),
			until:    utc("2026-11-02T12:00:00Z"),
			want:     []time.Time{utc("2026-11-01T05:30:00Z"), utc("2026-11-01T06:30:00Z"), utc("2026-11-02T06:30:00Z")}, // 01:30 EDT, 01:30 EST
		},
		{
			name:     "new york fall back hourly has two 01:00",
			spec:     "0 * * * *",
			timezone: "America/New_York",
			from:     utc("2026-11-01T04:00:00Z"), // 00:00 EDT
			until:    utc("2026-11-01T07:00:00Z"),
			want:     []time.Time{utc("2026-11-01T05:00:00Z"), utc("2026-11-01T06:00:00Z"), utc("2026-11-01T07:00:00Z")}, // 01:00 EDT, 01:00 EST, 02:00 EST
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
			name:     "berlin spring forward skips 02:30 that day",
			spec:     "30 2 * * *",
			timezone: "Europe/Berlin",
			from:     utc("2026-03-28T00:00:00Z"),
			until:    utc("2026-03-31T00:00:00Z"),
			want:     []time.Time{utc("2026-03-28T01:30:00Z"), utc("2026-03-30T00:30:00Z")},
		},
		{
			name:     "berlin fall back fires 02:00 twice",
			spec:     "0 2 * * *",
			timezone: "Europe/Berlin",
			from:     utc("2026-10-24T12:00:00Z"),
			until:    utc("2026-10-26T12:00:00Z"),
			want:     []time.Time{utc("2026-10-25T00:00:00Z"), utc("2026-10-25T01:00:00Z"), utc("2026-10-26T01:00:00Z")}, // 02:00 CEST, 02:00 CET
		},
		{
			name:     "berlin seconds across fall back",
			spec:     "0 59 2 * * *",
			timezone: "Europe/Berlin",
			from:     utc("2026-10-25T00:00:00Z"),
			until:    utc("2026-10-25T02:00:00Z"),
			want:     []time.Time{utc("2026-10-25T00:59:00Z"), utc("2026-10-25T01:59:00Z")},
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
			s := mustParse(t, tt.spec, tt.timezone)
			var got []time.Time
			for at := s.Next(tt.from); !at.IsZero() && !at.After(tt.until); at = s.Next(at) {
				got = append(got, at.UTC())
			}
			if !equalTimes(got, tt.want) {
				t.Errorf("fires in (%s, %s]: got %s, want %s", tt.from.Format(time.RFC3339), tt.until.Format(time.RFC3339), formatTimes(got), formatTimes(tt.want))
			}
		})
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
