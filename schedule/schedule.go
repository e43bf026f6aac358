package schedule

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"
)

// Errors returned by this package. They are wrapped with detail (the
// offending spec, interval or zone name); test for them with errors.Is.
var (
	// ErrInvalidCron means a spec is neither a valid 5- or 6-field cron
	// expression nor a known descriptor.
	ErrInvalidCron = errors.New("invalid cron expression")
	// ErrInvalidEvery means an "@every" interval is malformed, below
	// MinEvery, or not a whole number of seconds.
	ErrInvalidEvery = errors.New("invalid @every interval")
	// ErrNeverFires means a spec parses but names no instant that exists,
	// such as "0 0 30 2 *" (February 30th).
	ErrNeverFires = errors.New("schedule never fires")
	// ErrUnknownZone means a time zone name is not in the IANA database
	// available to the process, or is the machine-dependent "Local".
	ErrUnknownZone = errors.New("unknown time zone")
	// ErrUnknownPolicy means a Policy names a misfire policy other than
	// RunOnce, Skip or RunAll.
	ErrUnknownPolicy = errors.New("unknown misfire policy")
	// ErrZeroLast means Due was called with a zero last time.
	ErrZeroLast = errors.New("last scheduled time is zero")
)

// MinEvery is the shortest interval accepted by "@every" and Every.
const MinEvery = time.Second

// neverFiresProbe is the instant from which Parse asks for a first fire to
// reject specs that never fire. robfig/cron searches five years ahead; the
// window 2000–2005 holds two February 29ths, so every satisfiable
// combination of month, day and weekday is found in it.
var neverFiresProbe = time.Date(2000, time.January, 1, 0, 0, 0, 0, time.UTC)

type kind uint8

const (
	kindNever kind = iota // the zero Schedule
	kindCron
	kindEvery
	kindOnce
)

// Schedule is a set of instants at which a job fires. The zero Schedule
// never fires. A Schedule is an immutable value, safe for concurrent use.
type Schedule struct {
	kind  kind
	p     *parsed // kindCron, kindEvery: what was parsed
	every int64   // kindEvery: the interval in whole seconds; kindOnce: the instant, in Unix nanoseconds
	// ext holds the bounds and jitter (Within and WithJitter, bounds.go);
	// nil for none, so that the schedules of most jobs stay small.
	ext *refinement
}

// parsed is what a recurring Schedule was parsed from, held in one
// allocation of its own so that a Schedule stays small (a one-off job's
// has none). It is never modified once a Schedule holds it.
type parsed struct {
	cron cronExpr       // kindCron
	loc  *time.Location // kindCron: the zone its wall-clock times are in
	text string         // the spec (String formats kindOnce's)
}

// Parse parses a recurring schedule: a cron expression or a descriptor,
// interpreted in the named IANA time zone ("" means UTC).
//
// Accepted specs:
//   - 5 fields, "minute hour day-of-month month day-of-week"; fires at second 0;
//   - 6 fields, "second minute hour day-of-month month day-of-week";
//   - @yearly (= @annually), @monthly, @weekly, @daily (= @midnight), @hourly;
//   - "@every <duration>", see Every (the time zone does not apply).
//
// The dialect is Vixie cron's (as cronie has it), field by field:
// second and minute 0–59, hour 0–23, day of month 1–31, month 1–12 or
// JAN–DEC, day of week 0–7 or SUN–SAT with both 0 and 7 Sunday (so
// "1-7" and "MON-SUN" are Monday to Sunday). Each field is a list of
// "*", a value or a range "a-b", each optionally stepped ("*/15",
// "1-30/2", and "5/15" for "5-max/15"). A step larger than the field's
// number of values is refused ("*/90" minutes would fire hourly). "?"
// means "*" in the two day fields only. Names are case-insensitive.
//
// Day of month and day of week: if either field starts with '*' (as "*"
// and "*/2" do), a day must match both; if both are restricted, a day
// matching either fires ("0 0 13 * FRI" fires on every 13th and every
// Friday).
//
// Wall times are those of the zone, with cronie's rules at daylight
// saving time: see the package documentation.
//
// "L", "W", "#", "H" and @reboot are refused with a message naming them.
// A "CRON_TZ=" or "TZ=" prefix is refused: the zone comes only from the
// timezone argument, so a job has exactly one place that sets it.
//
// Errors wrap ErrInvalidCron, ErrInvalidEvery, ErrNeverFires or
// ErrUnknownZone; those of ErrInvalidCron name the field, the value and
// the rule broken.
func Parse(spec, timezone string) (Schedule, error) {
	loc, err := LoadLocation(timezone)
	if err != nil {
		return Schedule{}, err
	}
	text := strings.TrimSpace(spec)
	if text == "" {
		return Schedule{}, fmt.Errorf("%w: empty", ErrInvalidCron)
	}
	if strings.HasPrefix(text, "CRON_TZ=") || strings.HasPrefix(text, "TZ=") {
		return Schedule{}, fmt.Errorf("%w %q: a time zone prefix is not accepted; set the time zone separately", ErrInvalidCron, spec)
	}
	if fields := strings.Fields(text); fields[0] == "@every" {
		if len(fields) != 2 {
			return Schedule{}, fmt.Errorf("%w %q: want \"@every <duration>\", e.g. \"@every 30s\"", ErrInvalidEvery, spec)
		}
		d, err := time.ParseDuration(fields[1])
		if err != nil {
			return Schedule{}, fmt.Errorf("%w %q: %v", ErrInvalidEvery, spec, err)
		}
		s, err := Every(d)
		if err != nil {
			return Schedule{}, err
		}
		s.p = &parsed{text: text} // the spec as written
		return s, nil
	}
	expr, err := parseCronExpr(text)
	if err != nil {
		return Schedule{}, fmt.Errorf("%w %q: %v", ErrInvalidCron, spec, err)
	}
	s := Schedule{kind: kindCron, p: &parsed{cron: expr, loc: loc, text: text}}
	if s.Next(neverFiresProbe).IsZero() {
		return Schedule{}, fmt.Errorf("%w: %q names no existing date", ErrNeverFires, spec)
	}
	return s, nil
}

