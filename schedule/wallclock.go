package schedule

import (
	"math"
	"time"
)

// This file maps a cron expression's wall-clock times onto instants of a
// time zone, with cronie's rules at daylight saving time (and any other
// change of a zone's UTC offset):
//
//   - A wall time that occurs once is the instant it names.
//   - A wall time that occurs twice (the clock is set back, "fall back")
//     fires once, at its first occurrence, for a fixed-time job (none of
//     its second, minute and hour fields starts with '*'); an interval or
//     wildcard-hour job follows real time and fires at both occurrences.
//   - A wall time that does not occur (the clock jumps ahead, "spring
//     forward") fires a fixed-time job at the instant of the jump, once
//     however many of its times fall in the gap; an interval or
//     wildcard-hour job has no fires in the gap.
//
// A zone is a sequence of segments, maximal intervals of instants with one
// UTC offset; within a segment wall time and real time advance together.
// next walks segments from the one holding its argument and asks
// robfig/cron, on wall-clock times expressed in UTC, for the first match
// the segment can show.

// utcLocation is the location of wall-clock times: a wall time w is held as
// the time.Time in UTC whose fields are w's.
var utcLocation = time.UTC

// segment is a maximal interval [start, end) of instants, in Unix seconds,
// over which a zone has one UTC offset.
type segment struct {
	start, end int64 // math.MinInt64 / math.MaxInt64 when unbounded
	offset     int64 // seconds east of UTC within the segment
	prevOffset int64 // the offset just before start; offset if unbounded
}

// segmentAt returns the segment of loc holding instant sec; its end is
// after sec, so that walking from segment to segment always advances.
func segmentAt(loc *time.Location, sec int64) segment {
	t := time.Unix(sec, 0).In(loc)
	_, off := t.Zone()
	s := segment{start: math.MinInt64, end: math.MaxInt64, offset: int64(off), prevOffset: int64(off)}
	start, end := t.ZoneBounds()
	if !start.IsZero() {
		s.start = start.Unix()
		_, prev := time.Unix(s.start-1, 0).In(loc).Zone()
		s.prevOffset = int64(prev)
	}
	if !end.IsZero() {
		s.end = end.Unix()
	}
	// Past the last transition of its table a zone follows its yearly
	// rule, and the time package then ends the year's last segment at
	// January 1st plus 365 days (in UTC): a day early in a leap year, so
	// that the instants of December 31st name a bound that is not ahead
	// of them. The offset holds to the year's true end, a day later,
	// where the next year's first segment starts.
	for s.end <= sec {
		s.end += secondsPerDay
	}
	return s
}

// secondsPerDay is the length of a day in Unix seconds.
const secondsPerDay = 24 * 60 * 60

// wall returns the wall-clock time of instant sec (plus nsec) in a segment
// with offset off.
func wall(sec int64, nsec int, off int64) time.Time {
	return time.Unix(sec+off, int64(nsec)).UTC()
}

// next returns the first fire of e in loc strictly after after, or the
// zero time when robfig/cron finds no wall-clock match within five years.
// hint, if its segment holds after, saves looking the segment up; next
// returns the segment of the fire for the following call.
func (e *cronExpr) next(loc *time.Location, after time.Time, hint *segment) (time.Time, segment) {
	sec, nsec := after.Unix(), after.Nanosecond()
	seg := segment{}
	if hint != nil && hint.start <= sec && sec < hint.end {
		seg = *hint
	} else {
		seg = segmentAt(loc, sec)
	}
	horizon := after.AddDate(5, 0, 1).Unix()
	for {
		// A fixed-time job whose wall time falls in the gap before this
		// segment fires at its start.
		if e.fixed && seg.start > sec && seg.prevOffset < seg.offset {
			gapFrom := wall(seg.start, 0, seg.prevOffset) // first wall time skipped
			gapTo := wall(seg.start, 0, seg.offset)       // first wall time shown again
			if m := e.wall.Next(gapFrom.Add(-time.Second)); !m.IsZero() && m.Before(gapTo) {
				return time.Unix(seg.start, 0).In(after.Location()), seg
			}
		}
		// The first wall time after after that the segment shows; a
		// fixed-time job skips those its previous segment showed already.
		from := wall(sec, nsec, seg.offset)
		if seg.start > sec {
			from = wall(seg.start-1, 0, seg.offset)
		}
		if e.fixed && seg.prevOffset > seg.offset && seg.start != math.MinInt64 {
			if shown := wall(seg.start-1, 0, seg.prevOffset); shown.After(from) {
				from = shown
			}
		}
		m := e.wall.Next(from)
		if m.IsZero() {
			return time.Time{}, seg
		}
		at := m.Unix() - seg.offset
		if at < seg.end {
			return time.Unix(at, 0).In(after.Location()), seg
		}
		if seg.end >= horizon {
			return time.Time{}, seg
		}
		seg = segmentAt(loc, seg.end)
	}
}
