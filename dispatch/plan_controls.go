package dispatch

import (
	"fmt"
	"time"

	"github.com/jobfleet/jobfleet/api"
)

// This file has the decisions of the schedule controls that are not the
// schedule's own (the window and jitter are schedule.Schedule's): the
// count of runs max_fires bounds, and pause_after_failures. Like the rest
// of plan.go they are pure functions of a job, its state and its runs.

// LimitFires counts the runs plan starts for job j's schedule (its pending
// runs; plan is PlanFires', after CapActive) in plan.State.ScheduledRuns
// and enforces max_fires: the runs from the one that would go beyond it
// on are not created (their times are counted dropped), and a job whose
// max_fires is reached has no next time, so that it completes once its
// runs are final. The count is written with the runs, in the same fenced
// transaction, so it survives handoffs and crashes.
func LimitFires(j *api.Job, plan *FirePlan) {
	for i, r := range plan.Runs {
		if j.Exhausted(plan.State) {
			for _, x := range plan.Runs[i:] {
				if x.Status == api.RunPending {
					plan.State.Fired--
				} else {
					plan.State.Skipped--
				}
				plan.State.Dropped++
			}
			plan.Runs = plan.Runs[:i]
			break
		}
		if r.Status == api.RunPending {
			plan.State.ScheduledRuns++
		}
	}
	if j.Exhausted(plan.State) {
		plan.State.Next = time.Time{}
	}
}

// CountOutcome returns job j's state after its run r ended with r's final
// status, for pause_after_failures: a run that ended dead adds one to the
// job's failures in a row, one that succeeded sets them to 0 (skipped
// runs, never executed, and cancelled ones change nothing). When the
// failures reach j.PauseAfterFailures, the state pauses the job at its
// current revision (JobState.AutoPaused), with the reason and the time,
// and pause is true.
// Callers write the state in the transaction that records r's status, so
// the count is as durable as the runs it counts. Jobs without
// pause_after_failures keep no count: the state is returned as it is.
func CountOutcome(j *api.Job, st api.JobState, r api.Run, now time.Time) (next api.JobState, pause bool) {
	if j.PauseAfterFailures <= 0 {
		return st, false
	}
	switch r.Status {
	case api.RunSucceeded:
		st.Failures = 0
		return st, false
	case api.RunDead:
		st.Failures++
	default:
		return st, false
	}
	if st.Failures < j.PauseAfterFailures || j.Paused || st.AutoPaused(j.Revision) {
		return st, false
	}
	why := "its last attempt was lost"
	if n := len(r.Attempts); n > 0 && r.Attempts[n-1].Error != "" {
		why = clipReason(r.Attempts[n-1].Error)
	}
	st.Pause = &api.AutoPause{
		Reason:   fmt.Sprintf("pause_after_failures: %d runs in a row ended dead; the last, %s: %s", st.Failures, r.ID, why),
		At:       now.UTC(),
		Revision: j.Revision,
	}
	return st, true
}

// clearedPause returns st without its owner's pause once that no longer
// holds (job j was written since: resumed, or replaced), and with its
// failures in a row counted afresh.
func clearedPause(j *api.Job, st api.JobState) api.JobState {
	if st.Pause != nil && !st.AutoPaused(j.Revision) {
		st.Pause, st.Failures = nil, 0
	}
	return st
}

// maxReasonBytes bounds the error quoted in a paused reason.
const maxReasonBytes = 200

// clipReason cuts s to maxReasonBytes on a character boundary.
func clipReason(s string) string {
	if len(s) <= maxReasonBytes {
		return s
	}
	cut := maxReasonBytes
	for cut > 0 && s[cut]&0xC0 == 0x80 {
		cut--
	}
	return s[:cut] + "…"
}
