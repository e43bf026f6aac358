// Package tracing holds what the fleet's OpenTelemetry traces share: the
// tracer every span is started from, the W3C trace context carried in run
// documents and grants as a traceparent string, and the span of each API
// request (Handler). It imports only the OpenTelemetry API (no SDK, no
// exporter), so the worker library may use it.
//
// Tracing is off until SetProvider is called (the binary does when the
// OTEL_* variables configure an exporter): the orchestrators then start
// no span at all and record no trace context (Enabled is false), and the
// worker library's spans come from OpenTelemetry's global provider, a
// no-op unless its program sets one.
package tracing

import (
	"context"
	"net/http"
	"sync/atomic"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

// Name is the instrumentation scope of the fleet's spans.
const Name = "github.com/jobfleet/jobfleet"

// Span names.
const (
	SpanFire    = "jobfleet.fire"    // a run recorded by its partition's owner
	SpanGrant   = "jobfleet.grant"   // an attempt handed to a worker
	SpanAttempt = "jobfleet.attempt" // an attempt as its worker ran it
	SpanNotify  = "jobfleet.notify"  // one try of a notification's delivery
)

// Attribute keys of the fleet's spans.
const (
	AttrJob         = attribute.Key("jobfleet.job_id")
	AttrRun         = attribute.Key("jobfleet.run_id")
	AttrPartition   = attribute.Key("jobfleet.partition")
	AttrEpoch       = attribute.Key("jobfleet.epoch")
	AttrScheduledAt = attribute.Key("jobfleet.scheduled_at")
	AttrAttempt     = attribute.Key("jobfleet.attempt")
	AttrItem        = attribute.Key("jobfleet.item")
	AttrWorker      = attribute.Key("jobfleet.worker")
	AttrOutcome     = attribute.Key("jobfleet.outcome")
	AttrEvent       = attribute.Key("jobfleet.event")
	AttrURL         = attribute.Key("url.full")
)

var enabled atomic.Bool

// propagator is the W3C trace context: traceparent (and tracestate).
var propagator = propagation.TraceContext{}

// SetProvider makes tp OpenTelemetry's global tracer provider, the W3C
// trace context its global propagator, and turns the orchestrators'
// spans on (Enabled). Safe for concurrent use; meant to be called once at
// start-up (and by tests).
func SetProvider(tp trace.TracerProvider) {
	otel.SetTracerProvider(tp)
	otel.SetTextMapPropagator(propagator)
	enabled.Store(true)
}

// Disable turns the orchestrators' spans off again (for tests).
func Disable() { enabled.Store(false) }

// Enabled reports whether SetProvider was called: whether orchestrators
// start spans and record trace context. Safe for concurrent use.
func Enabled() bool { return enabled.Load() }

// Tracer returns the tracer of the fleet's spans, from the global
// provider. Safe for concurrent use.
func Tracer() trace.Tracer { return otel.Tracer(Name) }

// Parent returns ctx carrying the remote span context that traceparent
// (a W3C traceparent header value) names, or ctx itself if traceparent
// is empty or malformed.
func Parent(ctx context.Context, traceparent string) context.Context {
	if traceparent == "" {
		return ctx
	}
	return propagator.Extract(ctx, propagation.MapCarrier{"traceparent": traceparent})
}

// TraceParent returns the W3C traceparent of ctx's span, "" if ctx
// carries no valid span context.
func TraceParent(ctx context.Context) string {
	if !trace.SpanContextFromContext(ctx).IsValid() {
		return ""
	}
	c := propagation.MapCarrier{}
	propagator.Inject(ctx, c)
	return c["traceparent"]
}

// TraceID returns the trace ID of ctx's span as 32 hex digits, "" if ctx
// carries no valid span context.
func TraceID(ctx context.Context) string {
	sc := trace.SpanContextFromContext(ctx)
	if !sc.IsValid() {
		return ""
	}
	return sc.TraceID().String()
}

// Handler wraps next so that each request is a server span named after
// its route pattern as route returns it ("GET /v1/jobs/{id}"; the method
// if route returns ""), continuing the trace of an incoming traceparent
// header, with the status code. next is served as it is while tracing is
// off.
func Handler(next http.Handler, route func(*http.Request) string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !Enabled() {
			next.ServeHTTP(w, r)
			return
		}
		ctx := propagator.Extract(r.Context(), propagation.HeaderCarrier(r.Header))
		name := route(r)
		attrs := []attribute.KeyValue{attribute.String("http.request.method", r.Method), attribute.String("url.path", r.URL.Path)}
		if name == "" {
			name = r.Method
		} else {
			attrs = append(attrs, attribute.String("http.route", name))
		}
		ctx, span := Tracer().Start(ctx, name, trace.WithSpanKind(trace.SpanKindServer),
			trace.WithAttributes(attrs...))
		defer span.End()
		rec := &statusRecorder{ResponseWriter: w, status: http.StatusOK}
		next.ServeHTTP(rec, r.WithContext(ctx))
		span.SetAttributes(attribute.Int("http.response.status_code", rec.status))
		if rec.status >= 500 {
			span.SetStatus(codes.Error, http.StatusText(rec.status))
		}
	})
}

// statusRecorder notes the status code a handler writes; it passes
// Flush on, for event streams, and Unwrap for http.ResponseController.
type statusRecorder struct {
	http.ResponseWriter
	status int
	wrote  bool
}

func (s *statusRecorder) WriteHeader(code int) {
	if !s.wrote {
		s.status, s.wrote = code, true
	}
	s.ResponseWriter.WriteHeader(code)
}

func (s *statusRecorder) Write(b []byte) (int, error) {
	s.wrote = true
	return s.ResponseWriter.Write(b)
}

func (s *statusRecorder) Flush() {
	if f, ok := s.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

func (s *statusRecorder) Unwrap() http.ResponseWriter { return s.ResponseWriter }
