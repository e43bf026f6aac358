package store

import (
	"strings"
	"time"
)

// This file lays out the requests about a job that the API writes beside
// its spec, under the spec's key and "/": triggers (keys.go), cancel
// requests and backfills. Each is consumed by the partition's owner, and
// goes with the job (Etcd.Delete, Keys.DeleteJobOp).

// JobKeyKind says what a key under a partition's jobs prefix is.
type JobKeyKind int

// The kinds of keys under PartitionJobsPrefix.
const (
	// KeySpec is a job's spec.
	KeySpec JobKeyKind = iota + 1
	// KeyTrigger is a trigger request (Keys.Trigger).
	KeyTrigger
	// KeyCancel is a request to cancel a run (Keys.Cancel).
	KeyCancel
	// KeyBackfill is a job's backfill (Keys.Backfill).
	KeyBackfill
	// KeyHandover is the hand-over of an upstream run's end (Keys.Handover).
	KeyHandover
	// KeyRetry is a request to start a run of steps again from a step
	// (Keys.Retry).
	KeyRetry
)

// JobKey is a key under PartitionJobsPrefix, parsed.
type JobKey struct {
	Kind  JobKeyKind
	JobID string
	// At is the trigger's time (KeyTrigger) or the scheduled time of the
	// run to cancel (KeyCancel); zero otherwise.
	At time.Time
	// UpRun is the upstream run's ID of a hand-over (KeyHandover).
	UpRun string
}

// JobRequestsPrefix is the prefix of every request about job id (its
// triggers, cancel requests and backfill): its spec key and "/". No other
// job's keys start with it: escaped IDs hold no "/".
func (k Keys) JobRequestsPrefix(p int, id string) string { return k.Spec(p, id) + "/" }

// CancelPrefix is the prefix of job id's cancel requests.
func (k Keys) CancelPrefix(p int, id string) string { return k.Spec(p, id) + "/cancel/" }

// Retry is the key of a request to start job id's run for scheduled
// time t again from a step.
func (k Keys) Retry(p int, id string, t time.Time) string {
	return k.Spec(p, id) + "/retry/" + FormatTime(t)
}

// Cancel is the key of a request to cancel job id's run for scheduled
// time t.
func (k Keys) Cancel(p int, id string, t time.Time) string {
	return k.CancelPrefix(p, id) + FormatTime(t)
}

// Backfill is the key of job id's backfill (at most one per job).
func (k Keys) Backfill(p int, id string) string { return k.Spec(p, id) + "/backfill" }

// ParseJobKey parses a key under PartitionJobsPrefix(p): a spec, a
// trigger request, a cancel request, a backfill or a hand-over. ok is false for any
// other key.
func (k Keys) ParseJobKey(p int, key string) (JobKey, bool) {
	rest, found := strings.CutPrefix(key, k.PartitionJobsPrefix(p))
	if !found || strings.HasPrefix(rest, pauseSegment) {
		return JobKey{}, false // a pause key (pause.go) is no request
	}
	esc, tail, hasTail := strings.Cut(rest, "/")
	id, err := UnescapeID(esc)
	if err != nil {
		return JobKey{}, false
	}
	if !hasTail {
		return JobKey{Kind: KeySpec, JobID: id}, true
	}
	if tail == "backfill" {
		return JobKey{Kind: KeyBackfill, JobID: id}, true
	}
	kind, ts, found := strings.Cut(tail, "/")
	if !found {
		return JobKey{}, false
	}
	jk := JobKey{JobID: id}
	if kind == "after" {
		up, err := UnescapeID(ts)
		if err != nil || up == "" {
			return JobKey{}, false
		}
		return JobKey{Kind: KeyHandover, JobID: id, UpRun: up}, true
	}
	switch kind {
	case "trigger":
		jk.Kind = KeyTrigger
	case "cancel":
		jk.Kind = KeyCancel
	case "retry":
		jk.Kind = KeyRetry
	default:
		return JobKey{}, false
	}
	if jk.At, err = time.Parse(TimeFormat, ts); err != nil {
		return JobKey{}, false
	}
	return jk, true
}