// Every returns a schedule that fires every d, anchored at the Unix epoch:
// it fires at the instants that are whole multiples of d since
// 1970-01-01T00:00:00Z. So "@every 1m" fires at second 0 of each minute,
// "@every 1h" on the hour and "@every 24h" at midnight UTC, whatever the
// job's time zone and creation time.
//
// Anchoring makes the scheduled times, and so the run IDs derived from
// them, a function of the schedule alone: two owners of a partition agree
// on them without sharing any state. (robfig/cron's own ConstantDelaySchedule
// instead fires d after whatever time it is handed.)
//
// d must be at least MinEvery and a whole number of seconds; otherwise the
// error wraps ErrInvalidEvery.
func Every(d time.Duration) (Schedule, error) {
	if d < MinEvery {
		return Schedule{}, fmt.Errorf("%w: %v is below the minimum of %v", ErrInvalidEvery, d, MinEvery)
	}
	if d%time.Second != 0 {
		return Schedule{}, fmt.Errorf("%w: %v is not a whole number of seconds", ErrInvalidEvery, d)
	}
	return Schedule{kind: kindEvery, every: int64(d / time.Second), p: &parsed{text: "@every " + d.String()}}, nil
}

// Once returns a schedule that fires exactly once, at at (a job's run_at),
// an instant from 1678 to 2262 (what Unix nanoseconds hold). Once of the
// zero time never fires.
func Once(at time.Time) Schedule {
	if at.IsZero() {
		return Schedule{}
	}
	// Only the instant matters (not a monotonic reading, not the zone);
	// String formats it when asked, so that a one-off job's schedule holds
	// no text of its own.
	return Schedule{kind: kindOnce, every: at.UnixNano()}
}

// Next returns the first instant of the schedule strictly after after, in
// after's location, or the zero time if there is none. Cron schedules have
// whole-second instants and, like robfig/cron, look at most five years
// ahead: a schedule that fires less often than that (February 29th around
// the year 2100) reports no next fire.
func (s Schedule) Next(after time.Time) time.Time {
	if lo := s.ext.from(); !lo.IsZero() && after.Before(lo) {
		after = lo.Add(-time.Nanosecond).In(after.Location())
	}
	return s.bounded(s.rawNext(after))
}

// rawNext is Next without the bounds of Within.
func (s Schedule) rawNext(after time.Time) time.Time {
	switch s.kind {
	case kindCron:
		t, _ := s.p.cron.next(s.p.loc, after, nil)
		return t
	case kindEvery:
		k := floorDiv(after.Unix(), s.every) + 1
		return time.Unix(k*s.every, 0).In(after.Location())
	case kindOnce:
		if at := time.Unix(0, s.every); at.After(after) {
			return at.In(after.Location())
		}
	}
	return time.Time{}
}

// Interval returns an "@every" schedule's interval, 0 for other kinds.
func (s Schedule) Interval() time.Duration {
	if s.kind != kindEvery {
		return 0
	}
	return time.Duration(s.every) * time.Second
}

// IsZero reports whether s is the zero Schedule, which never fires.
func (s Schedule) IsZero() bool { return s.kind == kindNever }

// Location returns the time zone cron fields are interpreted in; UTC for
// @every, one-off and zero schedules, whose instants do not depend on it.
func (s Schedule) Location() *time.Location {
	if s.kind == kindCron {
		return s.p.loc
	}
	return time.UTC
}

// String returns the spec the schedule was parsed from (trimmed), "@every
// <d>" for Every, "once at <RFC 3339 UTC>" for Once and "never" for the
// zero Schedule.
func (s Schedule) String() string {
	switch s.kind {
	case kindNever:
		return "never"
	case kindOnce:
		return "once at " + time.Unix(0, s.every).UTC().Format(time.RFC3339Nano)
	}
	return s.p.text
}

// floorDiv returns a/b rounded towards negative infinity; b > 0.
func floorDiv(a, b int64) int64 {
	q := a / b
	if a%b != 0 && a < 0 {
		q--
	}
	return q
}

// zones caches successfully loaded locations by name; time.LoadLocation
// reads the zone database on every call.
var zones sync.Map // string -> *time.Location

// LoadLocation returns the IANA time zone with the given name. "" and
// "UTC" mean UTC. "Local" is rejected because it would make a job's
// schedule depend on the machine evaluating it. Errors wrap ErrUnknownZone.
//
// Zone rules come from the process's zone database (the system's, or the
// one embedded by importing time/tzdata); orchestrators of one fleet should
// run with the same database version, or they may disagree about the
// instants of a cron schedule in a zone whose rules changed recently.
func LoadLocation(name string) (*time.Location, error) {
	switch name {
	case "", "UTC":
		return time.UTC, nil
	case "Local":
		return nil, fmt.Errorf("%w %q: name the zone explicitly, e.g. \"Europe/Berlin\"", ErrUnknownZone, name)
	}
	if loc, ok := zones.Load(name); ok {
		return loc.(*time.Location), nil
	}
	loc, err := time.LoadLocation(name)
	if err != nil {
		return nil, fmt.Errorf("%w %q", ErrUnknownZone, name)
	}
	zones.Store(name, loc)
	return loc, nil
}
