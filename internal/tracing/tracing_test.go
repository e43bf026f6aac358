package tracing_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"

	"go.opentelemetry.io/otel"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/jobfleet/jobfleet/internal/tracing"
)

// TestHandlerAndTraceParent: off, a request is served without a span and
// no trace context is made; on, it is a server span named after its
// route, continuing an incoming traceparent, with its status; Parent and
// TraceParent round-trip a W3C traceparent.
func TestHandlerAndTraceParent(t *testing.T) {
	const in = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	var seen string
	h := tracing.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		seen = tracing.TraceParent(r.Context())
		w.WriteHeader(http.StatusTeapot)
	}), func(*http.Request) string { return "GET /v1/things/{id}" })
	serve := func() {
		req := httptest.NewRequest("GET", "/v1/things/a", nil)
		req.Header.Set("Traceparent", in)
		h.ServeHTTP(httptest.NewRecorder(), req)
	}
	serve()
	if seen != "" || tracing.Enabled() {
		t.Fatalf("tracing off: handler saw traceparent %q", seen)
	}

	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	tracing.SetProvider(tp)
	defer func() { tracing.Disable(); otel.SetTracerProvider(noop.NewTracerProvider()) }()
	serve()
	spans := exp.GetSpans()
	if len(spans) != 1 {
		t.Fatalf("%d spans, want 1", len(spans))
	}
	s := spans[0]
	if s.Name != "GET /v1/things/{id}" || s.SpanContext.TraceID().String() != "4bf92f3577b34da6a3ce929d0e0e4736" || s.Parent.SpanID().String() != "00f067aa0ba902b7" {
		t.Errorf("span %q trace %s parent %s, want the route, continuing the incoming traceparent", s.Name, s.SpanContext.TraceID(), s.Parent.SpanID())
	}
	if seen != "00-4bf92f3577b34da6a3ce929d0e0e4736-"+s.SpanContext.SpanID().String()+"-01" {
		t.Errorf("the handler saw traceparent %q, want its request's span", seen)
	}
	status := false
	for _, kv := range s.Attributes {
		status = status || (kv.Key == "http.response.status_code" && kv.Value.AsInt64() == http.StatusTeapot)
	}
	if !status {
		t.Errorf("attributes %v lack the status code", s.Attributes)
	}
	if got := tracing.TraceParent(tracing.Parent(context.Background(), in)); got != in {
		t.Errorf("TraceParent(Parent(%q)) = %q", in, got)
	}
	if got := tracing.TraceParent(tracing.Parent(context.Background(), "garbage")); got != "" {
		t.Errorf("a malformed traceparent gave %q, want none", got)
	}
}
