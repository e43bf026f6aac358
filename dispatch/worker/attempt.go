package worker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"sync"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
	"go.uber.org/zap"

	"github.com/jobfleet/jobfleet/api"
	"github.com/jobfleet/jobfleet/internal/retry"
	"github.com/jobfleet/jobfleet/internal/tracing"
)

// Causes of an attempt's cancellation other than errShuttingDown. Their
// messages are what the orchestrator records.
var (
	// errStale: the orchestrator answered 409 to a heartbeat; the attempt
	// is no longer ours and is dropped without a report.
	errStale = errors.New("attempt is stale")
	// errCancelledByOrchestrator: a heartbeat reply asked to cancel.
	errCancelledByOrchestrator = errors.New("cancelled by the orchestrator")
	// errLeaseLost: an attempt holding limit keys had no heartbeat
	// answered for its lease; its slots may be another attempt's now.
	errLeaseLost = errors.New("stopped: no heartbeat answered within the run lease while holding limit keys")
)

// Heartbeat timing bounds.
const (
	// defaultLease is assumed when a grant carries no run lease.
	defaultLease = 30 * time.Second
	// minHeartbeatInterval keeps a tiny lease from making a busy loop.
	minHeartbeatInterval = 50 * time.Millisecond
	// maxRedirects bounds consecutive 421 redirects of one request.
	maxRedirects = 5
)

// attempt is one held attempt: its grant and where its reports go.
type attempt struct {
	w  *Worker
	a  api.AttemptGrant
	lg *zap.Logger

	mu    sync.Mutex // guards owner
	owner string     // base URL of the orchestrator heartbeats and the completion go to

	// span is the attempt's span (a no-op one unless the program set
	// OpenTelemetry's tracer provider), a child of the grant's.
	span trace.Span

	// slot says the attempt holds one of the worker's slots, reporting
	// one of its report places (freeSlot); only the attempt's goroutine
	// uses them.
	slot, reporting bool
}

func (at *attempt) ownerAddr() string {
	at.mu.Lock()
	defer at.mu.Unlock()
	return at.owner
}

// redirect makes addr the attempt's owner after a 421; it reports false if
// the reply named no (new) owner.
func (at *attempt) redirect(n api.NotOwner, from string) bool {
	at.mu.Lock()
	defer at.mu.Unlock()
	if n.OwnerAddr == "" || n.OwnerAddr == at.owner {
		return false
	}
	at.owner = n.OwnerAddr
	at.lg.Info("attempt's partition moved; reporting to the new owner", zap.String("from", from), zap.String("owner", n.Owner), zap.String("owner_addr", n.OwnerAddr))
	return true
}

// rotate points the attempt at another known orchestrator after addr, its
// owner, could not be reached (crashed, cut off): that one either owns the
// run's partition by now and takes the report, or answers 421 naming who
// does. Without it a report would wait for a dead owner until the run lease
// expired and the run ran again.
func (at *attempt) rotate(addr string) {
	addrs := at.w.currentAddrs()
	at.mu.Lock()
	defer at.mu.Unlock()
	if at.owner != addr || len(addrs) == 0 {
		return
	}
	next := addrs[(slices.Index(addrs, addr)+1)%len(addrs)]
	if next == addr {
		return
	}
	at.owner = next
	at.lg.Info("attempt's orchestrator unreachable; asking another", zap.String("from", addr), zap.String("to", next))
}

func (w *Worker) newAttempt(a api.AttemptGrant, from string) *attempt {
	owner := a.OwnerAddr
	if owner == "" {
		owner = from
	}
	fields := []zap.Field{zap.String("run_id", a.RunID), zap.String("job_id", a.JobID), zap.Int("attempt", a.Attempt),
		zap.String("executor", a.Executor.Type)}
	if a.Item != nil {
		fields = append(fields, zap.Int("item", a.Item.Index))
	}
	return &attempt{w: w, a: a, owner: owner, lg: w.lg.With(fields...)}
}

// item returns the index of the attempt's item for its reports, nil for
// a run of one item.
func (at *attempt) item() *int {
	if at.a.Item == nil {
		return nil
	}
	i := at.a.Item.Index
	return &i
}

// startAttempt runs a in a goroutine that holds one slot (already taken)
// until its executor has returned, and while it reports the result only
// if every one of the worker's report places is taken (see
// attempt.freeSlot).
func (w *Worker) startAttempt(a api.AttemptGrant, from string) {
	at := w.newAttempt(a, from)
	at.slot = true
	w.goAttempt(func() {
		defer at.endHold()
		at.run()
	})
}

// goAttempt runs life, an attempt's from its start to its report, in a
// goroutine of its own, counted as started, in flight and among the
// attempts the worker waits for.
func (w *Worker) goAttempt(life func()) {
	w.cfg.Metrics.attemptStarted()
	w.attempts.Add(1)
	w.inFlight.Add(1)
	go func() {
		defer w.attempts.Done()
		defer w.inFlight.Add(-1)
		life()
	}()
}

