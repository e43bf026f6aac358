package store

import (
	"fmt"
	"strings"
	"time"
)

// Keys lays out jobfleet's documents in etcd under a namespace. Inputs,
// written by the API, live under jobs/; what the partition's owner writes
// (fenced on its epoch) lives under state/, runs/, queue/, outbox/ and
// failing/:
//
//	jobs/<p>/<id>                    job spec (API)
//	jobs/<p>/<id>/trigger/<time>     manual trigger request (API; the owner fires and deletes it)
//	jobs/<p>/<id>/cancel/<time>      request to cancel the run for <time> (API; the owner applies and deletes it)
//	jobs/<p>/<id>/backfill           backfill request (API), its progress rewritten by the owner (fenced; backfill.go)
//	jobs/<p>/!paused/<id>            pause state, when set by pause or resume (API; pause.go)
//	state/<p>/<id>                   scheduling state (owner)
//	runs/<p>/<id>/<time>             run document (owner)
//	queue/<p>/<id>/<time>            index of runs not yet final (owner)
//	failing/<p>/<id>/<time>          index of runs failed or dead (owner, with the run's status; failing.go)
//	outbox/<p>/<id>/<time>/<event>-<attempt>     run document its notifications deliver (owner, with the run's status)
//	outbox/<p>/<id>/<time>/<event>-<attempt>/<i> notification to deliver to the job's i-th notify entry (owner, likewise)
//	workers/<id>                     worker registration (an orchestrator, under a lease per worker)
//
// <p> is the partition, five digits; <id> is EscapeID(job ID); <time> is
// the scheduled time in TimeFormat, so keys sort by time.
type Keys struct {
	// NS is the namespace prefix, ending in "/".
	NS string
}

func part(p int) string { return string(appendPart(nil, p)) }

// appendPart appends partition p as five digits (more if p > 99999).
func appendPart(b []byte, p int) []byte {
	if p < 0 || p > 99999 {
		return fmt.Appendf(b, "%05d", p)
	}
	return append(b, byte('0'+p/10000), byte('0'+p/1000%10), byte('0'+p/100%10), byte('0'+p/10%10), byte('0'+p%10))
}

// keyBytes is room for a typical key on the stack, so that the hot keys
// (one per run, state and guard of every fire) are built with one
// allocation, their string.
const keyBytes = 160

// partitionKey returns NS + section + <p> + "/" + mid + EscapeID(id) + tail,
// and "/" + FormatTime(at) unless at is zero: the layout of every key
// below a partition.
func (k Keys) partitionKey(section string, p int, mid, id, tail string, at time.Time) string {
	var buf [keyBytes]byte
	b := append(buf[:0], k.NS...)
	b = append(b, section...)
	b = appendPart(b, p)
	b = append(b, '/')
	b = append(b, mid...)
	b = append(b, EscapeID(id)...)
	b = append(b, tail...)
	if !at.IsZero() {
		b = append(b, '/')
		b = at.UTC().AppendFormat(b, TimeFormat)
	}
	return string(b)
}

// JobsPrefix is the prefix of all job specs and triggers.
func (k Keys) JobsPrefix() string { return k.NS + "jobs/" }

// PartitionJobsPrefix is the prefix of partition p's specs and triggers.
func (k Keys) PartitionJobsPrefix(p int) string {
	return k.partitionKey("jobs/", p, "", "", "", time.Time{})
}

// Spec is job id's spec key.
func (k Keys) Spec(p int, id string) string {
	return k.partitionKey("jobs/", p, "", id, "", time.Time{})
}

// TriggerPrefix is the prefix of job id's trigger requests.
func (k Keys) TriggerPrefix(p int, id string) string { return k.Spec(p, id) + "/trigger/" }

// Trigger is the key of a trigger request for scheduled time t.
func (k Keys) Trigger(p int, id string, t time.Time) string {
	return k.TriggerPrefix(p, id) + FormatTime(t)
}

// AllRunsPrefix is the prefix of every run document of the namespace.
func (k Keys) AllRunsPrefix() string { return k.NS + "runs/" }

// AllQueuePrefix is the prefix of every partition's active-run index.
func (k Keys) AllQueuePrefix() string { return k.NS + "queue/" }

// AllStatePrefix is the prefix of every partition's scheduling states.
func (k Keys) AllStatePrefix() string { return k.NS + "state/" }

// StatePrefix is the prefix of partition p's scheduling states.
func (k Keys) StatePrefix(p int) string { return k.partitionKey("state/", p, "", "", "", time.Time{}) }

