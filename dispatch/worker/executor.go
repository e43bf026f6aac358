package worker

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"runtime/debug"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"go.uber.org/zap"

	"github.com/jobfleet/jobfleet/dispatch"
	"github.com/jobfleet/jobfleet/store"
)

// Handler runs one attempt of a job whose executor type is the handler's
// name. It must return when ctx is cancelled (attempt timeout, the
// orchestrator cancelling the run, worker shutdown). A nil error is
// success; an error or a panic is a failure, reported with the error's
// message. Handlers run concurrently, up to Config.Concurrency at a time,
// and the same run may be handed to a handler more than once: de-duplicate
// on Run.RunID.
type Handler func(ctx context.Context, run Run) error

// Run is what a Handler is given: the attempt it runs.
type Run struct {
	// JobID is the job's ID.
	JobID string
	// RunID identifies the run: unique per (job, scheduled time), and the
	// same across the run's attempts. De-duplicate side effects on it.
	RunID string
	// Attempt numbers the attempt, from 1.
	Attempt int
	// ScheduledAt is the time the run was scheduled for.
	ScheduledAt time.Time
	// Payload is the job's payload (JSON), nil if it has none.
	Payload json.RawMessage
}

// Header names set by the "http" executor (contract).
const (
	HeaderJobID       = "Jobfleet-Job-Id"
	HeaderRunID       = "Jobfleet-Run-Id"
	HeaderScheduledAt = "Jobfleet-Scheduled-At"
	HeaderAttempt     = "Jobfleet-Attempt"
)

// Environment variables set for the "shell" executor (contract).
const (
	EnvJobID       = "JOBFLEET_JOB_ID"
	EnvRunID       = "JOBFLEET_RUN_ID"
	EnvScheduledAt = "JOBFLEET_SCHEDULED_AT"
	EnvAttempt     = "JOBFLEET_ATTEMPT"
)

// scheduledAtLayout formats scheduled times for receivers: RFC 3339 in
// UTC with millisecond precision, e.g. 2026-12-01T02:00:00.000Z.
const scheduledAtLayout = "2006-01-02T15:04:05.000Z"

// FormatScheduledAt formats t as the Jobfleet-Scheduled-At header and
// JOBFLEET_SCHEDULED_AT variable do: RFC 3339, UTC, milliseconds.
func FormatScheduledAt(t time.Time) string { return t.UTC().Format(scheduledAtLayout) }

// outcome is an executor's result.
type outcome struct {
	// err is nil on success.
	err error
	// output is the start of the executor's output, raw.
	output []byte
}

// execute runs attempt a with the executor it names, under ctx.
func (w *Worker) execute(ctx context.Context, a dispatch.Assignment, lg *zap.Logger) outcome {
	switch a.Executor.Type {
	case store.ExecutorHTTP:
		return w.executeHTTP(ctx, a)
	case store.ExecutorShell:
		if !w.cfg.AllowShell {
			return outcome{err: errors.New("shell executor refused: this worker was not started with shell allowed (--allow-shell)")}
		}
		return w.executeShell(ctx, a)
	default:
		h := w.handler(a.Executor.Type)
		if h == nil {
			return outcome{err: fmt.Errorf("no handler registered for executor type %q on this worker", a.Executor.Type)}
		}
		return runHandler(ctx, h, a, lg)
	}
}

// runHandler calls h, turning a panic into a failure.
func runHandler(ctx context.Context, h Handler, a dispatch.Assignment, lg *zap.Logger) (out outcome) {
	defer func() {
		if p := recover(); p != nil {
			lg.Error("handler panicked", zap.Any("panic", p), zap.ByteString("stack", debug.Stack()))
			out = outcome{err: fmt.Errorf("handler panicked: %v", p)}
		}
	}()
	err := h(ctx, Run{
		JobID:       a.JobID,
		RunID:       a.RunID,
		Attempt:     a.Attempt,
		ScheduledAt: a.ScheduledAt,
		Payload:     a.Payload,
	})
	return outcome{err: err}
}

