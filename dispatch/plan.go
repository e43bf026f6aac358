package dispatch

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/jobfleet/jobfleet/api"
	"github.com/jobfleet/jobfleet/schedule"
	"github.com/jobfleet/jobfleet/store"
)

// This file is the scheduler's decision logic: pure functions of a job, its
// state, its active runs and the time, with no I/O, so every rule can be
// tested without etcd.

// FirePlan is what to do for one job at one instant.
type FirePlan struct {
	// Runs are the runs to create, with their status: pending, or skipped
	// when the concurrency policy refuses them.
	Runs []api.Run
	// Replace lists active runs to end because concurrency_policy
	// "replace" fired a newer one.
	Replace []string
	// State is the job's new scheduling state.
	State api.JobState
	// Decision is the schedule's decision, for logs and metrics.
	Decision schedule.Decision
}

// PlanFires decides what job j fires at now, given its state and how many
// of its runs are active (not final). It plans from j.PlanFrom(state): the
// latest time accounted for, or the job's creation, and never a time from
// before the job's last change (an edit fires no time of the past). Paused
// jobs, by hand or by their owner (pause_after_failures), fire nothing and
// account nothing: their missed times are forgiven on resume. A job whose
// max_fires is used up fires nothing more and has no next time.
//
// A time that one of cals excludes (j.Exclude) is recorded as a skipped
// run naming the calendar. Under concurrency_policy "forbid" a fire while
// a run is active, or a second fire in the same decision, is recorded as a
// skipped run; under "replace" the active runs are listed for replacement
// and only the latest fire of the decision runs. Callers apply CapActive,
// then LimitFires, to the plan.
func PlanFires(j *api.Job, sched schedule.Schedule, state api.JobState, activeRuns []string, now time.Time, p schedule.Policy, cals api.Calendars, owner string, epoch int64) (FirePlan, error) {
	from := j.PlanFrom(state) // before the pause that ended is cleared: its end bounds it
	plan := FirePlan{State: clearedPause(j, state)}
	if j.Paused || plan.State.AutoPaused(j.Revision) {
		return plan, nil
	}
	if j.Exhausted(plan.State) {
		plan.State.Next, plan.State.SpecRevision, plan.State.Timing = time.Time{}, j.Revision, j.TimingKey()
		return plan, nil
	}
	p.Misfire = schedule.MisfirePolicy(j.MisfirePolicy)
	d, err := schedule.Due(sched, from, now, p)
	if err != nil {
		return FirePlan{}, fmt.Errorf("job %q: %w", j.ID, err)
	}
	plan.Decision = d
	plan.State.Last = d.Last
	plan.State.Next = d.Next
	if !d.Next.IsZero() {
		plan.State.FinishedAt = time.Time{} // it has times again (an edit)
	}
	plan.State.SpecRevision, plan.State.Timing = j.Revision, j.TimingKey()
	plan.State.Skipped += int64(d.Skipped)
	plan.State.Dropped += int64(d.Dropped)
	plan.State.Missed += int64(d.Missed)
	excluded := make([]string, len(d.Fires))
	latest := -1 // the latest fire no calendar excludes
	for i, at := range d.Fires {
		if excluded[i] = cals.Excluding(j.Exclude, at); excluded[i] == "" {
			latest = i
		}
	}
	active := len(activeRuns)
	for i, at := range d.Fires {
		r := NewRun(j, at, now, owner, epoch)
		switch {
		case excluded[i] != "":
			r.Status = api.RunSkipped
			r.Reason = fmt.Sprintf("excluded by calendar %q", excluded[i])
			plan.State.Skipped++
		case j.ConcurrencyPolicy == api.ConcurrencyForbid:
			if active > 0 {
				r.Status = api.RunSkipped
				r.Reason = "concurrency_policy forbid: an earlier run is still active"
				plan.State.Skipped++
			} else {
				active++
			}
		case j.ConcurrencyPolicy == api.ConcurrencyReplace:
			if i < latest {
				r.Status = api.RunSkipped
				r.Reason = "concurrency_policy replace: superseded by a later fire"
				plan.State.Skipped++
			}
		}
		if r.Status == api.RunPending {
			plan.State.Fired++
		}
		plan.Runs = append(plan.Runs, r)
	}
	if j.ConcurrencyPolicy == api.ConcurrencyReplace && latest >= 0 {
		plan.Replace = append(plan.Replace, activeRuns...)
	}
	return plan, nil
}

