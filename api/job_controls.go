package api

import (
	"fmt"
	"hash/fnv"
	"slices"
	"strconv"
	"time"
)

// This file has the schedule controls of the job document (jitter, the
// window, max_fires, calendars to exclude, pause_after_failures) and the
// rule that bounds what a job's owner may fire after an edit (PlanFrom).

// Limits of the schedule controls.
const (
	// MaxJitter is the largest jitter: a day.
	MaxJitter = Duration(24 * time.Hour)
	// MaxMaxFires is the largest max_fires.
	MaxMaxFires = 1_000_000_000
	// MaxExcludes is the most calendars a job excludes.
	MaxExcludes = 8
	// MaxPauseAfterFailures is the largest pause_after_failures.
	MaxPauseAfterFailures = 1000
	// MinExpectSuccessWithin is the shortest expect_success_within: a
	// minute. Shorter bounds would be decided within the scheduler's own
	// retry and handoff delays (seconds), not the job's.
	MinExpectSuccessWithin = Duration(time.Minute)
	// MaxExpectSuccessWithin is the longest expect_success_within: 400
	// days, beyond a yearly job's period.
	MaxExpectSuccessWithin = Duration(400 * 24 * time.Hour)
)

// Finite reports whether the job can complete: a one-off, or a job with a
// schedule that ends (NotAfter or MaxFires). Only such a job takes
// DeleteAfter.
func (j *Job) Finite() bool {
	return j.IsOneOff() || j.NotAfter != nil || j.MaxFires > 0
}

// Exhausted reports whether state st has used up the job's MaxFires.
func (j *Job) Exhausted(st JobState) bool {
	return j.MaxFires > 0 && st.ScheduledRuns >= j.MaxFires
}

// PlanFrom returns the "last scheduled time" from which the job's owner
// plans (pass it to schedule.Due): st.Last, or InitialLast for a job the
// owner has not planned yet. When the job's timing changed since the
// owner planned it (its schedule, zone, run_at, window or jitter, by a
// PUT, a batch or jobfleet job edit: st.Timing is not TimingKey), it is
// the time of that change, UpdatedAt, even if st.Last is later (an owner
// whose clock ran ahead fired times past the change before it saw it:
// those keep their runs, and the new timing's other times after the
// change are still fired). When its owner's pause of it ended (a resume,
// a PUT) it is at least the time of that change, and after a resume by a
// document at least ResumedAt (a resume by pause key is folded into st by
// the owner, as dispatch.Resumed). So no time of the job's definition
// from before the moment it took that definition is ever fired, as a
// misfire or otherwise, and the first fire after the change is the first
// time after it. An edit that leaves the timing as it was (a payload, an
// executor) changes nothing: the times the fleet missed are still the
// misfire policy's. Where the state cannot tell a change of timing from
// another edit, any write since the job's creation counts as one: a state
// written before TimingKey existed, and no state at all (the job was
// written again before any owner planned it: created while its partition
// had no owner, or created paused and resumed).
func (j *Job) PlanFrom(st JobState) time.Time {
	if st.Last.IsZero() {
		from := j.InitialLast()
		if j.edited() && j.UpdatedAt.After(from) {
			from = j.UpdatedAt
		}
		return from
	}
	last := st.Last
	if j.ResumedAt != nil && j.ResumedAt.After(last) {
		last = *j.ResumedAt // resumed by a document: what the pause kept is forgiven
	}
	retimed := st.Timing != 0 && st.Timing != j.TimingKey()
	changed := retimed || st.Timing == 0 && j.edited()
	if st.Pause != nil && !st.AutoPaused(j.Revision) {
		changed = true
	}
	if changed && j.UpdatedAt.After(last) || retimed {
		// A new timing plans from its change even when the owner had
		// planned past it: only an owner whose clock ran ahead of the
		// writer's fires times after a change before it sees the change
		// (a fire is guarded by the spec it was planned from), and the new
		// definition's times between the change and those fires are owed.
		// A time fired already is not fired again: its run ID exists.
		last = j.UpdatedAt
	}
	return last
}

