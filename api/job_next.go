package api

import (
	"fmt"
	"time"
)

// MaxNextFires is the most scheduled times NextFires and PreviewFires
// return.
const MaxNextFires = 100

// NextFires returns up to n (1 to MaxNextFires) of job j's scheduled
// times after now, in order, computed by package schedule as the
// partition's owner fires them (the job's zone and its daylight-saving
// rules, "@every" anchored at the Unix epoch). A recurring job lists the
// times after now (and after the last time its owner accounted for, and
// after its creation); a one-off job lists its single time, even if it is
// past, until its owner has fired it, and nothing after. A paused job
// lists the times it would fire once resumed. The job must be valid;
// errors are those of ParseSchedule.
func (j *Job) NextFires(now time.Time, n int) ([]time.Time, error) {
	if n < 1 || n > MaxNextFires {
		return nil, fmt.Errorf("%w: count %d outside 1..%d", ErrInvalidJob, n, MaxNextFires)
	}
	sched, err := j.ParseSchedule()
	if err != nil {
		return nil, err
	}
	if j.IsOneOff() {
		at := sched.Next(j.InitialLast())
		if at.IsZero() || (j.State != nil && (!j.State.FinishedAt.IsZero() || !j.State.Last.Before(at))) {
			return []time.Time{}, nil
		}
		return []time.Time{at}, nil
	}
	after := now
	if j.State != nil && j.State.Last.After(after) {
		after = j.State.Last
	}
	if j.CreatedAt.After(after) {
		after = j.CreatedAt
	}
	fires := make([]time.Time, 0, n)
	for len(fires) < n {
		t := sched.Next(after)
		if t.IsZero() {
			break
		}
		fires = append(fires, t)
		after = t
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
