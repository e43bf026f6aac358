package store

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/url"
	"slices"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/jobfleet/jobfleet/dispatch/schedule"
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
	// MaxTimeout is the longest timeout, and the longest backoff.
	MaxTimeout = Duration(24 * time.Hour)
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
)

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
	return &FieldError{Field: field, Msg: fmt.Sprintf(format, args...)}
}

// Normalize fills defaults and canonical forms in place; it never fails
// and does not validate. Defaults: Timezone "UTC"; Retry.MaxAttempts 1;
// Retry.InitialBackoff 1s; Retry.MaxBackoff the larger of 1m and
// InitialBackoff; Timeout 1h; ConcurrencyPolicy "allow"; MisfirePolicy
// "run_once"; and for an "http" executor, Method "POST". It also trims
// blanks around Schedule, upper-cases Method, turns a JSON null payload or
// body into none, and converts RunAt to UTC.
func (j *Job) Normalize() {
	j.Schedule = strings.TrimSpace(j.Schedule)
	if j.Timezone == "" {
		j.Timezone = DefaultTimezone
	}
	if j.RunAt != nil {
		at := j.RunAt.UTC()
		j.RunAt = &at
	}
	if isNull(j.Payload) {
		j.Payload = nil
	}
	j.Payload = compactJSON(j.Payload)
	if j.Executor.Type == ExecutorHTTP {
		j.Executor.Method = strings.ToUpper(j.Executor.Method)
		if j.Executor.Method == "" {
			j.Executor.Method = DefaultMethod
		}
	}
	if isNull(j.Executor.Body) {
		j.Executor.Body = nil
	}
	j.Executor.Body = compactJSON(j.Executor.Body)
	if j.Retry.MaxAttempts == 0 {
		j.Retry.MaxAttempts = DefaultMaxAttempts
	}
	if j.Retry.InitialBackoff == 0 {
		j.Retry.InitialBackoff = DefaultInitialBackoff
	}
	if j.Retry.MaxBackoff == 0 {
		j.Retry.MaxBackoff = max(DefaultMaxBackoff, j.Retry.InitialBackoff)
	}
	if j.Timeout == 0 {
		j.Timeout = DefaultTimeout
	}
	if j.ConcurrencyPolicy == "" {
		j.ConcurrencyPolicy = ConcurrencyAllow
	}
	if j.MisfirePolicy == "" {
		j.MisfirePolicy = MisfireRunOnce
	}
}

// compactJSON returns raw without insignificant white space, so receivers
// get the payload as data, not as it was indented in a job file. Invalid
// JSON is returned unchanged for Validate to report.
func compactJSON(raw json.RawMessage) json.RawMessage {
	if raw == nil {
		return nil
	}
	var b bytes.Buffer
	if err := json.Compact(&b, raw); err != nil {
		return raw
	}
	return json.RawMessage(b.Bytes())
}

func isNull(raw json.RawMessage) bool {
	return string(bytes.TrimSpace(raw)) == "null"
}