// PlanTrigger decides what a manual trigger of job j for time at does,
// recorded at now, given its state and its active runs (IDs, not final).
// The trigger's run is pending, or skipped when concurrency_policy
// "forbid" refuses it while a run is active; under "replace" the active
// runs are listed for replacement. Paused jobs can be triggered. The
// state's schedule (Last, Next) is not touched; its counters are. Callers
// apply CapActive to the plan, as to PlanFires'.
func PlanTrigger(j *api.Job, state api.JobState, activeRuns []string, at, now time.Time, owner string, epoch int64) FirePlan {
	plan := FirePlan{State: state}
	r := NewRun(j, at, now, owner, epoch)
	r.Reason = ReasonTriggered
	switch j.ConcurrencyPolicy {
	case api.ConcurrencyForbid:
		if len(activeRuns) > 0 {
			r.Status = api.RunSkipped
			r.Reason = ReasonTriggered + "; concurrency_policy forbid: an earlier run is still active"
		}
	case api.ConcurrencyReplace:
		plan.Replace = append(plan.Replace, activeRuns...)
	}
	if r.Status == api.RunPending {
		plan.State.Fired++
	} else {
		plan.State.Skipped++
	}
	plan.Runs = []api.Run{r}
	return plan
}

// ReasonTriggered is the reason recorded on a run made by a manual
// trigger.
const ReasonTriggered = "triggered manually"

// ActiveAfter returns the active runs of a job after plan: those it does
// not replace, then the runs it creates pending.
func ActiveAfter(activeRuns []string, plan FirePlan) []string {
	var out []string
	for _, id := range activeRuns {
		if !slices.Contains(plan.Replace, id) {
			out = append(out, id)
		}
	}
	for _, r := range plan.Runs {
		if r.Status == api.RunPending {
			out = append(out, r.ID)
		}
	}
	return out
}

// MergePlans returns the plan doing a, then b, for one job in one write:
// b must have been planned from a's state and ActiveAfter(…, a). A run of a
// that b replaces is recorded skipped ("superseded before it ran") instead
// of being created pending and ended in the same write; a run of b whose
// ID a creates already (a trigger in the millisecond of a scheduled fire)
// is dropped, and its count with it.
func MergePlans(a, b FirePlan) FirePlan {
	out := FirePlan{
		Runs:     slices.Clone(a.Runs),
		Replace:  slices.Clone(a.Replace),
		State:    b.State,
		Decision: a.Decision,
	}
	if len(b.Decision.Fires) > 0 || b.Decision.Missed > 0 {
		out.Decision = b.Decision
	}
	for _, id := range b.Replace {
		i := slices.IndexFunc(out.Runs, func(r api.Run) bool { return r.ID == id })
		switch {
		case i >= 0:
			if out.Runs[i].Status == api.RunPending {
				out.Runs[i].Status = api.RunSkipped
				out.Runs[i].Reason = "concurrency_policy replace: superseded by a later run before it ran"
				out.State.Fired--
				out.State.Skipped++
			}
		case !slices.Contains(out.Replace, id):
			out.Replace = append(out.Replace, id)
		}
	}
	for _, r := range b.Runs {
		if slices.ContainsFunc(out.Runs, func(o api.Run) bool { return o.ID == r.ID }) {
			if r.Status == api.RunPending {
				out.State.Fired--
			} else {
				out.State.Skipped--
			}
			continue
		}
		out.Runs = append(out.Runs, r)
	}
	return out
}

