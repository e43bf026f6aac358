package worker

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/url"
	"os"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"time"

	"go.uber.org/zap"

	"github.com/jobfleet/jobfleet/api"
	"github.com/jobfleet/jobfleet/internal/tracing"
)

// Handler runs one attempt of a job whose executor type is the handler's
// name. It must return when ctx is cancelled (attempt timeout, the
// orchestrator cancelling the run, worker shutdown). A nil error is
// success; an error or a panic is a failure, reported with the error's
// message. Handlers run concurrently, up to Config.Concurrency at a time,
// and the same run may be handed to a handler more than once: de-duplicate
// on Run.RunID.
type Handler func(ctx context.Context, run Run) error

// StepHandler is a Handler that returns a result with its success: the
// JSON a step's attempt returns (see Worker.HandleStep); nil for none.
type StepHandler func(ctx context.Context, run Run) (json.RawMessage, error)

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
	// Payload is the job's payload (JSON), nil if it has none, with its
	// secret references resolved (see api.ResolveSecretRefs).
	Payload json.RawMessage
	// ShardIndex and ShardCount are the attempt's item of a sharded or
	// broadcast run: its index, 0 to ShardCount-1, and the run's number
	// of items. ShardCount is 0 for a run of one item. Attempt then
	// numbers the item's attempts, and an item's side effects are
	// de-duplicated on (RunID, ShardIndex).
	ShardIndex int
	ShardCount int
	// ShardParam is the item's parameter (the job's shards.params at
	// ShardIndex), with its secret references resolved; nil if it has
	// none.
	ShardParam json.RawMessage
	// Step is the step's ID for an attempt of a run made of steps, ""
	// otherwise; ShardIndex and ShardCount are then the step's shard
	// (ShardCount 0 for a step without shards), and Round the run's
	// round (0 unless it was started again from a step). De-duplicate
	// side effects on (RunID, Step, ShardIndex, Round).
	Step  string
	Round int
	// Needs are the results of the steps the step needs, by step ID (a
	// sharded step's: a JSON array by shard; null for none); nil for a
	// step that needs none.
	Needs map[string]json.RawMessage
	// Output is where the handler may write its output, as a shell
	// command writes to standard output: it is pushed to the
	// orchestrator while the attempt runs (GET /v1/runs/{id}/output) and
	// its start and end are the attempt's output in the run. Writes never
	// fail and are safe for concurrent use; none may come after the
	// handler returns.
	Output io.Writer
}

// Header names set by the "http" executor (contract). Jobfleet-Job-Id
// carries the job ID percent-encoded as api.EscapeID does (as in run
// IDs), so that any job ID is a valid header value; decode it with
// api.UnescapeID.
const (
	HeaderJobID       = "Jobfleet-Job-Id"
	HeaderRunID       = "Jobfleet-Run-Id"
	HeaderScheduledAt = "Jobfleet-Scheduled-At"
	HeaderAttempt     = "Jobfleet-Attempt"
	// HeaderShardIndex and HeaderShardCount are set on an item's attempt
	// (a sharded or broadcast run): the item's index, 0 to count-1, and
	// the run's number of items. The item's parameter, if the job has
	// shards.params, is the request body.
	HeaderShardIndex = "Jobfleet-Shard-Index"
	HeaderShardCount = "Jobfleet-Shard-Count"
)

// Environment variables set for the "shell" executor (contract).
// JOBFLEET_JOB_ID is the raw job ID.
const (
	EnvJobID       = "JOBFLEET_JOB_ID"
	EnvRunID       = "JOBFLEET_RUN_ID"
	EnvScheduledAt = "JOBFLEET_SCHEDULED_AT"
	EnvAttempt     = "JOBFLEET_ATTEMPT"
	// EnvShardIndex, EnvShardCount and EnvShardParam are set for an
	// item's attempt: the item's index, the run's number of items, and
	// the item's parameter as JSON (unset if the job has no
	// shards.params). The payload stays on standard input.
	EnvShardIndex = "JOBFLEET_SHARD_INDEX"
	EnvShardCount = "JOBFLEET_SHARD_COUNT"
	EnvShardParam = "JOBFLEET_SHARD_PARAM"
)

