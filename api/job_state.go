package api

import "time"

// JobState is the scheduling state the partition's owner keeps for a job,
// apart from its spec so that a spec update never races a fire.
type JobState struct {
	// Last is the latest scheduled time accounted for (fired, skipped or
	// dropped); see schedule.Decision.Last.
	Last time.Time `json:"last"`
	// Next is the next scheduled time, zero if none.
	Next time.Time `json:"next,omitzero"`
	// SpecRevision is the spec revision Last and Next were computed from.
	SpecRevision int64 `json:"spec_revision"`
	// Fired, Skipped and Dropped count the job's scheduled times by fate.
	Fired   int64 `json:"fired"`
	Skipped int64 `json:"skipped"`
	Dropped int64 `json:"dropped"`
	// Runs is how many run documents the job has stored, as of the last
	// fire.
	Runs int `json:"runs"`
	// FinishedAt is when a one-off job finished: its time fired and its
	// runs are final. Zero while it has not. A finished one-off job is
	// deleted after its retention (Job.DeleteAfter).
	FinishedAt time.Time `json:"finished_at,omitzero"`
}
