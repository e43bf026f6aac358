package api

import (
	"math"
	"time"
)

// The priorities of jobs and steps (Job.Priority, Step.Priority).
const (
	// MinPriority and MaxPriority bound a priority.
	MinPriority, MaxPriority = 0, 9
	// DefaultPriority is the priority of a job that gives none.
	DefaultPriority = 5
)

// PriorityOf returns priority p, DefaultPriority if nil.
func PriorityOf(p *int) int {
	if p == nil {
		return DefaultPriority
	}
	return *p
}

// EffectivePriority returns the priority an attempt of priority p that
// has waited since since competes with at now: p plus one for each whole
// aging it has waited (aging ≤ 0: no aging, p). It never overflows: the
// wait's share is capped at math.MaxInt32.
//
// An attempt that has waited ten agings longer than another is ahead of
// it whatever their priorities (the aging adds at least ten, priorities
// differ by at most nine); of two of the same effective priority, the
// one waiting longer is ahead.
func EffectivePriority(p int, since, now time.Time, aging time.Duration) int {
	if aging <= 0 || !now.After(since) {
		return p
	}
	return p + int(min(int64(now.Sub(since)/aging), math.MaxInt32))
}

// validatePriority checks a job's or step's priority.
func validatePriority(p *int) error {
	if p != nil && (*p < MinPriority || *p > MaxPriority) {
		return fieldErr("priority", "%d; want %d to %d", *p, MinPriority, MaxPriority)
	}
	return nil
}
