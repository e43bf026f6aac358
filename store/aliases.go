package store

import (
	"encoding/json"
	"io"
	"time"

	"github.com/jobfleet/jobfleet/api"
)

// Types of the documents that moved to package api.
//
// Deprecated: use the types of package api; these aliases are kept for one release.
type (
	// Deprecated: use api.Attempt; kept for one release.
	Attempt = api.Attempt
	// Deprecated: use api.ConcurrencyPolicy; kept for one release.
	ConcurrencyPolicy = api.ConcurrencyPolicy
	// Deprecated: use api.Duration; kept for one release.
	Duration = api.Duration
	// Deprecated: use api.Executor; kept for one release.
	Executor = api.Executor
	// Deprecated: use api.FailingRun; kept for one release.
	FailingRun = api.FailingRun
	// Deprecated: use api.FieldError; kept for one release.
	FieldError = api.FieldError
	// Deprecated: use api.HeaderValue; kept for one release.
	HeaderValue = api.HeaderValue
	// Deprecated: use api.HistoryPolicy; kept for one release.
	HistoryPolicy = api.HistoryPolicy
	// Deprecated: use api.Job; kept for one release.
	Job = api.Job
	// Deprecated: use api.JobState; kept for one release.
	JobState = api.JobState
	// Deprecated: use api.Limits; kept for one release.
	Limits = api.Limits
	// Deprecated: use api.MisfirePolicy; kept for one release.
	MisfirePolicy = api.MisfirePolicy
	// Deprecated: use api.Notification; kept for one release.
	Notification = api.Notification
	// Deprecated: use api.Retention; kept for one release.
	Retention = api.Retention
	// Deprecated: use api.RetryPolicy; kept for one release.
	RetryPolicy = api.RetryPolicy
	// Deprecated: use api.Run; kept for one release.
	Run = api.Run
	// Deprecated: use api.RunStatus; kept for one release.
	RunStatus = api.RunStatus
	// Deprecated: use api.Worker; kept for one release.
	Worker = api.Worker
)

