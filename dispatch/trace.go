package dispatch

import (
	"context"
	"time"

	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/jobfleet/jobfleet/api"
	"github.com/jobfleet/jobfleet/internal/tracing"
)

// traceFire starts the span of run r's fire and records its trace in r
// (TraceID, TraceParent); nil, and r unchanged, while tracing is off.
// The span ends when the fire's write is answered (endFire).
func traceFire(r *api.Run) trace.Span {
	if !tracing.Enabled() {
		return nil
	}
	ctx, span := tracing.Tracer().Start(context.Background(), tracing.SpanFire, trace.WithAttributes(
		tracing.AttrJob.String(r.JobID), tracing.AttrRun.String(r.ID), tracing.AttrPartition.Int(r.Partition),
		tracing.AttrEpoch.Int64(r.Epoch), tracing.AttrScheduledAt.String(r.ScheduledAt.UTC().Format(time.RFC3339Nano)),
		tracing.AttrOutcome.String(string(r.Status))))
	r.TraceID, r.TraceParent = tracing.TraceID(ctx), tracing.TraceParent(ctx)
	return span
}

// endFire ends a fire's span (nil: none), failed with why unless why is
// empty.
func endFire(span trace.Span, why string) {
	if span == nil {
		return
	}
	if why != "" {
		span.SetStatus(codes.Error, why)
	}
	span.End()
}

// traceGrant records the span of grant g of run r to worker, a child of
// the run's fire, and returns its traceparent for the grant; "" while
// tracing is off or for a run fired without a trace.
func traceGrant(r *api.Run, g *AttemptGrant, worker string) string {
	if !tracing.Enabled() || r.TraceParent == "" {
		return ""
	}
	attrs := []trace.SpanStartOption{trace.WithAttributes(tracing.AttrJob.String(r.JobID), tracing.AttrRun.String(r.ID),
		tracing.AttrAttempt.Int(g.Attempt), tracing.AttrWorker.String(worker), tracing.AttrPartition.Int(r.Partition))}
	if g.Item != nil {
		attrs = append(attrs, trace.WithAttributes(tracing.AttrItem.Int(g.Item.Index)))
	}
	ctx, span := tracing.Tracer().Start(tracing.Parent(context.Background(), r.TraceParent), tracing.SpanGrant, attrs...)
	defer span.End()
	return tracing.TraceParent(ctx)
}