// scheduledAtLayout formats scheduled times for receivers: RFC 3339 in
// UTC with millisecond precision, e.g. 2026-12-01T02:00:00.000Z.
const scheduledAtLayout = "2006-01-02T15:04:05.000Z"

// EnvTraceParent is the variable of a shell command's environment that
// holds the W3C traceparent of its attempt's span, set when the attempt
// is traced (the orchestrator that granted it traces); a program that
// traces continues the trace from it.
const EnvTraceParent = "TRACEPARENT"

// FormatScheduledAt formats t as the Jobfleet-Scheduled-At header and
// JOBFLEET_SCHEDULED_AT variable do: RFC 3339, UTC, milliseconds.
func FormatScheduledAt(t time.Time) string { return t.UTC().Format(scheduledAtLayout) }

// outcome is an executor's result.
type outcome struct {
	// err is nil on success.
	err error
	// output is the executor's output (nil for none).
	output *outputBuffer
	// result is a step's result (nil for none).
	result json.RawMessage
}

// execute runs attempt a with the executor it names, under ctx. Secret
// references in the payload are resolved first; the resolved payload
// exists only here, for the executor.
func (w *Worker) execute(ctx context.Context, a api.AttemptGrant, lg *zap.Logger) outcome {
	if a.Executor.Type == api.ExecutorShell && !w.cfg.AllowShell {
		return outcome{err: errors.New("shell executor refused: this worker was not started with shell allowed (--allow-shell)")}
	}
	if a.Executor.Type == api.ExecutorHTTP && !w.cfg.ServeHTTP {
		return outcome{err: errors.New("http executor refused: this worker does not serve it (it embeds the worker library without ServeHTTP)")}
	}
	payload, err := api.ResolveSecretRefs("payload", a.Payload, w.secret)
	if err != nil {
		return outcome{err: err}
	}
	a.Payload = payload
	if a.Item != nil && len(a.Item.Param) > 0 {
		item := *a.Item
		if item.Param, err = api.ResolveSecretRefs("shards.params["+strconv.Itoa(item.Index)+"]", item.Param, w.secret); err != nil {
			return outcome{err: err}
		}
		a.Item = &item
	}
	switch a.Executor.Type {
	case api.ExecutorHTTP:
		return w.executeHTTP(ctx, a)
	case api.ExecutorShell:
		return w.executeShell(ctx, a)
	default:
		h := w.handler(a.Executor.Type)
		if h == nil {
			return outcome{err: fmt.Errorf("no handler registered for executor type %q on this worker", a.Executor.Type)}
		}
		return runHandler(ctx, h, a, lg)
	}
}

// secret returns the value of the worker's environment variable name for
// a secret reference, if name is on the SecretEnv allow-list. Its errors
// name the variable, never a value.
func (w *Worker) secret(name string) (string, error) {
	if !slices.Contains(w.cfg.SecretEnv, name) {
		return "", fmt.Errorf("secret reference to %s: the variable is not on this worker's secret allow-list (--secret-env)", name)
	}
	v, ok := os.LookupEnv(name)
	if !ok {
		return "", fmt.Errorf("secret reference to %s: the variable is not set in this worker's environment", name)
	}
	return v, nil
}