// Constants that moved to package api.
//
// Deprecated: use the constants of package api; kept for one release.
const (
	// Deprecated: use api.ConcurrencyAllow; kept for one release.
	ConcurrencyAllow = api.ConcurrencyAllow
	// Deprecated: use api.ConcurrencyForbid; kept for one release.
	ConcurrencyForbid = api.ConcurrencyForbid
	// Deprecated: use api.ConcurrencyReplace; kept for one release.
	ConcurrencyReplace = api.ConcurrencyReplace
	// Deprecated: use api.DefaultInitialBackoff; kept for one release.
	DefaultInitialBackoff = api.DefaultInitialBackoff
	// Deprecated: use api.DefaultMaxAttempts; kept for one release.
	DefaultMaxAttempts = api.DefaultMaxAttempts
	// Deprecated: use api.DefaultMaxBackoff; kept for one release.
	DefaultMaxBackoff = api.DefaultMaxBackoff
	// Deprecated: use api.DefaultMaxDocumentBytes; kept for one release.
	DefaultMaxDocumentBytes = api.DefaultMaxDocumentBytes
	// Deprecated: use api.DefaultMaxPayloadBytes; kept for one release.
	DefaultMaxPayloadBytes = api.DefaultMaxPayloadBytes
	// Deprecated: use api.DefaultMethod; kept for one release.
	DefaultMethod = api.DefaultMethod
	// Deprecated: use api.DefaultTimeout; kept for one release.
	DefaultTimeout = api.DefaultTimeout
	// Deprecated: use api.DefaultTimezone; kept for one release.
	DefaultTimezone = api.DefaultTimezone
	// Deprecated: use api.ExecutorHTTP; kept for one release.
	ExecutorHTTP = api.ExecutorHTTP
	// Deprecated: use api.ExecutorShell; kept for one release.
	ExecutorShell = api.ExecutorShell
	// Deprecated: use api.FailingErrorBytes; kept for one release.
	FailingErrorBytes = api.FailingErrorBytes
	// Deprecated: use api.FailingWindow; kept for one release.
	FailingWindow = api.FailingWindow
	// Deprecated: use api.MaxAttempts; kept for one release.
	MaxAttempts = api.MaxAttempts
	// Deprecated: use api.MaxCommandArgs; kept for one release.
	MaxCommandArgs = api.MaxCommandArgs
	// Deprecated: use api.MaxCommandBytes; kept for one release.
	MaxCommandBytes = api.MaxCommandBytes
	// Deprecated: use api.MaxCursorBytes; kept for one release.
	MaxCursorBytes = api.MaxCursorBytes
	// Deprecated: use api.MaxHeaderNameBytes; kept for one release.
	MaxHeaderNameBytes = api.MaxHeaderNameBytes
	// Deprecated: use api.MaxHeaderValueBytes; kept for one release.
	MaxHeaderValueBytes = api.MaxHeaderValueBytes
	// Deprecated: use api.MaxHeaders; kept for one release.
	MaxHeaders = api.MaxHeaders
	// Deprecated: use api.MaxHistoryAge; kept for one release.
	MaxHistoryAge = api.MaxHistoryAge
	// Deprecated: use api.MaxHistoryRuns; kept for one release.
	MaxHistoryRuns = api.MaxHistoryRuns
	// Deprecated: use api.MaxIDBytes; kept for one release.
	MaxIDBytes = api.MaxIDBytes
	// Deprecated: use api.MaxJSONDepth; kept for one release.
	MaxJSONDepth = api.MaxJSONDepth
	// Deprecated: use api.MaxNextFires; kept for one release.
	MaxNextFires = api.MaxNextFires
	// Deprecated: use api.MaxNotifications; kept for one release.
	MaxNotifications = api.MaxNotifications
	// Deprecated: use api.MaxRunAtAhead; kept for one release.
	MaxRunAtAhead = api.MaxRunAtAhead
	// Deprecated: use api.MaxRunIDBytes; kept for one release.
	MaxRunIDBytes = api.MaxRunIDBytes
	// Deprecated: use api.MaxScheduleBytes; kept for one release.
	MaxScheduleBytes = api.MaxScheduleBytes
	// Deprecated: use api.MaxTimeout; kept for one release.
	MaxTimeout = api.MaxTimeout
	// Deprecated: use api.MaxTimezoneBytes; kept for one release.
	MaxTimezoneBytes = api.MaxTimezoneBytes
	// Deprecated: use api.MaxURLBytes; kept for one release.
	MaxURLBytes = api.MaxURLBytes
	// Deprecated: use api.MisfireRunAll; kept for one release.
	MisfireRunAll = api.MisfireRunAll
	// Deprecated: use api.MisfireRunOnce; kept for one release.
	MisfireRunOnce = api.MisfireRunOnce
	// Deprecated: use api.MisfireSkip; kept for one release.
	MisfireSkip = api.MisfireSkip
	// Deprecated: use api.NoTimeout; kept for one release.
	NoTimeout = api.NoTimeout
	// Deprecated: use api.RedactedValue; kept for one release.
	RedactedValue = api.RedactedValue
	// Deprecated: use api.RetentionNever; kept for one release.
	RetentionNever = api.RetentionNever
	// Deprecated: use api.RunDead; kept for one release.
	RunDead = api.RunDead
	// Deprecated: use api.RunFailed; kept for one release.
	RunFailed = api.RunFailed
	// Deprecated: use api.RunPending; kept for one release.
	RunPending = api.RunPending
	// Deprecated: use api.RunRunning; kept for one release.
	RunRunning = api.RunRunning
	// Deprecated: use api.RunSkipped; kept for one release.
	RunSkipped = api.RunSkipped
	// Deprecated: use api.RunSucceeded; kept for one release.
	RunSucceeded = api.RunSucceeded
	// Deprecated: use api.SecretEnvKey; kept for one release.
	SecretEnvKey = api.SecretEnvKey
	// Deprecated: use api.TimeFormat; kept for one release.
	TimeFormat = api.TimeFormat
)