// freeSlot gives the attempt's slot back once its executor has returned,
// before its result is reported, so that the worker polls for the next
// attempt while the report is on its way: an attempt of a short job
// would otherwise hold its slot for a poll and a report for every
// execution. It takes one of the worker's report places instead (there
// are as many as slots); with none free the attempt keeps its slot while
// it reports, which stops the worker taking more attempts while results
// cannot be recorded.
func (at *attempt) freeSlot() {
	if !at.slot {
		return
	}
	select {
	case at.w.reporting <- struct{}{}:
		at.slot, at.reporting = false, true
		at.w.slots.put(1)
	default:
	}
}

// held returns how many attempts hold slots: those in flight but the
// ones reporting in a report place.
func (w *Worker) held() int {
	return max(int(w.inFlight.Load())-len(w.reporting), 0)
}

// endHold gives back what the attempt holds at its end: its slot, or its
// report place.
func (at *attempt) endHold() {
	if at.slot {
		at.w.slots.put(1)
	}
	if at.reporting {
		<-at.w.reporting
	}
}

// startRefused reports a failed without running it (it holds no slot).
func (w *Worker) startRefused(a api.AttemptGrant, from string) {
	at := w.newAttempt(a, from)
	w.goAttempt(func() {
		at.finish(outcome{err: errors.New("worker has no free slot: the orchestrator handed out more attempts than asked for")}, w.cfg.Clock.Now())
	})
}

// run executes the attempt under its timeout while heartbeating, then
// reports the result (unless the attempt went stale).
func (at *attempt) run() {
	w := at.w
	a := at.a
	start := w.cfg.Clock.Now()
	timeout := a.Timeout.Std()
	if timeout <= 0 {
		timeout = api.DefaultTimeout.Std()
	}
	at.lg.Info("attempt started", zap.Stringer("timeout", api.Duration(timeout)), zap.String("owner", at.ownerAddr()))

	// The execution context ends on timeout, on the orchestrator's
	// cancellation or staleness (heartbeat), and at the end of the shutdown
	// timeout (w.hardCtx); its cause says which.
	ctx, cancel := context.WithCancelCause(w.hardCtx)
	defer cancel(nil)
	ctx, at.span = tracing.Tracer().Start(tracing.Parent(ctx, a.TraceParent), tracing.SpanAttempt,
		trace.WithSpanKind(trace.SpanKindConsumer), trace.WithAttributes(
			tracing.AttrJob.String(a.JobID), tracing.AttrRun.String(a.RunID), tracing.AttrAttempt.Int(a.Attempt),
			tracing.AttrWorker.String(w.cfg.ID), attribute.String("jobfleet.executor", a.Executor.Type)))
	defer at.span.End()
	timer := w.cfg.Clock.AfterFunc(timeout, func() {
		cancel(fmt.Errorf("timed out after %v", api.Duration(timeout)))
	})
	defer timer.Stop()

	hbCtx, stopHeartbeat := context.WithCancel(context.Background())
	hbDone := make(chan struct{})
	go func() {
		defer close(hbDone)
		at.heartbeat(hbCtx, cancel)
	}()

	// The executor runs in its own goroutine so that an executor ignoring
	// cancellation cannot keep the attempt from being reported. It is
	// always waited for before the slot is given back.
	// The live output goes on while the executor runs, and its last
	// bytes before the completion (liveCtx ends when the executor
	// returns or is abandoned).
	execCtx := ctx
	liveCtx, stopLive := context.WithCancel(context.Background())
	liveDone := make(chan struct{})
	if w.cfg.OutputPushInterval > 0 {
		p := newLivePusher(at)
		execCtx = withLive(ctx, p)
		go func() {
			defer close(liveDone)
			p.run(liveCtx)
		}()
	} else {
		close(liveDone)
	}
	res := make(chan outcome, 1)
	go func() { res <- w.execute(execCtx, a, at.lg) }()
	var (
		out       outcome
		abandoned bool
	)
	select {
	case out = <-res:
	case <-ctx.Done():
		grace := w.cfg.Clock.NewTimer(w.cfg.CancelGrace)
		at.lg.Debug("attempt cancelled; waiting for the executor to return", zap.NamedError("cause", context.Cause(ctx)))
		select {
		case out = <-res:
		case <-grace.Chan():
			abandoned = true
			out = outcome{err: context.Cause(ctx)}
			at.lg.Warn("executor did not return after cancellation; reporting without it", zap.NamedError("cause", context.Cause(ctx)))
		}
		grace.Stop()
	}

	stopLive()
	<-liveDone
	if !abandoned {
		// The executor has returned: nothing of the attempt runs now but
		// its report and heartbeats.
		at.freeSlot()
	}

	// Heartbeats go on while the result is reported: a report that takes
	// longer than the lease (the orchestrator cannot record it yet, the
	// partition is moving) must not let the attempt be declared lost and
	// the run executed again.
	cause := context.Cause(ctx)
	if errors.Is(cause, errStale) {
		at.lg.Info("attempt dropped: stale (the orchestrator has moved on)", zap.Duration("took", w.cfg.Clock.Since(start)))
		w.cfg.Metrics.attemptEnded("stale")
		at.span.SetAttributes(tracing.AttrOutcome.String("stale"))
	} else {
		if out.err != nil && cause != nil {
			// The executor's own error (context canceled, signal: killed,
			// …) says less than why it was stopped.
			out.err = cause
		}
		at.finish(out, start)
	}
	stopHeartbeat()
	<-hbDone
	if abandoned {
		<-res
		at.lg.Info("executor returned after its attempt was reported")
	}
}

