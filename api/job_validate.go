package api

import (
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/jobfleet/jobfleet/schedule"
)

// Errors of the job model. Validation and decoding errors match
// ErrInvalidJob with errors.Is; most are a *FieldError naming the field.
var (
	// ErrInvalidJob is matched by every error that DecodeJob and Validate
	// return for bad input.
	ErrInvalidJob = errors.New("invalid job")
	// ErrTooLarge means a job document exceeds DecodeJob's size limit. It
	// also matches ErrInvalidJob.
	ErrTooLarge = fmt.Errorf("%w: document too large", ErrInvalidJob)
	// ErrStaleRevision means a write named the revision of the job it
	// replaces, and the stored job has another (it changed, or was
	// deleted, since the writer read it).
	ErrStaleRevision = errors.New("stale revision")
)

// Limits and defaults of the job document.
const (
	// MaxIDBytes is the longest job ID, in bytes.
	MaxIDBytes = 200
	// DefaultMaxPayloadBytes is Limits.MaxPayloadBytes by default: 256 KiB.
	DefaultMaxPayloadBytes = 256 << 10
	// DefaultMaxDocumentBytes is DecodeJob's size limit when it is given
	// none: 1 MiB.
	DefaultMaxDocumentBytes = 1 << 20

	// DefaultTimeout is the timeout of a job that sets none.
	DefaultTimeout = Duration(time.Hour)
	// MinTimeout is the shortest timeout: an attempt must have time to
	// reach its executor.
	MinTimeout = Duration(time.Second)
	// MinBackoff is the shortest retry.initial_backoff and
	// retry.max_backoff: to retry almost at once, give it.
	MinBackoff = Duration(time.Millisecond)
	// MinRetention is the shortest history.max_age.
	MinRetention = Duration(time.Second)
	// MaxTimeout is the longest timeout, and the longest backoff.
	MaxTimeout = Duration(24 * time.Hour)
	// NoTimeout is the Timeout of a job whose attempts run as long as they
	// take ("timeout": "none"); only the run lease, renewed by the
	// worker's heartbeats, bounds them. Its value is a century, so that
	// arithmetic on it stays in range; it is written and read as "none".
	NoTimeout = Duration(100 * 365 * 24 * time.Hour)
	// DefaultMaxAttempts is Retry.MaxAttempts by default: no retry.
	DefaultMaxAttempts = 1
	// MaxAttempts is the largest Retry.MaxAttempts.
	MaxAttempts = 100
	// DefaultInitialBackoff is Retry.InitialBackoff by default.
	DefaultInitialBackoff = Duration(time.Second)
	// DefaultMaxBackoff is Retry.MaxBackoff by default (unless
	// InitialBackoff is larger).
	DefaultMaxBackoff = Duration(time.Minute)
	// DefaultMethod is Executor.Method of an "http" executor by default.
	DefaultMethod = "POST"
	// DefaultTimezone is Job.Timezone by default.
	DefaultTimezone = "UTC"

	// maxHandlerBytes is the longest named handler type.
	maxHandlerBytes = 64

	// Per-field limits, so that no single field can take a whole document.

	// MaxScheduleBytes bounds Job.Schedule.
	MaxScheduleBytes = 1024
	// MaxTimezoneBytes bounds Job.Timezone; IANA names are at most about
	// 30 bytes.
	MaxTimezoneBytes = 64
	// MaxURLBytes bounds Executor.URL.
	MaxURLBytes = 8 << 10
	// MaxHeaders bounds the number of Executor.Headers.
	MaxHeaders = 64
	// MaxHeaderNameBytes bounds the name of one of Executor.Headers.
	MaxHeaderNameBytes = 256
	// MaxHeaderValueBytes bounds the value of one of Executor.Headers.
	MaxHeaderValueBytes = 8 << 10
	// MaxCommandArgs bounds the number of words of Executor.Command.
	MaxCommandArgs = 1024
	// MaxCommandBytes bounds the words of Executor.Command together.
	MaxCommandBytes = 128 << 10
	// MaxJSONDepth bounds the nesting of arrays and objects in
	// Job.Payload and Executor.Body.
	MaxJSONDepth = 64
	// MaxRunAtAhead is how far ahead of the store's clock RunAt may be.
	MaxRunAtAhead = 100 * 365 * 24 * time.Hour
)

// MinRunAt is the earliest RunAt: the Unix epoch. Earlier times are
// typing mistakes (a zero year) that would fire at once.
var MinRunAt = time.Unix(0, 0).UTC()

// Limits are the configurable bounds Validate enforces. A zero field means
// its default.
type Limits struct {
	// MaxPayloadBytes bounds Job.Payload and Executor.Body, in bytes of
	// JSON; default DefaultMaxPayloadBytes.
	MaxPayloadBytes int
}