// Variables that moved to package api.
//
// Deprecated: use the variables of package api; kept for one release.
var (
	// Deprecated: use api.ErrInvalidJob; kept for one release.
	ErrInvalidJob = api.ErrInvalidJob
	// Deprecated: use api.ErrStaleRevision; kept for one release.
	ErrStaleRevision = api.ErrStaleRevision
	// Deprecated: use api.ErrTooLarge; kept for one release.
	ErrTooLarge = api.ErrTooLarge
	// Deprecated: use api.MinRunAt; kept for one release.
	MinRunAt = api.MinRunAt
)

// DecodeJob calls api.DecodeJob.
//
// Deprecated: use api.DecodeJob; kept for one release.
func DecodeJob(r io.Reader, maxBytes int64) (api.Job, error) { return api.DecodeJob(r, maxBytes) }

// DefaultLimits calls api.DefaultLimits.
//
// Deprecated: use api.DefaultLimits; kept for one release.
func DefaultLimits() api.Limits { return api.DefaultLimits() }

// ValidateTiming calls api.ValidateTiming.
//
// Deprecated: use api.ValidateTiming; kept for one release.
func ValidateTiming(spec, timezone string, runAt *time.Time, now time.Time) error {
	return api.ValidateTiming(spec, timezone, runAt, now)
}

// EscapeID calls api.EscapeID.
//
// Deprecated: use api.EscapeID; kept for one release.
func EscapeID(id string) string { return api.EscapeID(id) }

// UnescapeID calls api.UnescapeID.
//
// Deprecated: use api.UnescapeID; kept for one release.
func UnescapeID(s string) (string, error) { return api.UnescapeID(s) }

// ValidateID calls api.ValidateID.
//
// Deprecated: use api.ValidateID; kept for one release.
func ValidateID(id string) error { return api.ValidateID(id) }

// Literal calls api.Literal.
//
// Deprecated: use api.Literal; kept for one release.
func Literal(s string) api.HeaderValue { return api.Literal(s) }

// SecretEnv calls api.SecretEnv.
//
// Deprecated: use api.SecretEnv; kept for one release.
func SecretEnv(name string) api.HeaderValue { return api.SecretEnv(name) }

// SecretRefs calls api.SecretRefs.
//
// Deprecated: use api.SecretRefs; kept for one release.
func SecretRefs(field string, raw json.RawMessage) ([]string, error) {
	return api.SecretRefs(field, raw)
}

// ResolveSecretRefs calls api.ResolveSecretRefs.
//
// Deprecated: use api.ResolveSecretRefs; kept for one release.
func ResolveSecretRefs(field string, raw json.RawMessage, lookup func(name string) (string, error)) (json.RawMessage, error) {
	return api.ResolveSecretRefs(field, raw, lookup)
}

// PreviewFires calls api.PreviewFires.
//
// Deprecated: use api.PreviewFires; kept for one release.
func PreviewFires(spec, timezone string, runAt *time.Time, now time.Time, n int) ([]time.Time, error) {
	return api.PreviewFires(spec, timezone, runAt, now, n)
}

// ValidateNotifications calls api.ValidateNotifications.
//
// Deprecated: use api.ValidateNotifications; kept for one release.
func ValidateNotifications(field string, ns []api.Notification) error {
	return api.ValidateNotifications(field, ns)
}

// NewFailingRun calls api.NewFailingRun.
//
// Deprecated: use api.NewFailingRun; kept for one release.
func NewFailingRun(r api.Run, at time.Time) api.FailingRun { return api.NewFailingRun(r, at) }

// FormatTime calls api.FormatTime.
//
// Deprecated: use api.FormatTime; kept for one release.
func FormatTime(t time.Time) string { return api.FormatTime(t) }

// fieldErr is api.FieldErrorf, under the name this package's files use.
func fieldErr(field, format string, args ...any) *FieldError {
	return api.FieldErrorf(field, format, args...)
}

// quoteClipped is api.QuoteClipped.
func quoteClipped(s string) string { return api.QuoteClipped(s) }
