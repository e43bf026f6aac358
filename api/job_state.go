package api

import "time"

// JobState is the scheduling state the partition's owner keeps for a job,
// apart from its spec so that a spec update never races a fire. The owner
// writes it only in its fenced transactions, with the runs whose fates it
// counts, so every count here survives handoffs and crashes.
type JobState struct {
	// Last is the latest scheduled time accounted for (fired, skipped or
	// dropped); see schedule.Decision.Last.
	Last time.Time `json:"last"`
	// Next is the next scheduled time, zero if none.
	Next time.Time `json:"next,omitzero"`
	// SpecRevision is the job's revision (as reads show it) Last and Next
	// were computed from.
	SpecRevision int64 `json:"spec_revision"`
	// Timing is the Job.TimingKey of the definition Last and Next were
	// computed from (0 in states written before it existed).
	Timing uint64 `json:"timing,omitempty"`
	// Fired, Skipped and Dropped count the job's scheduled times by fate.
	Fired   int64 `json:"fired"`
	Skipped int64 `json:"skipped"`
	Dropped int64 `json:"dropped"`
	// Missed counts the scheduled times that were not fired within the
	// misfire grace (while the job's partition had no owner, or etcd was
	// unreachable), whatever the misfire policy then did with them: the
	// job's share of jobfleet_misfires_total.
	Missed int64 `json:"missed,omitempty"`
	// ScheduledRuns counts the runs the schedule started (scheduled times
	// fired as pending runs; not triggers, not skipped times): what
	// Job.MaxFires bounds.
	ScheduledRuns int64 `json:"scheduled_runs,omitempty"`
	// Failures counts the job's runs in a row that ended dead, recorded
	// with each run's final status (0 after a success), for
	// Job.PauseAfterFailures; kept only for jobs that set it.
	Failures int `json:"failures,omitempty"`
	// Pause is the owner's pause of the job (PauseAfterFailures); nil when
	// the owner has not paused it. Never modified once a state holds it.
	Pause *AutoPause `json:"pause,omitempty"`
	// LastSucceededAt is when the owner recorded the latest run of the
	// job that succeeded; kept only for jobs with expect_success_within
	// (Job.ExpectSuccessWithin), from their first success on.
	LastSucceededAt time.Time `json:"last_succeeded_at,omitzero"`
	// Overdue is the owner's finding that no run of the job succeeded
	// within its expect_success_within: set, with the job's "overdue"
	// notifications, when the episode begins; nil while the job is not
	// overdue (a success, a resume or an edit that moves the deadline
	// ends the episode). Written fenced with the notifications, so a new
	// owner knows the episode was notified.
	Overdue *Overdue `json:"overdue,omitempty"`
	// Runs is how many run documents the job has stored, as of the last
	// fire.
	Runs int `json:"runs"`
	// FinishedAt is when the job completed: a one-off job's time fired,
	// or a job's last time within its window or max_fires fired, and its
	// runs are final. Zero while it has not. A completed job is deleted
	// after its retention (Job.DeleteAfter).
	FinishedAt time.Time `json:"finished_at,omitzero"`
}

// AutoPause is a pause the job's owner decided (Job.PauseAfterFailures):
// why, when, and the job's revision it paused. It holds while the job has
// that revision: any later write of the job (a resume, a PUT) ends it.
type AutoPause struct {
	Reason   string    `json:"reason"`
	At       time.Time `json:"at"`
	Revision int64     `json:"revision"`
}

// Overdue is an overdue episode of a job (JobState.Overdue).
type Overdue struct {
	// Since is when the job became overdue: its last success (or its
	// last write, or resume) plus its expect_success_within.
	Since time.Time `json:"since"`
	// NotifiedAt is when the owner recorded it and wrote its "overdue"
	// notifications.
	NotifiedAt time.Time `json:"notified_at"`
}

// OverdueNotice is what an "overdue" notification delivers.
type OverdueNotice struct {
	JobID string `json:"job_id"`
	// Event is "overdue".
	Event RunStatus `json:"event"`
	// ExpectSuccessWithin is the job's bound.
	ExpectSuccessWithin Duration `json:"expect_success_within"`
	// LastSucceededAt is when a run of the job last succeeded; left out
	// if none did since the bound was set.
	LastSucceededAt time.Time `json:"last_succeeded_at,omitzero"`
	// Since is when the job became overdue (Overdue.Since).
	Since time.Time `json:"since"`
	// DecidedAt is when the owner found it overdue.
	DecidedAt time.Time `json:"decided_at"`
}

// AutoPaused reports whether the state pauses the job at revision rev: the
// owner paused it (PauseAfterFailures) and the job was not written since.
func (s *JobState) AutoPaused(rev int64) bool {
	return s != nil && s.Pause != nil && s.Pause.Revision == rev
}

// PausedReason returns why the owner paused the job, "" unless its pause
// holds at revision rev.
func (s *JobState) PausedReason(rev int64) string {
	if !s.AutoPaused(rev) {
		return ""
	}
	return s.Pause.Reason
}

// JobStatus is a job's status as reads report it (Job.Status).
type JobStatus string

// The job statuses.
const (
	// JobActive: the job fires on its schedule.
	JobActive JobStatus = "active"
	// JobPaused: the job is paused, by hand or by PauseAfterFailures.
	JobPaused JobStatus = "paused"
	// JobCompleted: the job has no more times to fire and its runs are
	// final: a one-off that ran, or a job past its not_after or
	// max_fires. It is deleted after its delete_after.
	JobCompleted JobStatus = "completed"
)

// ApplyState sets j's State to st as read beside the spec, and what it
// decides of the job: Paused while the owner's pause holds
// (JobState.AutoPaused), and Status. st may be nil (the owner has not
// taken the job in yet).
func (j *Job) ApplyState(st *JobState) {
	j.State = st
	if st.AutoPaused(j.Revision) {
		j.Paused = true
	}
	switch {
	case st != nil && !st.FinishedAt.IsZero():
		j.Status = JobCompleted
	case j.Paused:
		j.Status = JobPaused
	default:
		j.Status = JobActive
	}
}