// DefaultLimits returns the default Limits.
func DefaultLimits() Limits {
	return Limits{MaxPayloadBytes: DefaultMaxPayloadBytes}
}

// FieldError is a validation or decoding error about one field of a job
// document. It matches ErrInvalidJob with errors.Is.
type FieldError struct {
	// Field is the field's path in the JSON document, such as "schedule",
	// "retry.max_backoff" or "executor.headers[X-Trace]".
	Field string
	// Msg says what is wrong with it.
	Msg string
}

// Error returns "field: message".
func (e *FieldError) Error() string { return e.Field + ": " + e.Msg }

// Unwrap returns ErrInvalidJob.
func (e *FieldError) Unwrap() error { return ErrInvalidJob }

func fieldErr(field, format string, args ...any) *FieldError {
	return FieldErrorf(field, format, args...)
}

// FieldErrorf returns the *FieldError of field with the message
// fmt.Sprintf(format, args...): how every package that checks part of a
// document names the field it refuses.
func FieldErrorf(field, format string, args ...any) *FieldError {
	return &FieldError{Field: field, Msg: fmt.Sprintf(format, args...)}
}

// Validate checks the job against the job document's rules and limits and
// returns the first problem as a *FieldError, checking fields in document
// order. It does not modify the job. Fields left empty for Normalize to
// fill are accepted; server-set fields are not checked, except revision,
// which a write may name as its precondition: a negative one is refused. It checks that
// RunAt is not before MinRunAt but not how far ahead it is, which needs a
// clock: see ValidateAt.
func (j *Job) Validate(limits Limits) error {
	return j.ValidateAt(limits, time.Time{})
}

// ValidateAt is Validate that also refuses a RunAt more than
// MaxRunAtAhead after now (unless now is zero).
func (j *Job) ValidateAt(limits Limits, now time.Time) error {
	if limits.MaxPayloadBytes <= 0 {
		limits.MaxPayloadBytes = DefaultMaxPayloadBytes
	}
	if err := validateID(j.ID); err != nil {
		return err
	}
	if err := ValidateTiming(j.Schedule, j.Timezone, j.RunAt, now); err != nil {
		return err
	}
	if j.HasSteps() {
		if err := j.validateSteps(limits); err != nil {
			return err
		}
	} else if err := j.Executor.validate(limits); err != nil {
		return err
	}
	if err := validateJSON("payload", j.Payload, limits.MaxPayloadBytes); err != nil {
		return err
	}
	if _, err := SecretRefs("payload", j.Payload); err != nil {
		return err
	}
	if err := j.Retry.validate(); err != nil {
		return err
	}
	if err := j.validateShards(); err != nil {
		return err
	}
	if err := j.validateAfter(); err != nil {
		return err
	}
	if err := ValidateNotifications("notify", j.Notify); err != nil {
		return err
	}
	if err := j.Placement.validate(); err != nil {
		return err
	}
	if err := validateLimits(j.Limits); err != nil {
		return err
	}
	if err := validatePriority(j.Priority); err != nil {
		return err
	}
	if j.Timeout != NoTimeout {
		if err := validateDuration("timeout", j.Timeout, MinTimeout); err != nil {
			return err
		}
	}
	switch j.ConcurrencyPolicy {
	case "", ConcurrencyAllow, ConcurrencyForbid, ConcurrencyReplace:
	default:
		return fieldErr("concurrency_policy", "unknown policy %q; want %q, %q or %q",
			string(j.ConcurrencyPolicy), ConcurrencyAllow, ConcurrencyForbid, ConcurrencyReplace)
	}
	switch j.MisfirePolicy {
	case "", MisfireRunOnce, MisfireSkip, MisfireRunAll:
	default:
		return fieldErr("misfire_policy", "unknown policy %q; want %q, %q or %q",
			string(j.MisfirePolicy), MisfireRunOnce, MisfireSkip, MisfireRunAll)
	}
	if err := j.validateControls(); err != nil {
		return err
	}
	if err := j.validateRetention(); err != nil {
		return err
	}
	if j.Revision < 0 {
		return fieldErr("revision", "%d is negative; give the revision a read of the job returned, or leave the field out to replace whatever is stored", j.Revision)
	}
	return nil
}

