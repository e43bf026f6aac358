package api

import (
	"encoding/json"
	"fmt"
	"reflect"
	"strconv"
	"strings"
	"time"

	"github.com/jobfleet/jobfleet/schedule"
)

// Job is a job definition: the "job document" of the HTTP API, stored as
// JSON. Fields marked "server-set" are filled in by the orchestrator that
// stores the job; a client may send them (so that a document read with GET
// can be sent back with PUT), but the server overwrites them.
//
// Decode with DecodeJob, then call Normalize and Validate.
type Job struct {
	// ID names the job: 1 to MaxIDBytes bytes of UTF-8, otherwise
	// free-form (spaces, slashes, percent signs and printable Unicode in
	// any script are allowed), except that an ID must look like what it
	// is, so that two IDs that look alike are the same ID:
	//   - no control characters (Cc), no invisible format characters (Cf:
	//     zero-width space U+200B, right-to-left override U+202E, byte
	//     order mark U+FEFF, ...), no private-use or unassigned code points;
	//   - no variation selectors (U+FE0F, ...), no other character drawn
	//     as nothing or as blank space (U+3164 HANGUL FILLER, U+2800
	//     BRAILLE PATTERN BLANK, ...), no combining mark at the start or
	//     after anything but a letter, digit or mark;
	//   - no white space but the plain space U+0020, and none at the start
	//     or the end;
	//   - in Unicode normalization form NFKC: "café" written with a
	//     combining accent, fullwidth "ｂｉｌｌｉｎｇ", mathematical bold
	//     "𝐛𝐢𝐥𝐥" and ligatures are refused, with the normalized form in
	//     the message (see ValidateNameText for the exact rule);
	//   - no word (run of letters, marks and digits) mixing scripts, such
	//     as a Latin word with a Cyrillic look-alike letter in it, except
	//     Latin with Han, Hiragana, Katakana, Bopomofo or Hangul as
	//     Japanese, Chinese and Korean write (Unicode's "highly
	//     restrictive" profile, UTS #39). Words in different scripts are
	//     fine. A word wholly in another script that looks like a Latin
	//     one (Cyrillic "рау", Latin "pay") is a distinct ID: credentials
	//     scoped to an ID prefix match it exactly, so it cannot pass for
	//     the other; refusing it would refuse ordinary Cyrillic words.
	//   - not "." or "..".
	// Use EscapeID to embed it in an etcd key.
	ID string `json:"id"`
	// Schedule is a cron expression with 5 or 6 fields (the 6th, leading,
	// is seconds), a descriptor such as "@hourly", or "@every <duration>";
	// see schedule.Parse. Mutually exclusive with RunAt. With neither, the
	// job runs once, as soon as it is stored.
	Schedule string `json:"schedule,omitempty"`
	// Timezone is the IANA zone the cron Schedule is interpreted in;
	// default "UTC". It must be a name of the IANA database spelled as
	// the database spells it (see schedule.CheckZoneName): "Europe/Berlin"
	// and the backward-compatible "US/Eastern" are accepted; "right/UTC",
	// "posix/…", "posixrules", "Factory", "Local", paths and case
	// variants are refused when the job is saved. It does not affect
	// RunAt or "@every".
	Timezone string `json:"timezone,omitempty"`
	// RunAt makes the job a one-off that fires once at this instant.
	// Mutually exclusive with Schedule. A RunAt in the past is a missed
	// fire, handled by MisfirePolicy.
	RunAt *time.Time `json:"run_at,omitempty"`
	// Executor says how a worker runs the job; left out for a job made
	// of steps (Steps), whose steps have their own.
	Executor Executor `json:"executor,omitzero"`
	// Steps, if set, makes each run of the job a run of steps: each step
	// an attempt chain (or a sharded set of them) of its own that starts
	// once the steps it needs have ended (see Step), the run's status
	// following from theirs. At most MaxSteps; not together with
	// Executor, Shards or Placement, which each step has instead. The
	// job's Retry and Timeout apply to the steps that set none.
	Steps []Step `json:"steps,omitempty"`
	// Payload is any JSON value handed to the executor: the HTTP body, the
	// shell command's standard input, or the named handler's argument. At
	// most Limits.MaxPayloadBytes bytes. Objects {"secret_env": "NAME"}
	// in it are secret references, replaced by the worker (see
	// ResolveSecretRefs).
	Payload json.RawMessage `json:"payload,omitempty"`
	// Retry bounds the attempts of each run.
	Retry RetryPolicy `json:"retry,omitzero"`
	// Timeout bounds one attempt; default DefaultTimeout, from
	// MinTimeout (1s) to MaxTimeout, or "none" (NoTimeout): the attempt
	// runs until it ends, as long as its worker heartbeats. Zero is not a
	// timeout: "0s" is refused (leave the field out for the default).
	Timeout Duration `json:"timeout,omitzero"`
	// ConcurrencyPolicy says what to do when a run fires while an earlier
	// run of the job is still pending or running; default "allow".
	ConcurrencyPolicy ConcurrencyPolicy `json:"concurrency_policy,omitempty"`
	// MisfirePolicy says what to do with fires that were missed, e.g. while
	// the job's partition had no owner; default "run_once".
	MisfirePolicy MisfirePolicy `json:"misfire_policy,omitempty"`
	// Paused jobs do not fire, and times scheduled while paused are not
	// made up on resume; a paused job can still be triggered by hand.
	Paused bool `json:"paused"`
	// Jitter delays each scheduled fire by a pseudo-random offset in [0,
	// Jitter), at most MaxJitter, so that many jobs on one schedule do not
	// all fire in the same second. The offset is a function of the job's
	// ID and the scheduled time alone (schedule.Schedule.Offset), and
	// never reaches the job's next scheduled time: the run keeps the
	// scheduled time as its ID and its "scheduled_at", and every
	// orchestrator fires it at the same moment. The misfire grace counts
	// from the jittered time. Triggers are not delayed. Left out: none.
	Jitter Duration `json:"jitter,omitzero"`
	// NotBefore and NotAfter bound the scheduled times the job fires: none
	// before NotBefore, none after NotAfter (both included). After
	// NotAfter the job has no more times: once its runs are final it is
	// completed (Status), and deleted after DeleteAfter. Only with a
	// schedule.
	NotBefore *time.Time `json:"not_before,omitempty"`
	NotAfter  *time.Time `json:"not_after,omitempty"`
	// MaxFires is the most runs the schedule starts, 1 to MaxMaxFires:
	// scheduled times fired as pending runs (triggers and skipped times do
	// not count). The count is the job's state.scheduled_runs, kept by
	// its partition's owner with the fires, so it survives handoffs and
	// crashes. Once reached, the job is completed like one past
	// NotAfter. Left out: unlimited. Only with a schedule.
	MaxFires int64 `json:"max_fires,omitempty"`
	// Exclude names calendars (PUT /v1/calendars/{name}) whose dates and
	// ranges the job does not fire in: a scheduled time inside one is
	// recorded as a skipped run naming the calendar. At most
	// MaxExcludes; a name that no calendar has excludes nothing.
	Exclude []string `json:"exclude,omitempty"`
	// PauseAfterFailures pauses the job once that many of its runs in a
	// row ended dead (every attempt failed or was lost), 1 to
	// MaxPauseAfterFailures; the owner records why (state.pause)
	// and notifies "paused" subscribers. A run that succeeds resets the
	// count, and so does resuming the job. Left out: never.
	PauseAfterFailures int `json:"pause_after_failures,omitempty"`
	// ExpectSuccessWithin is the job's dead man's switch: when none of
	// its runs has succeeded for that long (since its last success, or
	// since the job was created or last written if it has none), its
	// owner records it overdue (state.overdue) and notifies "overdue"
	// subscribers, once per overdue episode; a success ends the episode.
	// From MinExpectSuccessWithin to MaxExpectSuccessWithin. A job paused
	// by hand is never overdue and waits afresh from its resume; one its
	// owner paused (pause_after_failures) still goes overdue. See
	// dispatch.OverdueAt. Left out: never overdue.
	ExpectSuccessWithin Duration `json:"expect_success_within,omitzero"`
	// History bounds the job's stored runs; zero fields take the fleet's
	// defaults. See HistoryPolicy.
	History HistoryPolicy `json:"history,omitzero"`
	// DeleteAfter is how long a completed job is kept before it is
	// deleted with its runs: a one-off once it has fired and its run is
	// final, a job with NotAfter or MaxFires once its last time has fired
	// and its runs are final; see Retention. Refused on jobs with a
	// schedule that never ends.
	DeleteAfter Retention `json:"delete_after,omitempty"`
	// Notify are the URLs told of the job's run outcomes (see
	// Notification); none uses the fleet's default (--notify-url).
	Notify []Notification `json:"notify,omitempty"`
	// Placement says where the job's runs execute: which workers may run
	// its attempts, whether each fire runs on every such worker, and how
	// retries spread; nil: one worker that serves the executor type, and
	// retries elsewhere when another worker can take them (see
	// PlacementPolicy).
	Placement *PlacementPolicy `json:"placement,omitempty"`
	// Shards, if set, makes each run a sharded run of several items; see
	// Shards.
	Shards *Shards `json:"shards,omitempty"`
	// Limits names limit keys (PUT /v1/limits/{key}), at most
	// MaxJobLimits: each attempt of the job, and of each of its items,
	// starts only while every key with a stored limit has room, and holds
	// a slot of each while it runs. A key no limit is stored for bounds
	// nothing.
	Limits []string `json:"limits,omitempty"`
	// Priority orders the job's attempts when workers' slots or a limit
	// key's room are scarce: MinPriority to MaxPriority, higher first;
	// nil: DefaultPriority. A waiting attempt ages (see EffectivePriority)
	// so that a low priority still runs.
	Priority *int `json:"priority,omitempty"`
	// After makes the job fire once for each run of the jobs it names that
	// ends in one of the entry's states, besides its own schedule; with
	// neither schedule nor run_at it fires only so (AfterOnly). At most
	// MaxAfter entries; a cycle of jobs is refused when the job is saved.
	// The run fired is for the upstream run's scheduled time (the next
	// free millisecond if the job has a run for it), records the
	// upstream run in Run.CausedBy and takes the job's own payload.
	After []Dependency `json:"after,omitempty"`

	// Partition is the job's partition, xxhash64(ID) mod P. Server-set.
	Partition int `json:"partition"`
	// CreatedAt is when the job was first stored. Server-set.
	CreatedAt time.Time `json:"created_at,omitzero"`
	// UpdatedAt is when the job was last stored. Server-set.
	UpdatedAt time.Time `json:"updated_at,omitzero"`
	// ResumedAt is when a write of the whole document (a PUT, a batch)
	// last resumed the job: set "paused": false while it was paused.
	// Server-set, kept by later writes; the partition's owner plans from
	// it at least (PlanFrom), so that a resume it did not see (its
	// partition had no owner) forgives the times the pause kept, as one
	// it sees does. A resume by pause key (store.Etcd.SetPaused) has the
	// key's updated_at instead.
	ResumedAt *time.Time `json:"resumed_at,omitempty"`
	// Revision is the etcd mod revision of the stored job. Server-set;
	// a write that names one replaces only the job at that revision (see
	// store.Etcd.Put), and a negative one is refused.
	Revision int64 `json:"revision,omitempty"`
	// State is the scheduling state the partition's owner records (next
	// fire, counts of fired, skipped and dropped times); set on reads, nil
	// before the owner has taken the job in. Ignored on writes.
	State *JobState `json:"state,omitempty"`
	// Status is "active", "paused" (by hand, or by PauseAfterFailures) or
	// "completed" (a one-off that ran, or a job past NotAfter or
	// MaxFires, with its runs final); set on reads with State (see
	// ApplyState), empty otherwise. Ignored on writes.
	Status JobStatus `json:"status,omitempty"`
}