// finish reports out and logs the attempt's result.
func (at *attempt) finish(out outcome, start time.Time) {
	w := at.w
	req := api.CompleteRequest{
		Worker:  w.cfg.ID,
		RunID:   at.a.RunID,
		Attempt: at.a.Attempt,
		Item:    at.item(),
		Success: out.err == nil,
		Output:  out.output.text(api.MaxOutputBytes),
	}
	if out.err == nil {
		req.Result = out.result
	}
	result := "succeeded"
	if out.err != nil {
		req.Error = reportError(out.err)
		result = "failed"
	}
	fields := []zap.Field{zap.String("result", result), zap.Duration("took", w.cfg.Clock.Since(start))}
	if out.err != nil {
		fields = append(fields, zap.String("error", req.Error))
	}
	if at.span != nil {
		at.span.SetAttributes(tracing.AttrOutcome.String(result))
		if out.err != nil {
			at.span.SetStatus(codes.Error, req.Error)
		}
	}
	status, err := at.complete(req)
	switch {
	case errors.Is(err, errStale):
		at.lg.Info("attempt finished; report refused as stale (the orchestrator has moved on)", fields...)
		w.cfg.Metrics.attemptEnded("stale")
		return
	case err != nil:
		w.cfg.Metrics.reportFailed()
		at.lg.Warn("attempt finished but its result could not be reported; the run will be retried when the attempt's lease expires",
			append(fields, zap.NamedError("report_error", err))...)
	default:
		at.lg.Info("attempt finished", append(fields, zap.String("run_status", string(status)))...)
	}
	w.cfg.Metrics.attemptEnded(result)
}

// complete delivers req to the attempt's owner: it follows 421 redirects,
// retries network errors and 5xx with back-off for up to ReportTimeout,
// and returns errStale on 409. It uses a fresh context: completions are
// sent even while the worker shuts down.
func (at *attempt) complete(req api.CompleteRequest) (api.RunStatus, error) {
	w := at.w
	ctx, cancel := context.WithTimeout(context.Background(), w.cfg.ReportTimeout)
	defer cancel()
	start := w.cfg.Clock.Now()
	bo := newBackOff(w.cfg.RetryInitial, w.cfg.RetryMax)
	redirects := 0
	for {
		addr := at.ownerAddr()
		r, err := w.client.post(ctx, addr, api.PathComplete, req, w.cfg.RequestTimeout, maxOtherReplyBytes)
		if err != nil && ctx.Err() == nil {
			at.rotate(addr)
		}
		if err == nil {
			switch {
			case r.status == http.StatusOK:
				var resp api.CompleteResponse
				_ = json.Unmarshal(r.body, &resp) // the status is informational
				return resp.Status, nil
			case r.status == http.StatusConflict:
				return "", errStale
			case r.status == http.StatusMisdirectedRequest:
				if redirects < maxRedirects && at.redirect(r.notOwner(), addr) {
					redirects++
					continue
				}
				err = fmt.Errorf("complete to %s: no owner now: %w", addr, r.err())
			case r.retryable():
				err = fmt.Errorf("complete to %s: %w", addr, r.err())
			case r.refused():
				err := r.credentialErr()
				w.creds.refused(addr, err)
				return "", fmt.Errorf("complete to %s: %w", addr, err)
			default:
				return "", fmt.Errorf("complete to %s: rejected: %w", addr, r.err())
			}
		}
		redirects = 0
		wait := bo.Next()
		if w.cfg.Clock.Since(start)+wait >= w.cfg.ReportTimeout {
			return "", fmt.Errorf("gave up after %v: %w", w.cfg.ReportTimeout, err)
		}
		at.lg.Debug("completion not delivered; retrying", zap.Error(err), zap.Duration("retry_in", wait))
		if !retry.Sleep(ctx, w.cfg.Clock, wait) {
			return "", fmt.Errorf("gave up after %v: %w", w.cfg.ReportTimeout, err)
		}
	}
}