// runHandler calls h, turning a panic into a failure.
func runHandler(ctx context.Context, h StepHandler, a api.AttemptGrant, lg *zap.Logger) (o outcome) {
	out := &lockedOutput{out: newOutputBuffer(api.MaxOutputBytes)}
	out.out.live = liveWriter(ctx)
	defer func() {
		if p := recover(); p != nil {
			lg.Error("handler panicked", zap.Any("panic", p), zap.ByteString("stack", debug.Stack()))
			o = outcome{err: fmt.Errorf("handler panicked: %v", p), output: out.out}
		}
	}()
	run := Run{
		JobID:       a.JobID,
		RunID:       a.RunID,
		Attempt:     a.Attempt,
		ScheduledAt: a.ScheduledAt,
		Payload:     a.Payload,
		Output:      out,
	}
	if a.Item != nil {
		run.ShardIndex, run.ShardCount, run.ShardParam = a.Item.Index, a.Item.Count, a.Item.Param
	}
	if a.Step != nil {
		run.Step, run.Round, run.ShardIndex, run.ShardCount = a.Step.ID, a.Round, a.Step.Shard, a.Step.Shards
		if len(a.Step.Needs) > 0 {
			if err := json.Unmarshal(a.Step.Needs, &run.Needs); err != nil {
				return outcome{err: fmt.Errorf("needs of step %q do not decode: %w", a.Step.ID, err)}
			}
		}
	}
	res, err := h(ctx, run)
	if err != nil || a.Step == nil {
		return outcome{err: err, output: out.out}
	}
	res, err = checkResult(res)
	return outcome{err: err, result: res, output: out.out}
}

// HTTP executor limits.
const (
	// maxExecRedirects is the most redirects an attempt follows (with
	// follow_redirects).
	maxExecRedirects = 5
	// maxResponseRead is how much of a response body the executor reads
	// (its head and tail become the output); it stops reading after that.
	maxResponseRead = 16 << 20
)

// executeHTTP sends the attempt's request. Any 2xx is success; the head
// and tail of the response body are the output. The destination, and
// every redirect's, must pass the worker's HTTPPolicy; redirects are
// followed only if the executor allows them.
func (w *Worker) executeHTTP(ctx context.Context, a api.AttemptGrant) outcome {
	e := a.Executor
	method := strings.ToUpper(e.Method)
	if method == "" {
		method = api.DefaultMethod
	}
	u, err := url.Parse(e.URL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return outcome{err: errors.New("executor URL is not an absolute http or https URL")}
	}
	shown := u.Redacted()
	if err := w.policy.CheckURL(u); err != nil {
		return outcome{err: fmt.Errorf("%s %s: %w", method, shown, err)}
	}
	body := []byte(e.Body)
	switch {
	case a.Item != nil && len(a.Item.Param) > 0:
		body = a.Item.Param // the item's parameter, references resolved
	case len(body) == 0:
		body = a.Payload // secret references already resolved
	default:
		if body, err = api.ResolveSecretRefs("executor.body", e.Body, w.secret); err != nil {
			return outcome{err: err}
		}
	}
	body = stepBody(a, body)
	var rd io.Reader
	if len(body) > 0 {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, e.URL, rd)
	if err != nil {
		return outcome{err: fmt.Errorf("build request: %w", err)}
	}
	// In name order, so that a job stored before names differing only in
	// case were refused sends the same value every time (the last name).
	for _, k := range slices.Sorted(maps.Keys(e.Headers)) {
		hv := e.Headers[k]
		v := hv.Value
		if hv.IsSecret() {
			if v, err = w.secret(hv.SecretEnv); err != nil {
				return outcome{err: fmt.Errorf("header %s: %w", k, err)}
			}
			if strings.ContainsFunc(v, func(r rune) bool { return (r < ' ' && r != '\t') || r == 0x7f }) {
				return outcome{err: fmt.Errorf("header %s: secret %s holds a control character; not sent", k, hv.SecretEnv)}
			}
		}
		req.Header.Set(k, v)
	}
	if len(body) > 0 && req.Header.Get("Content-Type") == "" {
		req.Header.Set("Content-Type", "application/json")
	}
	if req.Header.Get("User-Agent") == "" {
		req.Header.Set("User-Agent", userAgent)
	}
	// Set last: the Jobfleet-* names are reserved for these. A job ID may
	// hold any UTF-8: it is percent-encoded as in run IDs.
	req.Header.Set(HeaderJobID, api.EscapeID(a.JobID))
	req.Header.Set(HeaderRunID, a.RunID)
	req.Header.Set(HeaderScheduledAt, FormatScheduledAt(a.ScheduledAt))
	req.Header.Set(HeaderAttempt, strconv.Itoa(a.Attempt))
	if tp := tracing.TraceParent(ctx); tp != "" {
		req.Header.Set("Traceparent", tp) // the attempt's span (W3C trace context)
	}
	if a.Item != nil {
		req.Header.Set(HeaderShardIndex, strconv.Itoa(a.Item.Index))
		req.Header.Set(HeaderShardCount, strconv.Itoa(a.Item.Count))
	}
	if a.Step != nil {
		req.Header.Set(HeaderStep, a.Step.ID)
		req.Header.Set(HeaderRound, strconv.Itoa(a.Round))
		if a.Item != nil {
			req.Header.Set(HeaderItem, strconv.Itoa(a.Item.Index))
		}
		req.Header.Set(HeaderShardIndex, strconv.Itoa(a.Step.Shard))
		req.Header.Set(HeaderShardCount, strconv.Itoa(a.Step.Shards))
	}

	client := &http.Client{Transport: w.execTransport, CheckRedirect: w.redirectPolicy(e)}
	resp, err := client.Do(req)
	if err != nil {
		return outcome{err: err}
	}
	defer resp.Body.Close()
	out := newOutputBuffer(api.MaxOutputBytes)
	out.live = liveWriter(ctx)
	var sink io.Writer = out
	var res *resultBuffer
	if a.Step != nil {
		res = &resultBuffer{}
		sink = io.MultiWriter(out, res)
	}
	_, rerr := io.Copy(sink, io.LimitReader(resp.Body, maxResponseRead))
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		err := fmt.Errorf("%s %s: status %s", method, shown, resp.Status)
		if loc := resp.Header.Get("Location"); loc != "" && isRedirect(resp.StatusCode) {
			if lu, perr := resp.Request.URL.Parse(loc); perr == nil {
				loc = lu.Redacted()
			}
			err = fmt.Errorf("%w: redirect to %s not followed (the job's executor does not set follow_redirects)", err, loc)
		}
		return outcome{err: err, output: out}
	}
	if rerr != nil && ctx.Err() != nil {
		// Cancelled while reading the body: not a clean success.
		return outcome{err: rerr, output: out}
	}
	if res != nil {
		result, err := res.httpResult(resp.Header.Get("Content-Type"))
		return outcome{err: err, output: out, result: result}
	}
	return outcome{output: out}
}