// Executor types with built-in workers. Any other non-empty Type names a
// handler registered by Go code that embeds the worker library.
const (
	// ExecutorHTTP sends the payload (or Body) to URL with Method.
	ExecutorHTTP = "http"
	// ExecutorShell runs Command, without a shell unless Command names one,
	// with the payload on standard input. Workers refuse it unless started
	// with --allow-shell.
	ExecutorShell = "shell"
)

// Executor says how a worker runs a job. Which fields apply depends on
// Type; Validate rejects fields that do not apply.
type Executor struct {
	// Type is "http", "shell", or the name of a registered handler
	// (letters, digits, '-', '_', '.', ':'; starting with a letter; at most
	// 64 bytes).
	Type string `json:"type"`
	// URL is the absolute http or https URL of an "http" executor.
	URL string `json:"url,omitempty"`
	// Method is the HTTP method of an "http" executor; default "POST".
	Method string `json:"method,omitempty"`
	// Headers are extra request headers of an "http" executor. Names
	// starting with "Jobfleet-" are reserved for the headers jobfleet sets.
	// A value is a string, or a secret reference {"secret_env": "NAME"}
	// that the worker resolves from its environment (see HeaderValue).
	// Readers without write access get literal values redacted
	// (Job.Redacted).
	Headers map[string]HeaderValue `json:"headers,omitempty"`
	// Body, if set, is sent by an "http" executor instead of the job's
	// payload. At most Limits.MaxPayloadBytes bytes of JSON; it may hold
	// secret references, like the payload.
	Body json.RawMessage `json:"body,omitempty"`
	// FollowRedirects lets an "http" executor follow redirects: at most
	// a few hops, each within the worker's destination policy, never
	// changing the method or dropping the body. Without it a 3xx reply
	// fails the attempt.
	FollowRedirects bool `json:"follow_redirects,omitempty"`
	// Command is the argv of a "shell" executor: program, then arguments.
	Command []string `json:"command,omitempty"`
}