// ValidateTiming checks when a job runs, as Validate does: its schedule
// spec, its time zone and its run_at (runAt, nil if none; refused beside
// a schedule, and more than MaxRunAtAhead after now unless now is zero).
// It returns the first problem as a *FieldError naming "schedule",
// "timezone" or "run_at".
func ValidateTiming(spec, timezone string, runAt *time.Time, now time.Time) error {
	if len(spec) > MaxScheduleBytes {
		return fieldErr("schedule", "%d bytes long; want at most %d", len(spec), MaxScheduleBytes)
	}
	if len(timezone) > MaxTimezoneBytes {
		return fieldErr("timezone", "%d bytes long; want at most %d", len(timezone), MaxTimezoneBytes)
	}
	if err := schedule.CheckZoneName(timezone); err != nil {
		return fieldErr("timezone", "%v", err)
	}
	if _, err := schedule.LoadLocation(timezone); err != nil {
		return fieldErr("timezone", "%v", err)
	}
	if spec != "" {
		if runAt != nil {
			return fieldErr("run_at", "must not be set together with schedule")
		}
		sch, err := schedule.Parse(spec, timezone)
		if err != nil {
			if errors.Is(err, schedule.ErrNeverFires) {
				return fieldErr("schedule", "%q never fires: it names no existing date", spec)
			}
			return fieldErr("schedule", "%v", err)
		}
		if iv := sch.Interval(); iv > MaxRunAtAhead {
			// As for run_at: a first fire that far ahead is a mistake.
			return fieldErr("schedule", "%q is an interval of more than 100 years (36 500 days); it would never fire in practice, so it is probably a mistake", spec)
		}
	}
	if err := validateRunAt(runAt, now); err != nil {
		return err
	}
	return nil
}

// validateRunAt checks a one-off's time: not the zero time, not before
// MinRunAt, and (if now is not zero) at most MaxRunAtAhead after now.
func validateRunAt(at *time.Time, now time.Time) error {
	switch {
	case at == nil:
		return nil
	case at.IsZero():
		return fieldErr("run_at", "must not be the zero time")
	case at.Before(MinRunAt):
		return fieldErr("run_at", "%s is before %s; it would fire at once, so it is probably a mistake",
			at.UTC().Format(time.RFC3339), MinRunAt.Format(time.RFC3339))
	case !now.IsZero() && at.Sub(now) > MaxRunAtAhead:
		return fieldErr("run_at", "%s is more than 100 years ahead; it would never fire in practice, so it is probably a mistake",
			at.UTC().Format(time.RFC3339))
	}
	return nil
}

// validateDuration checks a timeout or backoff: zero (unset, Normalize
// fills the default; DecodeJob refuses a zero given explicitly) or from
// least to MaxTimeout. "none" (NoTimeout) is valid only as a job's
// timeout, which is checked apart.
func validateDuration(field string, d, least Duration) error {
	switch {
	case d == NoTimeout:
		return fieldErr(field, `"none" is only allowed for the job's timeout`)
	case d < 0:
		return fieldErr(field, "%v is negative", d)
	case d != 0 && d < least:
		return fieldErr(field, "%v is shorter than the minimum of %v", d, least)
	case d > MaxTimeout:
		return fieldErr(field, "%v is longer than the maximum of %v", d, MaxTimeout)
	}
	return nil
}

func (r RetryPolicy) validate() error {
	if r.MaxAttempts < 0 || r.MaxAttempts > MaxAttempts {
		return fieldErr("retry.max_attempts", "%d is out of range; want 1 to %d", r.MaxAttempts, MaxAttempts)
	}
	if err := validateDuration("retry.initial_backoff", r.InitialBackoff, MinBackoff); err != nil {
		return err
	}
	if err := validateDuration("retry.max_backoff", r.MaxBackoff, MinBackoff); err != nil {
		return err
	}
	if r.MaxBackoff != 0 && r.InitialBackoff > r.MaxBackoff {
		return fieldErr("retry.initial_backoff", "%v is longer than retry.max_backoff %v", r.InitialBackoff, r.MaxBackoff)
	}
	return nil
}

// quoteClipped quotes s for an error message, cut to its first 64 bytes
// (on a character boundary) so that no value can make a message long.
func quoteClipped(s string) string { return QuoteClipped(s) }

// QuoteClipped returns s quoted as Go does, cut to its first 64 bytes (on
// a character boundary) with its length appended when longer: how error
// messages quote what a caller sent without echoing all of it.
func QuoteClipped(s string) string {
	const max = 64
	if len(s) <= max {
		return strconv.Quote(s)
	}
	cut := max
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return fmt.Sprintf("%q… (%d bytes)", s[:cut], len(s))
}

func validateJSON(field string, raw json.RawMessage, maxBytes int) error {
	if len(raw) == 0 {
		return nil
	}
	if len(raw) > maxBytes {
		return fieldErr(field, "%d bytes; want at most %d", len(raw), maxBytes)
	}
	if off, msg := checkJSONText(raw, MaxJSONDepth); off >= 0 {
		return fieldErr(field, "%s (at byte %d)", msg, off)
	}
	if !json.Valid(raw) {
		return fieldErr(field, "not valid JSON")
	}
	return nil
}
