package schedule

import (
	"fmt"
	"time"
)

// MisfirePolicy says what to do with scheduled times that were missed,
// that is, not fired within the grace period (Policy.Grace) after they
// were due, typically because their partition had no owner for a while.
// The values are those of the job document's "misfire_policy".
type MisfirePolicy string

// The misfire policies.
const (
	// RunOnce collapses missed times into one run: if no time is fired on
	// time in the same decision, the latest missed time fires; all other
	// missed times are skipped. The empty policy means RunOnce.
	RunOnce MisfirePolicy = "run_once"
	// Skip fires no missed time; the job resumes at its next time.
	Skip MisfirePolicy = "skip"
	// RunAll fires every missed time, oldest first, up to Policy.MaxFires.
	RunAll MisfirePolicy = "run_all"
)

// Defaults used for zero fields of Policy.
const (
	// DefaultGrace is how late a fire may be and still count as on time:
	// well above the scheduler's nominal lag and a graceful handoff, well
	// below a crash failover or an outage.
	DefaultGrace = 5 * time.Second
	// DefaultMaxFires bounds the fires of one decision.
	DefaultMaxFires = 100
)

// Policy configures Due. The zero Policy is RunOnce with DefaultGrace and
// DefaultMaxFires.
type Policy struct {
	// Misfire is the job's misfire policy; "" means RunOnce.
	Misfire MisfirePolicy
	// Grace is the lateness up to which a scheduled time is on time: t is
	// on time at now if now-t <= Grace, and missed otherwise. On-time
	// times always fire, whatever the misfire policy. Zero or negative
	// means DefaultGrace.
	Grace time.Duration
	// MaxFires caps len(Decision.Fires); when more times would fire, the
	// oldest are dropped (Decision.Dropped). Zero or negative means
	// DefaultMaxFires.
	MaxFires int
}

// Decision is the outcome of Due: what to fire now and when to look again.
// Every scheduled time in (last, now] whose fire time (Schedule.FireTime:
// the time itself without jitter) is not after now is accounted for
// exactly once: len(Fires) + Skipped + Dropped is the number of such
// times.
type Decision struct {
	// Fires are the scheduled times to fire now, strictly increasing, each
	// in (last, now]. Nil when nothing is due.
	Fires []time.Time
	// Next is the first scheduled time not accounted for: the first
	// strictly after now, or, with jitter, one not after now whose fire
	// time is still to come; the zero time if the schedule never fires
	// again. Wake up at Schedule.FireTime(Next).
	Next time.Time
	// Last is the latest scheduled time in (last, now], whether fired,
	// skipped or dropped, or the given last when there is none. Pass it as
	// last to the next call so that no time is counted twice.
	Last time.Time
	// Missed is how many times in (last, now] were fired later than the
	// grace period after their fire time, whether or not they fire.
	Missed int
	// Skipped is how many missed times do not fire because of the misfire
	// policy.
	Skipped int
	// Dropped is how many times do not fire because of Policy.MaxFires.
	Dropped int
}

// Due decides which scheduled times of s fire at now, given last, the
// latest scheduled time already accounted for (for a job that has never
// fired: its creation time, or for a one-off whose run_at is not after its
// creation, a nanosecond before run_at). It is a pure function of its
// arguments and never reads the clock.
//
// The times considered are those in (last, now] whose fire time f (t
// plus its jitter offset, see Schedule.WithJitter) is not after now. A
// time is on time if now-f <= p.Grace and missed otherwise: the grace
// counts from the jittered time. On-time times fire; missed times
// are handled by p.Misfire (see MisfirePolicy); then the oldest fires
// beyond p.MaxFires are dropped. If now is not after last (a clock behind
// the previous owner's), nothing fires and Next is the first time after
// last.
//
// Cost: constant for Every and Once schedules; for cron schedules
// proportional to the number of scheduled times in (last, now], about
// 0.5 µs each, so a per-second cron expression after a day's outage costs
// about 40 ms.
//
// Errors wrap ErrUnknownPolicy or ErrZeroLast.
func Due(s Schedule, last, now time.Time, p Policy) (Decision, error) {
	misfire, grace, maxFires, err := p.resolve()
	if err != nil {
		return Decision{}, err
	}
	if last.IsZero() {
		return Decision{}, ErrZeroLast
	}
	d := Decision{Last: last}
	if !now.After(last) {
		d.Next = s.Next(last)
		return d, nil
	}

	// Missed times are those whose fire time is before cutoff; on-time
	// ones those whose fire time is in [cutoff, now]. Without jitter a
	// time's fire time is the time itself; with it, a fire time is later
	// than its time but earlier than the next one (Schedule.Offset), so
	// only the latest time before cutoff can be on time, and only the
	// latest time not after now can be not yet due.
	cutoff := now.Add(-grace)
	keep := 0
	switch misfire {
	case RunOnce:
		keep = 1
	case RunAll:
		keep = maxFires
	}
	// Keep at least one missed time: the latest is needed for Decision.Last;
	// with jitter one more, should the latest turn out to be on time.
	want := max(keep, 1)
	if s.Jitter() > 0 {
		want++
	}
	missed, tail := s.before(last, cutoff, want)
	var late time.Time // before cutoff, but fired on time
	if s.Jitter() > 0 && len(tail) > 0 {
		if t := tail[len(tail)-1]; !s.FireTime(t).Before(cutoff) {
			late, tail, missed = t, tail[:len(tail)-1], missed-1
		}
	}
	d.Missed = missed
	var lastMissed time.Time
	if len(tail) > 0 {
		lastMissed = tail[len(tail)-1]
		tail = tail[len(tail)-min(keep, len(tail)):]
	}

	from := last
	if cutoff.After(last) {
		from = cutoff.Add(-time.Nanosecond)
	}
	onTime := s.through(from, now)
	if !late.IsZero() {
		onTime = append([]time.Time{late}, onTime...)
	}
	var waiting time.Time // its fire time is still to come
	if n := len(onTime); s.Jitter() > 0 && n > 0 && s.FireTime(onTime[n-1]).After(now) {
		waiting, onTime = onTime[n-1], onTime[:n-1]
	}

	switch misfire {
	case RunOnce:
		if len(onTime) > 0 {
			tail = nil
		}
		d.Fires = append(tail, onTime...)
		d.Skipped = missed - len(tail)
	case Skip:
		d.Fires = onTime
		d.Skipped = missed
	case RunAll:
		d.Fires = append(tail, onTime...)
		d.Dropped = missed - len(tail)
	}
	if n := len(d.Fires); n > maxFires {
		d.Dropped += n - maxFires
		d.Fires = d.Fires[n-maxFires:]
	}
	if len(d.Fires) == 0 {
		d.Fires = nil
	}

	switch {
	case len(onTime) > 0:
		d.Last = onTime[len(onTime)-1]
	case missed > 0:
		d.Last = lastMissed
	}
	d.Next = s.Next(now)
	if !waiting.IsZero() {
		d.Next = waiting
	}
	return d, nil
}