// RetryPolicy bounds the attempts of a run. The n-th retry waits
// InitialBackoff·2^(n-1), at most MaxBackoff.
type RetryPolicy struct {
	// MaxAttempts is the number of attempts including the first, 1 to
	// MaxAttempts; default DefaultMaxAttempts (no retry). Left out means
	// the default; 0 is refused.
	MaxAttempts int `json:"max_attempts,omitempty"`
	// InitialBackoff is the wait before the first retry; default
	// DefaultInitialBackoff, at least MinBackoff (1ms): to retry almost at
	// once, give "1ms". Left out means the default; "0s" is refused.
	InitialBackoff Duration `json:"initial_backoff,omitzero"`
	// MaxBackoff caps the wait between attempts, at least InitialBackoff
	// (and MinBackoff) and at most MaxTimeout; default the larger of
	// DefaultMaxBackoff and InitialBackoff. "0s" is refused.
	MaxBackoff Duration `json:"max_backoff,omitzero"`
}

// ConcurrencyPolicy is the job document's "concurrency_policy".
type ConcurrencyPolicy string

// The concurrency policies.
const (
	// ConcurrencyAllow lets runs of a job overlap.
	ConcurrencyAllow ConcurrencyPolicy = "allow"
	// ConcurrencyForbid records a new run as skipped while an earlier one
	// is pending or running.
	ConcurrencyForbid ConcurrencyPolicy = "forbid"
	// ConcurrencyReplace cancels the earlier run in favour of the new one.
	ConcurrencyReplace ConcurrencyPolicy = "replace"
)