// executeHTTP sends the attempt's request. Any 2xx is success; the start
// of the response body is the output.
func (w *Worker) executeHTTP(ctx context.Context, a dispatch.Assignment) outcome {
	e := a.Executor
	method := strings.ToUpper(e.Method)
	if method == "" {
		method = store.DefaultMethod
	}
	body := []byte(e.Body)
	if len(body) == 0 {
		body = a.Payload
	}
	var rd io.Reader
	if len(body) > 0 {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, e.URL, rd)
	if err != nil {
		return outcome{err: fmt.Errorf("build request: %w", err)}
	}
	for k, v := range e.Headers {
		req.Header.Set(k, v)
	}
	if len(body) > 0 && req.Header.Get("Content-Type") == "" {
		req.Header.Set("Content-Type", "application/json")
	}
	if req.Header.Get("User-Agent") == "" {
		req.Header.Set("User-Agent", userAgent)
	}
	// Set last: the Jobfleet-* names are reserved for these.
	req.Header.Set(HeaderJobID, a.JobID)
	req.Header.Set(HeaderRunID, a.RunID)
	req.Header.Set(HeaderScheduledAt, FormatScheduledAt(a.ScheduledAt))
	req.Header.Set(HeaderAttempt, strconv.Itoa(a.Attempt))

	resp, err := w.execClient.Do(req)
	if err != nil {
		return outcome{err: err}
	}
	defer resp.Body.Close()
	out, rerr := io.ReadAll(io.LimitReader(resp.Body, dispatch.MaxOutputBytes))
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return outcome{err: fmt.Errorf("%s %s: status %s", method, e.URL, resp.Status), output: out}
	}
	if rerr != nil && ctx.Err() != nil {
		// Cancelled while reading the body: not a clean success.
		return outcome{err: rerr, output: out}
	}
	return outcome{output: out}
}

// capWriter keeps the first max bytes written to it and discards the rest,
// without failing the writer.
type capWriter struct {
	buf []byte
	max int
}

func (c *capWriter) Write(p []byte) (int, error) {
	if room := c.max - len(c.buf); room > 0 {
		c.buf = append(c.buf, p[:min(room, len(p))]...)
	}
	return len(p), nil
}

// maxErrorBytes caps the error message a completion carries.
const maxErrorBytes = 8 << 10

// reportOutput turns raw output into what a completion may carry: valid
// UTF-8 (invalid bytes replaced) of at most dispatch.MaxOutputBytes bytes,
// cut at a rune boundary.
func reportOutput(b []byte) string { return truncateUTF8(b, dispatch.MaxOutputBytes) }

// reportError turns an error into a completion's message, at most
// maxErrorBytes of valid UTF-8.
func reportError(err error) string { return truncateUTF8([]byte(err.Error()), maxErrorBytes) }

// truncateUTF8 returns the start of b as valid UTF-8 (invalid bytes
// replaced) of at most limit bytes, cut at a rune boundary.
func truncateUTF8(b []byte, limit int) string {
	if len(b) > limit {
		b = b[:limit]
	}
	s := string(b)
	if !utf8.ValidString(s) {
		// A rune cut by the byte limit at the end is dropped, not replaced.
		if n := len(s); n == limit {
			for i := n - 1; i >= 0 && i >= n-utf8.UTFMax; i-- {
				if utf8.RuneStart(s[i]) {
					if !utf8.FullRuneInString(s[i:]) {
						s = s[:i]
					}
					break
				}
			}
		}
		s = strings.ToValidUTF8(s, "\uFFFD")
	}
	if len(s) > limit { // replacements made it longer
		i := limit
		for i > 0 && !utf8.RuneStart(s[i]) {
			i--
		}
		s = s[:i]
	}
	return s
}