// resolve fills defaults and checks the policy.
func (p Policy) resolve() (MisfirePolicy, time.Duration, int, error) {
	misfire := p.Misfire
	switch misfire {
	case "":
		misfire = RunOnce
	case RunOnce, Skip, RunAll:
	default:
		return "", 0, 0, fmt.Errorf("%w %q", ErrUnknownPolicy, string(misfire))
	}
	grace := p.Grace
	if grace <= 0 {
		grace = DefaultGrace
	}
	maxFires := p.MaxFires
	if maxFires <= 0 {
		maxFires = DefaultMaxFires
	}
	return misfire, grace, maxFires, nil
}

// before counts the scheduled times in (last, cutoff) and returns the
// latest keep of them, ascending.
func (s Schedule) before(last, cutoff time.Time, keep int) (count int, tail []time.Time) {
	last, cutoff = s.clamp(last, cutoff)
	if !cutoff.After(last) {
		return 0, nil
	}
	if s.kind == kindEvery {
		return s.everyBefore(last, cutoff, keep)
	}
	c := cursor{s: s}
	for t := c.next(last); !t.IsZero() && t.Before(cutoff); t = c.next(t) {
		count++
		if keep > 0 {
			tail = append(tail, t)
			if len(tail) > keep {
				tail = tail[1:]
			}
		}
	}
	return count, tail
}

// everyBefore is before for Every schedules, by arithmetic: the instants
// are k*every seconds since the epoch.
func (s Schedule) everyBefore(last, cutoff time.Time, keep int) (int, []time.Time) {
	first := floorDiv(last.Unix(), s.every) + 1 // first k with k*every > last
	end := cutoff.Unix()                        // last k with k*every < cutoff
	if cutoff.Nanosecond() == 0 {
		end--
	}
	final := floorDiv(end, s.every)
	if final < first {
		return 0, nil
	}
	count := final - first + 1
	n := min(count, int64(keep))
	var tail []time.Time
	if n > 0 {
		tail = make([]time.Time, 0, n)
		for k := final - n + 1; k <= final; k++ {
			tail = append(tail, time.Unix(k*s.every, 0).In(last.Location()))
		}
	}
	return int(min(count, int64(maxInt))), tail
}

const maxInt = int(^uint(0) >> 1)

// through returns the scheduled times in (from, now], ascending.
func (s Schedule) through(from, now time.Time) []time.Time {
	var out []time.Time
	c := cursor{s: s}
	for t := c.next(from); !t.IsZero() && !t.After(now); t = c.next(t) {
		out = append(out, t)
	}
	return out
}

// cursor enumerates the instants of a schedule for the loops above: it
// keeps the zone segment of the previous instant of a cron schedule, so
// that successive instants do not each look the zone up, and ends the
// enumeration (returns zero) should a schedule ever fail to advance.
type cursor struct {
	s   Schedule
	seg *segment
}

func (c *cursor) next(prev time.Time) time.Time {
	var t time.Time
	if c.s.kind == kindCron {
		from := prev
		if lo := c.s.ext.from(); !lo.IsZero() && from.Before(lo) {
			from = lo.Add(-time.Nanosecond)
		}
		var seg segment
		t, seg = c.s.p.cron.next(c.s.p.loc, from, c.seg)
		c.seg = &seg
		t = c.s.bounded(t)
	} else {
		t = c.s.Next(prev)
	}
	if !t.After(prev) {
		return time.Time{}
	}
	return t
}