// MisfirePolicy is the job document's "misfire_policy". Its values are
// those of schedule.MisfirePolicy; convert with
// schedule.MisfirePolicy(job.MisfirePolicy).
type MisfirePolicy string

// The misfire policies; see schedule.MisfirePolicy for their exact rules.
const (
	// MisfireRunOnce fires the latest missed time only.
	MisfireRunOnce MisfirePolicy = MisfirePolicy(schedule.RunOnce)
	// MisfireSkip fires no missed time.
	MisfireSkip MisfirePolicy = MisfirePolicy(schedule.Skip)
	// MisfireRunAll fires every missed time, up to a cap.
	MisfireRunAll MisfirePolicy = MisfirePolicy(schedule.RunAll)
)

// Duration is a time.Duration that is written in JSON as a Go duration
// string ("1s", "1m30s", "5m", "1h") and read from one; NoTimeout is
// written and read as "none". A JSON null leaves it unchanged.
type Duration time.Duration

// Std returns d as a time.Duration (a century for NoTimeout).
func (d Duration) Std() time.Duration { return time.Duration(d) }

// String formats d like time.Duration.String without zero trailing units:
// "5m" rather than "5m0s", "1h" rather than "1h0m0s"; and NoTimeout as
// "none".
func (d Duration) String() string {
	if d == NoTimeout {
		return "none"
	}
	s := time.Duration(d).String()
	if strings.HasSuffix(s, "m0s") {
		s = s[:len(s)-2]
	}
	if strings.HasSuffix(s, "h0m") {
		s = s[:len(s)-2]
	}
	return s
}