// isRedirect reports whether status is one the client would follow.
func isRedirect(status int) bool {
	switch status {
	case http.StatusMovedPermanently, http.StatusFound, http.StatusSeeOther,
		http.StatusTemporaryRedirect, http.StatusPermanentRedirect:
		return true
	}
	return false
}

// redirectPolicy is the CheckRedirect of an attempt with executor e.
// Without FollowRedirects the 3xx reply is the result (a failure). With
// it, a redirect is followed if it keeps the method (and so the body: a
// 301, 302 or 303 answering anything but GET or HEAD is refused), carries
// no user:password, passes the destination policy (its connection is
// checked as well), and is one of the first maxExecRedirects. The
// executor's own headers are not sent to another origin (scheme, host or
// port), nor is a Referer.
func (w *Worker) redirectPolicy(e api.Executor) func(*http.Request, []*http.Request) error {
	return func(req *http.Request, via []*http.Request) error {
		if !e.FollowRedirects {
			return http.ErrUseLastResponse
		}
		first := via[0]
		to := req.URL.Redacted()
		status := 0
		if req.Response != nil {
			status = req.Response.StatusCode
		}
		switch {
		case len(via) > maxExecRedirects:
			return fmt.Errorf("redirect to %s not followed: more than %d redirects", to, maxExecRedirects)
		case req.Method != first.Method:
			return fmt.Errorf("redirect (%d) to %s not followed: it would turn the %s into a %s without its body", status, to, first.Method, req.Method)
		}
		if err := w.policy.CheckURL(req.URL); err != nil {
			return fmt.Errorf("redirect to %s not followed: %w", to, err)
		}
		req.Header.Del("Referer")
		if req.URL.Scheme != first.URL.Scheme || req.URL.Host != first.URL.Host {
			for k := range e.Headers {
				req.Header.Del(k)
			}
		}
		return nil
	}
}
