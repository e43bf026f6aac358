package api

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"slices"
	"sort"
	"time"

	"github.com/jobfleet/jobfleet/schedule"
)

// Calendar is a named set of excluded dates and ranges of local time in
// a zone: the calendar document of PUT /v1/calendars/{name}. Jobs name
// the calendars whose times they do not fire in (Job.Exclude); the
// owners of every partition follow the calendars as they change.
//
// Decode with DecodeCalendar, then call Normalize and Validate.
type Calendar struct {
	// Name names the calendar, with the rules of job IDs (ValidateName),
	// at most MaxCalendarNameBytes. A credential limited to a job-ID
	// prefix manages only the calendars whose names start with it.
	Name string `json:"name"`
	// Timezone is the IANA zone the dates and ranges are read in; default
	// "UTC".
	Timezone string `json:"timezone,omitempty"`
	// Description says what the calendar is for, at most
	// MaxCalendarDescriptionBytes.
	Description string `json:"description,omitempty"`
	// Dates are whole days excluded, "2006-01-02": from midnight to the
	// next midnight in Timezone.
	Dates []string `json:"dates,omitempty"`
	// Ranges are intervals of local time excluded, each [from, to).
	Ranges []DateRange `json:"ranges,omitempty"`
	// UpdatedAt is when the calendar was last stored. Server-set.
	UpdatedAt time.Time `json:"updated_at,omitzero"`
	// Revision is the etcd mod revision of the stored calendar.
	// Server-set; ignored on writes.
	Revision int64 `json:"revision,omitempty"`
}

// DateRange is an interval of local time of a calendar's zone, from From
// (included) to To (excluded), each "2006-01-02" (midnight),
// "2006-01-02T15:04" or "2006-01-02T15:04:05".
type DateRange struct {
	From string `json:"from"`
	To   string `json:"to"`
}

// CalendarList is the reply of GET /v1/calendars.
type CalendarList struct {
	Calendars  []Calendar `json:"calendars"`
	NextCursor string     `json:"next_cursor,omitempty"`
}

// Limits of calendars.
const (
	// MaxCalendarNameBytes is the longest calendar name.
	MaxCalendarNameBytes = MaxIDBytes
	// MaxCalendarDescriptionBytes bounds Calendar.Description.
	MaxCalendarDescriptionBytes = 1024
	// MaxCalendarEntries is the most dates and ranges of one calendar
	// together.
	MaxCalendarEntries = 1000
	// MaxCalendarBytes is the largest calendar document.
	MaxCalendarBytes = 64 << 10
	// MaxCalendars is the most calendars a fleet stores: every owner
	// holds them all.
	MaxCalendars = 1000
)

// ErrInvalidCalendar is matched by every error of DecodeCalendar and
// Calendar.Validate; most are a *FieldError naming the field.
var ErrInvalidCalendar = errors.New("invalid calendar")

// calendarError marks a *FieldError as a calendar's.
type calendarError struct{ *FieldError }

func (e calendarError) Unwrap() []error { return []error{e.FieldError, ErrInvalidCalendar} }

func calErr(field, format string, args ...any) error {
	return calendarError{fieldErr(field, format, args...)}
}

// DecodeCalendar reads one calendar document from r, at most
// MaxCalendarBytes, with the strict decoder (Unmarshal). Errors match
// ErrInvalidCalendar (and ErrInvalidJob, as every document error of the
// API does); those about one value are a *FieldError naming its path.
func DecodeCalendar(r io.Reader) (Calendar, error) {
	data, err := io.ReadAll(io.LimitReader(r, MaxCalendarBytes+1))
	if err != nil {
		return Calendar{}, fmt.Errorf("read calendar: %w", err)
	}
	if len(data) > MaxCalendarBytes {
		return Calendar{}, calendarError{fieldErr("calendar", "more than %d bytes", MaxCalendarBytes)}
	}
	var c Calendar
	if err := Unmarshal(bytes.TrimSpace(data), &c); err != nil {
		var de *DecodeError
		if errors.As(err, &de) {
			field := de.Path
			if field == "" {
				field = "calendar"
			}
			return Calendar{}, calErr(field, "%s", de.Msg)
		}
		return Calendar{}, err
	}
	return c, nil
}

// Normalize fills the default zone.
func (c *Calendar) Normalize() {
	if c.Timezone == "" {
		c.Timezone = DefaultTimezone
	}
}