// MarshalJSON writes d as a JSON string, see String.
func (d Duration) MarshalJSON() ([]byte, error) {
	return []byte(strconv.Quote(d.String())), nil
}

// UnmarshalJSON reads a Go duration string such as "30s" or "1h30m", or
// "none" (NoTimeout; Validate accepts it only as a job's timeout).
// Numbers are rejected: a bare 30 could mean seconds or nanoseconds. The
// error is a *json.UnmarshalTypeError, which encoding/json annotates with
// the field's path and DecodeJob turns into a *FieldError.
func (d *Duration) UnmarshalJSON(data []byte) error {
	if string(data) == "null" {
		return nil
	}
	var s string
	if err := json.Unmarshal(data, &s); err != nil {
		return &json.UnmarshalTypeError{Value: string(data), Type: durationType}
	}
	if s == "none" {
		*d = NoTimeout
		return nil
	}
	v, err := time.ParseDuration(s)
	if err != nil {
		return &json.UnmarshalTypeError{Value: strconv.Quote(s), Type: durationType}
	}
	*d = Duration(v)
	return nil
}

var durationType = reflect.TypeFor[Duration]()

// ParseSchedule returns the job's schedule: Once(RunAt) for a one-off, the
// parsed Schedule in Timezone for a recurring job, within NotBefore and
// NotAfter, Once(CreatedAt) for a job with neither (it runs once, as
// soon as it is stored), and the zero Schedule (no times) for a job with
// neither that has "after"; each with the job's Jitter keyed by its ID. The
// job is expected to have passed Validate; errors are those of
// schedule.Parse.
func (j *Job) ParseSchedule() (schedule.Schedule, error) {
	var s schedule.Schedule
	switch {
	case j.RunAt != nil:
		s = schedule.Once(*j.RunAt)
	case j.Schedule != "":
		var err error
		if s, err = schedule.Parse(j.Schedule, j.Timezone); err != nil {
			return schedule.Schedule{}, fmt.Errorf("job %q: %w", j.ID, err)
		}
		var from, to time.Time
		if j.NotBefore != nil {
			from = *j.NotBefore
		}
		if j.NotAfter != nil {
			to = *j.NotAfter
		}
		s = s.Within(from, to)
	case j.AfterOnly():
		return schedule.Schedule{}, nil // fires only after its upstream jobs' runs
	default:
		s = schedule.Once(j.CreatedAt)
	}
	return s.WithJitter(j.Jitter.Std(), j.ID), nil
}

// InitialLast returns the "last scheduled time" to pass to schedule.Due
// for a job that has never fired: CreatedAt for a recurring job, so that
// it first fires at its first scheduled time after creation; and a
// nanosecond before the earlier of CreatedAt and RunAt for a one-off (or a
// job with neither schedule nor run_at), so that its single time is due
// even when it is not after the creation time.
func (j *Job) InitialLast() time.Time {
	switch {
	case j.Schedule != "":
		return j.CreatedAt
	case j.RunAt != nil && j.RunAt.Before(j.CreatedAt):
		return j.RunAt.Add(-time.Nanosecond)
	default:
		return j.CreatedAt.Add(-time.Nanosecond)
	}
}