// TimingKey is a fingerprint of what decides the job's scheduled times:
// its schedule, time zone, run_at, not_before, not_after and jitter (not
// its payload, executor or policies). The owner records it in the state
// it plans (JobState.Timing), to tell a change of timing from another
// edit (PlanFrom). Never 0.
func (j *Job) TimingKey() uint64 {
	h := fnv.New64a()
	at := func(t *time.Time) string {
		if t == nil {
			return "-"
		}
		return strconv.FormatInt(t.UnixNano(), 10)
	}
	for _, part := range []string{j.Schedule, j.Timezone, at(j.RunAt), at(j.NotBefore), at(j.NotAfter), strconv.FormatInt(int64(j.Jitter), 10)} {
		h.Write([]byte(part))
		h.Write([]byte{0})
	}
	return max(h.Sum64(), 1)
}

// edited reports whether a job with a time to keep to (a schedule or a
// run_at) was written since its creation.
func (j *Job) edited() bool {
	return (j.Schedule != "" || j.RunAt != nil) && j.UpdatedAt.After(j.CreatedAt)
}

// validateControls checks the schedule controls.
func (j *Job) validateControls() error {
	switch {
	case j.Jitter < 0:
		return fieldErr("jitter", "%v is negative", j.Jitter)
	case j.Jitter == NoTimeout:
		return fieldErr("jitter", `"none" is not a jitter; leave the field out for none`)
	case j.Jitter > MaxJitter:
		return fieldErr("jitter", "%v is longer than the maximum of %v", j.Jitter, MaxJitter)
	}
	for _, b := range []struct {
		field string
		at    *time.Time
	}{{"not_before", j.NotBefore}, {"not_after", j.NotAfter}} {
		switch {
		case b.at == nil:
		case j.Schedule == "":
			return fieldErr(b.field, "applies only to jobs with a schedule (a one-off fires once at its run_at)")
		case b.at.IsZero():
			return fieldErr(b.field, "must not be the zero time")
		case b.at.Before(MinRunAt):
			return fieldErr(b.field, "%s is before %s; it is probably a mistake", b.at.UTC().Format(time.RFC3339), MinRunAt.Format(time.RFC3339))
		}
	}
	if j.NotBefore != nil && j.NotAfter != nil && j.NotAfter.Before(*j.NotBefore) {
		return fieldErr("not_after", "%s is before not_before %s: the job would never fire",
			j.NotAfter.UTC().Format(time.RFC3339Nano), j.NotBefore.UTC().Format(time.RFC3339Nano))
	}
	switch {
	case j.MaxFires < 0 || j.MaxFires > MaxMaxFires:
		return fieldErr("max_fires", "%d is out of range; want 1 to %d (or leave it out for no limit)", j.MaxFires, MaxMaxFires)
	case j.MaxFires > 0 && j.Schedule == "":
		return fieldErr("max_fires", "applies only to jobs with a schedule (a one-off fires once)")
	}
	if len(j.Exclude) > MaxExcludes {
		return fieldErr("exclude", "%d calendars; at most %d", len(j.Exclude), MaxExcludes)
	}
	for i, name := range j.Exclude {
		field := fmt.Sprintf("exclude[%d]", i)
		if err := ValidateName(field, name, MaxCalendarNameBytes); err != nil {
			return err
		}
		if slices.Contains(j.Exclude[:i], name) {
			return fieldErr(field, "%s is listed twice", quoteClipped(name))
		}
	}
	if j.PauseAfterFailures < 0 || j.PauseAfterFailures > MaxPauseAfterFailures {
		return fieldErr("pause_after_failures", "%d is out of range; want 1 to %d (or leave it out never to pause)", j.PauseAfterFailures, MaxPauseAfterFailures)
	}
	switch w := j.ExpectSuccessWithin; {
	case w == 0:
	case w == NoTimeout:
		return fieldErr("expect_success_within", `"none" is not a bound; leave the field out never to be overdue`)
	case w < MinExpectSuccessWithin || w > MaxExpectSuccessWithin:
		return fieldErr("expect_success_within", "%v is out of range; want %v to %v (or leave it out never to be overdue)", w, MinExpectSuccessWithin, MaxExpectSuccessWithin)
	}
	return nil
}