// State is job id's scheduling state key.
func (k Keys) State(p int, id string) string {
	return k.partitionKey("state/", p, "", id, "", time.Time{})
}

// RunPrefix is the prefix of job id's runs.
func (k Keys) RunPrefix(p int, id string) string {
	return k.partitionKey("runs/", p, "", id, "/", time.Time{})
}

// Run is the key of job id's run for scheduled time t.
func (k Keys) Run(p int, id string, t time.Time) string {
	return k.partitionKey("runs/", p, "", id, "", t)
}

// QueuePrefix is the prefix of partition p's active-run index.
func (k Keys) QueuePrefix(p int) string { return k.partitionKey("queue/", p, "", "", "", time.Time{}) }

// Queue is the active-run index key of job id's run for time t.
func (k Keys) Queue(p int, id string, t time.Time) string {
	return k.partitionKey("queue/", p, "", id, "", t)
}

// ParseSpecKey splits a key under PartitionJobsPrefix(p) into the job ID
// and, for a trigger key, the trigger's time. ok is false for keys of
// neither form (the other requests of a job: ParseJobKey).
func (k Keys) ParseSpecKey(p int, key string) (id string, trigger time.Time, ok bool) {
	rest, found := strings.CutPrefix(key, k.PartitionJobsPrefix(p))
	if !found {
		return "", time.Time{}, false
	}
	esc, tail, hasTail := strings.Cut(rest, "/")
	id, err := UnescapeID(esc)
	if err != nil {
		return "", time.Time{}, false
	}
	if !hasTail {
		return id, time.Time{}, true
	}
	ts, found := strings.CutPrefix(tail, "trigger/")
	if !found {
		return "", time.Time{}, false
	}
	t, err := time.Parse(TimeFormat, ts)
	if err != nil {
		return "", time.Time{}, false
	}
	return id, t, true
}

// parseIDTime splits key, prefix + EscapeID(id) + "/" + FormatTime(t),
// into id and t; ok is false for a key of another form.
func parseIDTime(prefix, key string) (id string, t time.Time, ok bool) {
	rest, found := strings.CutPrefix(key, prefix)
	if !found {
		return "", time.Time{}, false
	}
	esc, ts, found := strings.Cut(rest, "/")
	if !found {
		return "", time.Time{}, false
	}
	id, err := UnescapeID(esc)
	if err != nil {
		return "", time.Time{}, false
	}
	t, err = time.Parse(TimeFormat, ts)
	return id, t, err == nil
}

// ParseQueueKey splits a key under QueuePrefix(p) into job ID and time.
func (k Keys) ParseQueueKey(p int, key string) (id string, t time.Time, ok bool) {
	return parseIDTime(k.QueuePrefix(p), key)
}

// PartitionRunsPrefix is the prefix of partition p's runs.
func (k Keys) PartitionRunsPrefix(p int) string {
	return k.partitionKey("runs/", p, "", "", "", time.Time{})
}

// ParseRunKey splits a key under PartitionRunsPrefix(p) into job ID and
// scheduled time.
func (k Keys) ParseRunKey(p int, key string) (id string, t time.Time, ok bool) {
	return parseIDTime(k.PartitionRunsPrefix(p), key)
}

// RunID returns the ID of job id's run for scheduled time t:
// EscapeID(id) + "@" + FormatTime(t). It is unique per (job, time) and
// URL-path safe.
func RunID(id string, t time.Time) string { return EscapeID(id) + "@" + FormatTime(t) }

// ParseRunID splits a run ID into job ID and scheduled time. For
// convenience it also accepts the job ID unescaped ("a/b@<time>" for the
// run "a%2Fb@<time>"), as a user pasting a run ID into a URL path without
// escaping it again sends it. Errors match ErrNotFound (a malformed ID
// names no run).
func ParseRunID(runID string) (id string, t time.Time, err error) {
	i := strings.LastIndexByte(runID, '@')
	if i < 0 {
		return "", time.Time{}, fmt.Errorf("%w: run ID %s has no '@'", ErrNotFound, quoteClipped(runID))
	}
	id, err = UnescapeID(runID[:i])
	if err != nil {
		id = runID[:i] // not in escaped form: the job ID itself
	}
	if id == "" {
		return "", time.Time{}, fmt.Errorf("%w: run ID %s: no job ID", ErrNotFound, quoteClipped(runID))
	}
	t, err = time.Parse(TimeFormat, runID[i+1:])
	if err != nil {
		return "", time.Time{}, fmt.Errorf("%w: run ID %s: bad time", ErrNotFound, quoteClipped(runID))
	}
	return id, t, nil
}
