package schedule

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/robfig/cron/v3"
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

// parser accepts 5-field cron (minute precision), 6-field cron whose first
// field is seconds, and the descriptors @yearly, @annually, @monthly,
// @weekly, @daily, @midnight and @hourly. "@every" is handled by Every.
var parser = cron.NewParser(cron.SecondOptional | cron.Minute | cron.Hour |
	cron.Dom | cron.Month | cron.Dow | cron.Descriptor)

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
	cron  *cron.SpecSchedule // kindCron; its Location is always set explicitly
	every int64              // kindEvery: the interval in whole seconds
	at    time.Time          // kindOnce
	text  string
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
// Field syntax is robfig/cron's: "*", "?", lists, ranges, steps and month
// and weekday names. Day of week runs 0–6 with Sunday 0; 7 is rejected.
// When both day of month and day of week are restricted a day matches if
// either does, as in Vixie cron. "L", "W", "#" and @reboot are not
// supported.
//
// A "CRON_TZ=" or "TZ=" prefix is rejected: the zone comes only from the
// timezone argument, so a job has exactly one place that sets it.
//
// Errors wrap ErrInvalidCron, ErrInvalidEvery, ErrNeverFires or
// ErrUnknownZone.
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
		s.text = text
		return s, nil
	}
	cs, err := parseCron(text)
	if err != nil {
		return Schedule{}, fmt.Errorf("%w %q: %v", ErrInvalidCron, spec, err)
	}
	cs.Location = loc
	s := Schedule{kind: kindCron, cron: cs, text: text}
	if s.Next(neverFiresProbe).IsZero() {
		return Schedule{}, fmt.Errorf("%w: %q names no existing date", ErrNeverFires, spec)
	}
	return s, nil
}

// parseCron calls robfig/cron and converts its panics (it has had some on
// odd input) into errors.
func parseCron(text string) (spec *cron.SpecSchedule, err error) {
	defer func() {
		if r := recover(); r != nil {
			spec, err = nil, fmt.Errorf("parser failed: %v", r)
		}
	}()
	s, err := parser.Parse(text)
	if err != nil {
		return nil, err
	}
	spec, ok := s.(*cron.SpecSchedule)
	if !ok {
		return nil, fmt.Errorf("unexpected schedule type %T", s)
	}
	return spec, nil
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
	return Schedule{kind: kindEvery, every: int64(d / time.Second), text: "@every " + d.String()}, nil
}

// Once returns a schedule that fires exactly once, at at (a job's run_at).
// Once of the zero time never fires.
func Once(at time.Time) Schedule {
	if at.IsZero() {
		return Schedule{}
	}
	at = at.Round(0) // drop any monotonic reading: only the instant matters
	return Schedule{kind: kindOnce, at: at, text: "once at " + at.UTC().Format(time.RFC3339Nano)}
}

// Next returns the first instant of the schedule strictly after after, in
// after's location, or the zero time if there is none. Cron schedules have
// whole-second instants and, like robfig/cron, look at most five years
// ahead: a schedule that fires less often than that (February 29th around
// the year 2100) reports no next fire.
func (s Schedule) Next(after time.Time) time.Time {
	switch s.kind {
	case kindCron:
		return s.cron.Next(after)
	case kindEvery:
		k := floorDiv(after.Unix(), s.every) + 1
		return time.Unix(k*s.every, 0).In(after.Location())
	case kindOnce:
		if s.at.After(after) {
			return s.at.In(after.Location())
		}
	}
	return time.Time{}
}

// IsZero reports whether s is the zero Schedule, which never fires.
func (s Schedule) IsZero() bool { return s.kind == kindNever }

// Location returns the time zone cron fields are interpreted in; UTC for
// @every, one-off and zero schedules, whose instants do not depend on it.
func (s Schedule) Location() *time.Location {
	if s.kind == kindCron {
		return s.cron.Location
	}
	return time.UTC
}

// String returns the spec the schedule was parsed from (trimmed), "@every
// <d>" for Every, "once at <RFC 3339 UTC>" for Once and "never" for the
// zero Schedule.
func (s Schedule) String() string {
	if s.kind == kindNever {
		return "never"
	}
	return s.text
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