// CapActive turns pending runs of plan into skipped ones while job j
// already has max runs active (pending, failed awaiting retry, or running;
// active counts those before the plan), so a job whose runs no worker takes
// (no worker runs its executor type, or no worker is running at all) does
// not pile up runs without bound, to run all at once when a worker comes.
// Runs the plan replaces do not count.
func CapActive(j *api.Job, plan *FirePlan, active, max int) {
	if len(plan.Replace) > 0 {
		active = 0
	}
	for i := range plan.Runs {
		r := &plan.Runs[i]
		if r.Status != api.RunPending {
			continue
		}
		if active < max {
			active++
			continue
		}
		r.Status = api.RunSkipped
		r.Reason = fmt.Sprintf("%d runs of this job are still waiting or running (limit %d): is a worker running that executes %q?", active, max, j.Executor.Type)
		plan.State.Fired--
		plan.State.Skipped++
	}
}

// Replaced returns active run r ended at now because run by replaced it
// (concurrency_policy "replace"; by may be "" if unknown): dead, with the
// reason, and its running attempt, if any, closed as cancelled (a run of
// items: its items not ended skipped, their running attempts closed as
// cancelled). The attempts' workers are told to stop at their next
// heartbeat (Cancel).
func Replaced(r api.Run, by string, now time.Time) api.Run {
	newer := "a newer run"
	if by != "" {
		newer = "run " + by
	}
	return endActive(r, api.RunDead, "replaced by "+newer+" (concurrency_policy replace)",
		"the run was replaced by "+newer+" (concurrency_policy replace)", now)
}

// endActive returns active run r ended at now in final status with
// reason. Its running attempt, if any, is closed with "cancelled: " + why
// as its error, and the reason says so; a run of items has its items not
// ended skipped with why (EndItems), and the reason counts those that
// were running. Replaced and CancelRun end runs through it.
func endActive(r api.Run, status api.RunStatus, reason, why string, now time.Time) api.Run {
	r.Attempts = slices.Clone(r.Attempts)
	r.Reason = reason
	if len(r.Items) > 0 {
		var running []int
		r, running = EndItems(r, why, now)
		if len(running) > 0 {
			r.Reason += fmt.Sprintf("; its %d running items were cancelled", len(running))
		}
	} else if n := len(r.Attempts); r.Status == api.RunRunning && n > 0 {
		a := &r.Attempts[n-1]
		a.FinishedAt = now.UTC()
		a.Error = "cancelled: " + why
		r.Reason += "; its running attempt was cancelled"
	}
	r.Status = status
	return r
}

// NewRun returns the pending run of job j for scheduled time at, fired at
// now by owner under epoch: with j.Shards' items, all pending, for a
// sharded job; marked broadcast, without items yet, for a broadcast job
// (BroadcastItems gives them at the fire).
func NewRun(j *api.Job, at, now time.Time, owner string, epoch int64) api.Run {
	r := newRun(j, at, now, owner, epoch)
	if j.HasSteps() {
		r.Steps, r.Items = NewStepItems(j)
	} else if n := j.Shards.Items(); n > 0 {
		r.Items = NewItems(n)
		r.MinSucceeded, r.MaxParallel = j.Shards.MinSucceeded, j.Shards.MaxParallel
	}
	r.Broadcast = j.Broadcasts()
	return r
}

func newRun(j *api.Job, at, now time.Time, owner string, epoch int64) api.Run {
	return api.Run{
		ID:          store.RunID(j.ID, at),
		JobID:       j.ID,
		Partition:   j.Partition,
		ScheduledAt: at.UTC(),
		FiredAt:     now.UTC(),
		Status:      api.RunPending,
		Attempts:    []api.Attempt{},
		Owner:       owner,
		Epoch:       epoch,
	}
}