// Validate checks the job against the job document's rules and limits and
// returns the first problem as a *FieldError, checking fields in document
// order. It does not modify the job. Fields left empty for Normalize to
// fill are accepted; server-set fields are not checked.
func (j *Job) Validate(limits Limits) error {
	if limits.MaxPayloadBytes <= 0 {
		limits.MaxPayloadBytes = DefaultMaxPayloadBytes
	}
	if err := validateID(j.ID); err != nil {
		return err
	}
	if _, err := schedule.LoadLocation(j.Timezone); err != nil {
		return fieldErr("timezone", "%v", err)
	}
	if j.Schedule != "" {
		if j.RunAt != nil {
			return fieldErr("run_at", "must not be set together with schedule")
		}
		if _, err := schedule.Parse(j.Schedule, j.Timezone); err != nil {
			if errors.Is(err, schedule.ErrNeverFires) {
				return fieldErr("schedule", "%q never fires: it names no existing date", j.Schedule)
			}
			return fieldErr("schedule", "%v", err)
		}
	}
	if j.RunAt != nil && j.RunAt.IsZero() {
		return fieldErr("run_at", "must not be the zero time")
	}
	if err := j.Executor.validate(limits); err != nil {
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
	if err := validateDuration("timeout", j.Timeout); err != nil {
		return err
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
	return nil
}

// validateID checks a job ID; see Job.ID.
func validateID(id string) error {
	switch {
	case id == "":
		return fieldErr("id", "required")
	case len(id) > MaxIDBytes:
		return fieldErr("id", "%d bytes long; want at most %d", len(id), MaxIDBytes)
	case !utf8.ValidString(id):
		return fieldErr("id", "not valid UTF-8")
	case id == "." || id == "..":
		return fieldErr("id", "%q is reserved: it cannot be addressed in a URL path", id)
	}
	for i, r := range id {
		if unicode.IsControl(r) {
			return fieldErr("id", "control character %U at byte %d", r, i)
		}
	}
	return nil
}

// validateDuration checks a timeout or backoff: zero (unset, Normalize
// fills the default) or positive and at most MaxTimeout.
func validateDuration(field string, d Duration) error {
	switch {
	case d < 0:
		return fieldErr(field, "%v is negative", d)
	case d > MaxTimeout:
		return fieldErr(field, "%v is longer than the maximum of %v", d, MaxTimeout)
	}
	return nil
}

func (r RetryPolicy) validate() error {
	if r.MaxAttempts < 0 || r.MaxAttempts > MaxAttempts {
		return fieldErr("retry.max_attempts", "%d is out of range; want 1 to %d", r.MaxAttempts, MaxAttempts)
	}
	if err := validateDuration("retry.initial_backoff", r.InitialBackoff); err != nil {
		return err
	}
	if err := validateDuration("retry.max_backoff", r.MaxBackoff); err != nil {
		return err
	}
	if r.MaxBackoff != 0 && r.InitialBackoff > r.MaxBackoff {
		return fieldErr("retry.initial_backoff", "%v is longer than retry.max_backoff %v", r.InitialBackoff, r.MaxBackoff)
	}
	return nil
}

// httpMethods are the methods an "http" executor may use.
var httpMethods = []string{"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"}

func (e *Executor) validate(limits Limits) error {
	switch e.Type {
	case "":
		return fieldErr("executor.type", "required; want %q, %q or a registered handler name", ExecutorHTTP, ExecutorShell)
	case ExecutorHTTP:
		if err := e.only("url", "method", "headers", "body", "follow_redirects"); err != nil {
			return err
		}
		if err := validateURL(e.URL); err != nil {
			return err
		}
		if e.Method != "" && !slices.Contains(httpMethods, strings.ToUpper(e.Method)) {
			return fieldErr("executor.method", "unsupported method %q; want one of %s", e.Method, strings.Join(httpMethods, ", "))
		}
		for _, name := range slices.Sorted(maps.Keys(e.Headers)) {
			if err := validateHeader(name, e.Headers[name]); err != nil {
				return err
			}
		}
		if err := validateJSON("executor.body", e.Body, limits.MaxPayloadBytes); err != nil {
			return err
		}
		_, err := SecretRefs("executor.body", e.Body)
		return err
	case ExecutorShell:
		if err := e.only("command"); err != nil {
			return err
		}
		if len(e.Command) == 0 || e.Command[0] == "" {
			return fieldErr("executor.command", "required: the program and its arguments")
		}
		for i, arg := range e.Command {
			if !utf8.ValidString(arg) || strings.ContainsRune(arg, 0) {
				return fieldErr(fmt.Sprintf("executor.command[%d]", i), "must be valid UTF-8 without NUL bytes")
			}
		}
		return nil
	default:
		if err := validateHandlerName(e.Type); err != nil {
			return err
		}
		return e.only()
	}
}

// only reports the first set field of e that is not among allowed.
func (e *Executor) only(allowed ...string) error {
	set := []struct {
		name  string
		isSet bool
	}{
		{"url", e.URL != ""},
		{"method", e.Method != ""},
		{"headers", len(e.Headers) > 0},
		{"body", len(e.Body) > 0},
		{"command", len(e.Command) > 0},
		{"follow_redirects", e.FollowRedirects},
	}
	for _, f := range set {
		if f.isSet && !slices.Contains(allowed, f.name) {
			return fieldErr("executor."+f.name, "not used by executor type %q", e.Type)
		}
	}
	return nil
}

func validateURL(raw string) error {
	if raw == "" {
		return fieldErr("executor.url", "required for executor type %q", ExecutorHTTP)
	}
	u, err := url.Parse(raw)
	if err != nil {
		return fieldErr("executor.url", "invalid URL %q: %v", raw, errors.Unwrap(err))
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return fieldErr("executor.url", "%q is not an absolute http or https URL", raw)
	}
	if u.User != nil {
		// Not repeated: the URL holds a password.
		return fieldErr("executor.url", "must not carry a user name or password (user:password@host); send credentials in a header, for example as a secret reference {\"secret_env\": \"NAME\"}")
	}
	if u.Host == "" {
		return fieldErr("executor.url", "%q has no host", raw)
	}
	return nil
}

func validateHeader(name string, hv HeaderValue) error {
	field := fmt.Sprintf("executor.headers[%s]", name)
	if name == "" || strings.IndexFunc(name, func(r rune) bool { return !isTokenChar(r) }) >= 0 {
		return fieldErr(field, "invalid header name %q", name)
	}
	if strings.HasPrefix(strings.ToLower(name), "jobfleet-") {
		return fieldErr(field, "header names starting with \"Jobfleet-\" are reserved")
	}
	if hv.IsSecret() {
		if !validSecretName(hv.SecretEnv) {
			return fieldErr(field, "secret reference %q is not a valid environment variable name (letters, digits and '_', not starting with a digit, at most %d bytes)", hv.SecretEnv, maxSecretNameBytes)
		}
		return nil
	}
	value := hv.Value
	for _, r := range value {
		if (r < ' ' && r != '\t') || r == 0x7f {
			return fieldErr(field, "value contains control character %U", r)
		}
	}
	if !utf8.ValidString(value) {
		return fieldErr(field, "value is not valid UTF-8")
	}
	return nil
}

// isTokenChar reports whether r may appear in an HTTP header name (RFC 9110
// "token").
func isTokenChar(r rune) bool {
	switch {
	case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9':
		return true
	}
	return strings.ContainsRune("!#$%&'*+-.^_`|~", r)
}

func validateHandlerName(name string) error {
	valid := func(i int, r rune) bool {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z':
			return true
		case i == 0:
			return false
		case r >= '0' && r <= '9':
			return true
		}
		return strings.ContainsRune("-_.:", r)
	}
	ok := len(name) <= maxHandlerBytes
	for i, r := range name {
		ok = ok && valid(i, r)
	}
	if !ok {
		return fieldErr("executor.type", "invalid handler name %q; want %q, %q or a name of letters, digits, '-', '_', '.' and ':' starting with a letter, at most %d bytes",
			name, ExecutorHTTP, ExecutorShell, maxHandlerBytes)
	}
	return nil
}

func validateJSON(field string, raw json.RawMessage, maxBytes int) error {
	if len(raw) == 0 {
		return nil
	}
	if len(raw) > maxBytes {
		return fieldErr(field, "%d bytes; want at most %d", len(raw), maxBytes)
	}
	if !json.Valid(raw) {
		return fieldErr(field, "not valid JSON")
	}
	return nil
}
