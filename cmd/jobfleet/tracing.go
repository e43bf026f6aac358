package main

import (
	"context"
	"fmt"
	"os"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.uber.org/zap"

	"github.com/jobfleet/jobfleet/internal/buildinfo"
	"github.com/jobfleet/jobfleet/internal/tracing"
)

// tracingShutdownTimeout bounds the export of the last spans at exit.
const tracingShutdownTimeout = 5 * time.Second

// startTracing turns OpenTelemetry traces on when the standard OTEL_*
// variables of the environment configure an exporter: OTEL_TRACES_EXPORTER
// "otlp", or unset with OTEL_EXPORTER_OTLP_ENDPOINT or
// OTEL_EXPORTER_OTLP_TRACES_ENDPOINT set ("none" turns it off). Spans go
// over OTLP/HTTP (protobuf) in batches; the exporter, the batch processor,
// the sampler and the resource (OTEL_SERVICE_NAME, default "jobfleet";
// OTEL_RESOURCE_ATTRIBUTES) read their own variables. The returned stop
// flushes the spans left and is never nil; an error names the variable
// that is wrong.
func startTracing(ctx context.Context, lg *zap.Logger, service string) (stop func(), err error) {
	stop = func() {}
	exporter := os.Getenv("OTEL_TRACES_EXPORTER")
	endpoint := os.Getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
	if endpoint == "" {
		endpoint = os.Getenv("OTEL_EXPORTER_OTLP_ENDPOINT")
	}
	switch exporter {
	case "none":
		return stop, nil
	case "":
		if endpoint == "" {
			return stop, nil
		}
	case "otlp":
	default:
		return stop, fmt.Errorf("OTEL_TRACES_EXPORTER=%q: want otlp or none", exporter)
	}
	proto := os.Getenv("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL")
	if proto == "" {
		proto = os.Getenv("OTEL_EXPORTER_OTLP_PROTOCOL")
	}
	if proto != "" && proto != "http/protobuf" {
		return stop, fmt.Errorf("OTEL_EXPORTER_OTLP_PROTOCOL=%q: jobfleet exports over http/protobuf only", proto)
	}
	exp, err := otlptracehttp.New(ctx)
	if err != nil {
		return stop, fmt.Errorf("OTLP trace exporter: %w", err)
	}
	// Later attributes win: the service's name and version, then what
	// OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES say.
	res, err := resource.New(ctx, resource.WithTelemetrySDK(),
		resource.WithAttributes(attribute.String("service.name", service), attribute.String("service.version", buildinfo.Get().Version)),
		resource.WithFromEnv())
	if err != nil {
		return stop, fmt.Errorf("OTEL_RESOURCE_ATTRIBUTES or OTEL_SERVICE_NAME: %w", err)
	}
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp), sdktrace.WithResource(res))
	otel.SetErrorHandler(otel.ErrorHandlerFunc(func(err error) {
		lg.Warn("exporting traces failed", zap.Error(err))
	}))
	tracing.SetProvider(tp)
	lg.Info("tracing on", zap.String("endpoint", endpoint), zap.String("service", service))
	return func() {
		ctx, cancel := context.WithTimeout(context.Background(), tracingShutdownTimeout)
		defer cancel()
		if err := tp.Shutdown(ctx); err != nil {
			lg.Warn("flushing the last spans failed", zap.Error(err))
		}
	}, nil
}