// Resumed returns the state of a job resumed at now: times it missed while
// paused are forgiven, not fired, and its count of runs in a row that
// ended dead starts again.
func Resumed(state api.JobState, now time.Time) api.JobState {
	if state.Last.Before(now) {
		state.Last = now
	}
	state.Failures = 0
	return state
}

// Outcome is how an attempt ended.
type Outcome struct {
	Success bool
	// Error describes a failure: the executor's error, "run lease expired",
	// "timed out", …
	Error  string
	Output string
	// Result is the JSON an item of a step returned (a worker's
	// CompleteRequest.Result); kept only for a step's success.
	Result []byte
}

// FinishAttempt records the end of r's current attempt at now and decides
// what follows: succeeded; failed with a retry not before the returned
// time (exponential backoff with jitter, see Backoff); or dead when
// j.Retry.MaxAttempts attempts were made. rnd is a number in [0,1) for the
// jitter.
func FinishAttempt(j *api.Job, r api.Run, o Outcome, now time.Time, rnd float64) (api.Run, time.Time) {
	r.Attempts = append([]api.Attempt(nil), r.Attempts...)
	if n := len(r.Attempts); n > 0 {
		a := &r.Attempts[n-1]
		a.FinishedAt = now.UTC()
		a.Error = o.Error
		a.Output = o.Output
	}
	var notBefore time.Time
	switch {
	case o.Success:
		r.Status = api.RunSucceeded
	case len(r.Attempts) >= j.Retry.MaxAttempts:
		r.Status = api.RunDead
	default:
		r.Status = api.RunFailed
		notBefore = now.Add(Backoff(j.Retry, len(r.Attempts), rnd))
	}
	return r, notBefore
}

// StartAttempt returns r with a new attempt by worker started at now.
func StartAttempt(r api.Run, worker string, now time.Time) api.Run {
	r.Attempts = append(append([]api.Attempt(nil), r.Attempts...), api.Attempt{
		Attempt:   len(r.Attempts) + 1,
		Worker:    worker,
		StartedAt: now.UTC(),
	})
	r.Status = api.RunRunning
	return r
}

// Backoff returns the wait before the retry that follows failed attempt
// number n (from 1): initial × 2^(n-1), capped at max, with "equal jitter"
// (half fixed, half random: rnd in [0,1)), so retries of many runs that
// failed together spread out while each still waits at least half its
// backoff. See "Exponential Backoff And Jitter", AWS Architecture Blog,
// 2015.
func Backoff(p api.RetryPolicy, n int, rnd float64) time.Duration {
	d := p.InitialBackoff.Std()
	for i := 1; i < n && d < p.MaxBackoff.Std(); i++ {
		d *= 2
	}
	d = min(d, p.MaxBackoff.Std())
	return d/2 + time.Duration(rnd*float64(d/2))
}

// jitter returns a random number in [0,1) for Backoff.
func jitter() float64 { return rand.Float64() }

// Dispatchable reports whether r may be handed to a worker at now.
func Dispatchable(r api.Run, notBefore, now time.Time) bool {
	return (r.Status == api.RunPending || r.Status == api.RunFailed) && !now.Before(notBefore)
}

// LeaseExpired reports whether r's running attempt is lost at now: its
// lease ran out without a heartbeat, or it ran past the job's timeout plus
// one lease (a worker that heartbeats but never finishes).
func LeaseExpired(j *api.Job, r api.Run, leaseUntil, now time.Time, lease time.Duration) (bool, string) {
	if r.Status != api.RunRunning || len(r.Attempts) == 0 {
		return false, ""
	}
	if now.After(leaseUntil) {
		return true, "run lease expired: the worker stopped heartbeating"
	}
	started := r.Attempts[len(r.Attempts)-1].StartedAt
	if j != nil && now.After(started.Add(j.Timeout.Std()+lease)) {
		return true, fmt.Sprintf("timed out: still running %v after the %v timeout", now.Sub(started).Round(time.Second), j.Timeout.Std())
	}
	return false, ""
}