// Validate checks the calendar and returns the first problem as an error
// matching ErrInvalidCalendar, a *FieldError naming the field.
func (c *Calendar) Validate() error {
	if err := ValidateName("name", c.Name, MaxCalendarNameBytes); err != nil {
		return calendarError{err.(*FieldError)}
	}
	if err := schedule.CheckZoneName(c.Timezone); err != nil {
		return calErr("timezone", "%v", err)
	}
	if _, err := schedule.LoadLocation(c.Timezone); err != nil {
		return calErr("timezone", "%v", err)
	}
	if len(c.Description) > MaxCalendarDescriptionBytes {
		return calErr("description", "%d bytes long; want at most %d", len(c.Description), MaxCalendarDescriptionBytes)
	}
	if n := len(c.Dates) + len(c.Ranges); n > MaxCalendarEntries {
		return calErr("dates", "%d dates and ranges; at most %d together", n, MaxCalendarEntries)
	}
	_, err := c.Compile()
	return err
}

// CompiledCalendar is a calendar as the scheduler reads it: its excluded
// intervals of instants, merged and sorted. It is immutable, safe for
// concurrent use.
type CompiledCalendar struct {
	// Name is the calendar's name.
	Name  string
	spans []span
}

type span struct{ from, to time.Time } // [from, to)

// Calendar time formats: a day, and a local time to the minute or second.
const (
	dateLayout    = "2006-01-02"
	minuteLayout  = "2006-01-02T15:04"
	secondsLayout = "2006-01-02T15:04:05"
)

// Compile returns the calendar's excluded intervals; errors are those of
// Validate about its dates and ranges.
func (c *Calendar) Compile() (*CompiledCalendar, error) {
	tz := c.Timezone
	if tz == "" {
		tz = DefaultTimezone
	}
	loc, err := schedule.LoadLocation(tz)
	if err != nil {
		return nil, calErr("timezone", "%v", err)
	}
	out := &CompiledCalendar{Name: c.Name}
	for i, d := range c.Dates {
		field := fmt.Sprintf("dates[%d]", i)
		day, err := time.ParseInLocation(dateLayout, d, loc)
		if err != nil || day.Format(dateLayout) != d {
			return nil, calErr(field, "%s is not a date such as \"2026-12-25\"", quoteClipped(d))
		}
		if slices.Contains(c.Dates[:i], d) {
			return nil, calErr(field, "%s is listed twice", quoteClipped(d))
		}
		y, m, dd := day.Date()
		out.spans = append(out.spans, span{from: time.Date(y, m, dd, 0, 0, 0, 0, loc), to: time.Date(y, m, dd+1, 0, 0, 0, 0, loc)})
	}
	for i, r := range c.Ranges {
		field := fmt.Sprintf("ranges[%d]", i)
		from, err := localTime(r.From, loc)
		if err != nil {
			return nil, calErr(field+".from", "%v", err)
		}
		to, err := localTime(r.To, loc)
		if err != nil {
			return nil, calErr(field+".to", "%v", err)
		}
		if !to.After(from) {
			return nil, calErr(field+".to", "%s is not after from %s: the range is empty", quoteClipped(r.To), quoteClipped(r.From))
		}
		out.spans = append(out.spans, span{from: from, to: to})
	}
	sort.Slice(out.spans, func(a, b int) bool { return out.spans[a].from.Before(out.spans[b].from) })
	merged := out.spans[:0]
	for _, s := range out.spans {
		if n := len(merged); n > 0 && !s.from.After(merged[n-1].to) {
			if s.to.After(merged[n-1].to) {
				merged[n-1].to = s.to
			}
			continue
		}
		merged = append(merged, s)
	}
	out.spans = merged
	return out, nil
}

// localTime parses a range's end in loc.
func localTime(s string, loc *time.Location) (time.Time, error) {
	for _, layout := range []string{dateLayout, minuteLayout, secondsLayout} {
		if len(s) != len(layout) {
			continue
		}
		t, err := time.ParseInLocation(layout, s, loc)
		if err == nil && t.Format(layout) == s {
			return t, nil
		}
	}
	return time.Time{}, fmt.Errorf("%s is not a local time such as \"2026-12-24\", \"2026-12-24T12:00\" or \"2026-12-24T12:00:00\"", quoteClipped(s))
}

// Excludes reports whether instant t falls in one of the calendar's dates
// or ranges. A nil calendar excludes nothing.
func (c *CompiledCalendar) Excludes(t time.Time) bool {
	if c == nil {
		return false
	}
	i := sort.Search(len(c.spans), func(i int) bool { return c.spans[i].to.After(t) })
	return i < len(c.spans) && !t.Before(c.spans[i].from)
}

// Calendars are the calendars an owner holds, by name; a nil Calendars
// holds none. Read-only once built.
type Calendars map[string]*CompiledCalendar

// Excluding returns the name of the first of the calendars names (a job's
// Exclude) that excludes t, and "" if none does (a name cs does not hold
// excludes nothing).
func (cs Calendars) Excluding(names []string, t time.Time) string {
	for _, n := range names {
		if cs[n].Excludes(t) {
			return n
		}
	}
	return ""
}
