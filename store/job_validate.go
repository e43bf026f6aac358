package store

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/url"
	"slices"
	"strconv"
	"strings"
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
// fill are accepted; server-set fields are not checked. It checks that
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
	if len(j.Schedule) > MaxScheduleBytes {
		return fieldErr("schedule", "%d bytes long; want at most %d", len(j.Schedule), MaxScheduleBytes)
	}
	if len(j.Timezone) > MaxTimezoneBytes {
		return fieldErr("timezone", "%d bytes long; want at most %d", len(j.Timezone), MaxTimezoneBytes)
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
	if err := validateRunAt(j.RunAt, now); err != nil {
		return err
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
	if j.Timeout != NoTimeout {
		if err := validateDuration("timeout", j.Timeout); err != nil {
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
	return j.validateRetention()
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
// fills the default) or positive and at most MaxTimeout. "none"
// (NoTimeout) is valid only as a job's timeout, which is checked apart.
func validateDuration(field string, d Duration) error {
	switch {
	case d == NoTimeout:
		return fieldErr(field, `"none" is only allowed for the job's timeout`)
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
			return fieldErr("executor.method", "unsupported method %s; want one of %s", quoteClipped(e.Method), strings.Join(httpMethods, ", "))
		}
		if len(e.Headers) > MaxHeaders {
			return fieldErr("executor.headers", "%d headers; want at most %d", len(e.Headers), MaxHeaders)
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
		if len(e.Command) > MaxCommandArgs {
			return fieldErr("executor.command", "%d words; want at most %d", len(e.Command), MaxCommandArgs)
		}
		total := 0
		for i, arg := range e.Command {
			if !utf8.ValidString(arg) || strings.ContainsRune(arg, 0) {
				return fieldErr(fmt.Sprintf("executor.command[%d]", i), "must be valid UTF-8 without NUL bytes")
			}
			if total += len(arg); total > MaxCommandBytes {
				return fieldErr("executor.command", "more than %d bytes in all", MaxCommandBytes)
			}
		}
		return nil
	default:
		if builtin := nearBuiltinType(e.Type); builtin != "" {
			hint := ""
			if builtin == ExecutorHTTP {
				hint = " (it sends to http and https URLs)"
			}
			return fieldErr("executor.type", "unknown type %s; did you mean %q%s? Built-in types are lower case", quoteClipped(e.Type), builtin, hint)
		}
		if err := validateHandlerName(e.Type); err != nil {
			return err
		}
		return e.only()
	}
}

// nearBuiltinType returns the built-in executor type that name is
// probably a misspelling of ("Shell", "HTTP", "https", "shel", "sh"), or
// "". Handlers registered by Go code cannot take such names.
func nearBuiltinType(name string) string {
	lower := strings.ToLower(name)
	switch lower {
	case "sh", "bash":
		return ExecutorShell
	}
	for _, builtin := range []string{ExecutorHTTP, ExecutorShell} {
		if lower == builtin || editDistanceAtMost1(lower, builtin) {
			return builtin
		}
	}
	return ""
}

// editDistanceAtMost1 reports whether a becomes b with at most one
// insertion, deletion, substitution or swap of adjacent bytes.
func editDistanceAtMost1(a, b string) bool {
	if len(a) > len(b) {
		a, b = b, a
	}
	if len(b)-len(a) > 1 {
		return false
	}
	i := 0
	for i < len(a) && a[i] == b[i] {
		i++
	}
	if len(a) == len(b) {
		if i >= len(a)-1 {
			return true
		}
		return a[i+1:] == b[i+1:] || (a[i] == b[i+1] && a[i+1] == b[i] && a[i+2:] == b[i+2:])
	}
	return a[i:] == b[i+1:]
}

// quoteClipped quotes s for an error message, cut to its first 64 bytes
// (on a character boundary) so that no value can make a message long.
func quoteClipped(s string) string {
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
	if len(raw) > MaxURLBytes {
		return fieldErr("executor.url", "%d bytes long; want at most %d", len(raw), MaxURLBytes)
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

// connectionHeaders are the header names a job may not set, in lower
// case: those the HTTP client derives from the request (Host,
// Content-Length) and the hop-by-hop ones (RFC 9110 section 7.6.1), which
// would change how the request is framed or routed rather than what it
// says.
var connectionHeaders = []string{"host", "content-length", "transfer-encoding", "connection", "keep-alive",
	"proxy-connection", "proxy-authenticate", "proxy-authorization", "te", "trailer", "upgrade"}

func validateHeader(name string, hv HeaderValue) error {
	if len(name) > MaxHeaderNameBytes {
		return fieldErr("executor.headers", "header name %s is longer than %d bytes", quoteClipped(name), MaxHeaderNameBytes)
	}
	field := fmt.Sprintf("executor.headers[%s]", name)
	if len(hv.Value) > MaxHeaderValueBytes {
		return fieldErr(field, "value of %d bytes; want at most %d", len(hv.Value), MaxHeaderValueBytes)
	}
	if name == "" || strings.IndexFunc(name, func(r rune) bool { return !isTokenChar(r) }) >= 0 {
		return fieldErr(field, "invalid header name %q", name)
	}
	if strings.HasPrefix(strings.ToLower(name), "jobfleet-") {
		return fieldErr(field, "header names starting with \"Jobfleet-\" are reserved")
	}
	if slices.Contains(connectionHeaders, strings.ToLower(name)) {
		return fieldErr(field, "%s is set by the HTTP client from the URL and body, or concerns one connection only; it cannot be set", name)
	}
	if hv.IsSecret() {
		if !validSecretName(hv.SecretEnv) {
			return fieldErr(field, "secret reference %s is not a valid environment variable name (letters, digits and '_', not starting with a digit, at most %d bytes)", quoteClipped(hv.SecretEnv), maxSecretNameBytes)
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
		return fieldErr("executor.type", "invalid handler name %s; want %q, %q or a name of letters, digits, '-', '_', '.' and ':' starting with a letter, at most %d bytes",
			quoteClipped(name), ExecutorHTTP, ExecutorShell, maxHandlerBytes)
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
	if off, msg := checkJSONText(raw, MaxJSONDepth); off >= 0 {
		return fieldErr(field, "%s (at byte %d)", msg, off)
	}
	if !json.Valid(raw) {
		return fieldErr(field, "not valid JSON")
	}
	return nil
}
