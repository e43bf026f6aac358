package api

import (
	"fmt"
	"time"
)

// MaxNextFires is the most scheduled times NextFires and PreviewFires
// return.
const MaxNextFires = 100

// NextFires returns up to n (1 to MaxNextFires) of job j's scheduled
// times after now, in order: Upcoming's times without calendars.
func (j *Job) NextFires(now time.Time, n int) ([]time.Time, error) {
	up, err := j.Upcoming(now, n, nil)
	if err != nil {
		return nil, err
	}
	out := make([]time.Time, len(up))
	for i, u := range up {
		out[i] = u.At
	}
	return out, nil
}

// Upcoming is one of a job's next times: At is the scheduled time (its
// run's ID and scheduled_at), FireAt when it fires (At delayed by the
// job's jitter; At without).
type Upcoming struct {
	At, FireAt time.Time
}

// maxUpcomingScan bounds the scheduled times Upcoming looks at to find n
// that no calendar excludes.
const maxUpcomingScan = 100_000

// Upcoming returns up to n (1 to MaxNextFires) of job j's next fires
// after now, in order, computed by package schedule as the partition's
// owner fires them (the job's zone and its daylight-saving rules, "@every"
// anchored at the Unix epoch, its window, its jitter). A recurring job
// lists the times that fire after now, after the time its owner planned
// from (PlanFrom: the last time it accounted for, the job's creation or
// its last change), skipping those a calendar of cals excludes, and no
// more than its max_fires has left; a one-off job lists its single time,
// even if it is past, until its owner has fired it, and nothing after. A
// paused job lists the times it would fire once resumed. The job must be
// valid; errors are those of ParseSchedule.
func (j *Job) Upcoming(now time.Time, n int, cals Calendars) ([]Upcoming, error) {
	if n < 1 || n > MaxNextFires {
		return nil, fmt.Errorf("%w: count %d outside 1..%d", ErrInvalidJob, n, MaxNextFires)
	}
	sched, err := j.ParseSchedule()
	if err != nil {
		return nil, err
	}
	var st JobState
	if j.State != nil {
		st = *j.State
	}
	up := func(t time.Time) Upcoming { return Upcoming{At: t, FireAt: sched.FireTime(t)} }
	if j.IsOneOff() {
		at := sched.Next(j.PlanFrom(st))
		if at.IsZero() || !st.FinishedAt.IsZero() || cals.Excluding(j.Exclude, at) != "" {
			return []Upcoming{}, nil
		}
		return []Upcoming{up(at)}, nil
	}
	if j.MaxFires > 0 {
		n = int(min(int64(n), max(j.MaxFires-st.ScheduledRuns, 0)))
	}
	// A time up to a jitter before now may fire after it.
	after := now.Add(-sched.Jitter())
	if from := j.PlanFrom(st); from.After(after) {
		after = from
	}
	fires := make([]Upcoming, 0, n)
	for scanned := 0; len(fires) < n && scanned < maxUpcomingScan; scanned++ {
		t := sched.Next(after)
		if t.IsZero() {
			break
		}
		after = t
		if u := up(t); u.FireAt.After(now) && cals.Excluding(j.Exclude, t) == "" {
			fires = append(fires, u)
		}
	}
	return fires, nil
}

// PreviewFires returns up to n (1 to MaxNextFires) scheduled times after
// now of a job that would have schedule spec in timezone, or run_at runAt
// (as a job created at now): what NextFires will answer once it is
// stored. Errors are *FieldError naming "schedule", "timezone", "run_at"
// or "count" (ValidateTiming's checks).
func PreviewFires(spec, timezone string, runAt *time.Time, now time.Time, n int) ([]time.Time, error) {
	if n < 1 || n > MaxNextFires {
		return nil, fieldErr("count", "%d: want 1 to %d", n, MaxNextFires)
	}
	if spec == "" && runAt == nil {
		return nil, fieldErr("schedule", "give a schedule (cron expression, descriptor or @every) or a run_at")
	}
	if err := ValidateTiming(spec, timezone, runAt, now); err != nil {
		return nil, err
	}
	j := Job{ID: "preview", Schedule: spec, Timezone: timezone, RunAt: runAt, CreatedAt: now}
	return j.NextFires(now, n)
}
