package schedule

import "time"

// Between returns the scheduled times of s in [from, to), ascending, at
// most max of them (max < 1: none), and more, the first time of [from,
// to) after those returned (zero if there is none). They are the times
// Due fires, with the same daylight-saving rules: a backfill of them
// makes the runs the schedule's fires would have made.
func (s Schedule) Between(from, to time.Time, max int) (times []time.Time, more time.Time) {
	c := cursor{s: s}
	for t := c.next(from.Add(-time.Nanosecond)); !t.IsZero() && t.Before(to); t = c.next(t) {
		if len(times) == max || max < 1 {
			return times, t
		}
		times = append(times, t)
	}
	return times, time.Time{}
}
