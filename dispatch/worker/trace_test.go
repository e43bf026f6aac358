package worker_test

import (
	"strings"
	"testing"
	"time"

	"github.com/jobfleet/jobfleet/api"
	"github.com/jobfleet/jobfleet/dispatch/worker"
	"github.com/jobfleet/jobfleet/egress"
)

// TestGrantTraceContextReachesTheJob: a grant's traceparent reaches the
// job: the http executor's traceparent header and the shell executor's
// TRACEPARENT. The program sets no tracer provider (OpenTelemetry's
// no-op one): the context travels as the grant gave it. A grant without
// one sends neither.
func TestGrantTraceContextReachesTheJob(t *testing.T) {
	requireShell(t)
	const tp = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	srv, got := newReceiver(t, 200, "ok")
	f := newFakeOrch(t, "a", nil)
	startWorker(t, worker.Config{Orchestrators: worker.StaticOrchestrators(f.URL()), AllowShell: true,
		HTTPPolicy: egress.Policy{Allow: []string{"127.0.0.1"}}}, nil)

	a := f.assignment("h1", api.Executor{Type: "http", URL: srv.URL}, "")
	a.TraceParent = tp
	f.enqueue(a)
	select {
	case r := <-got:
		if h := r.header.Get("Traceparent"); h != tp {
			t.Errorf("traceparent header %q, want the grant's %q", h, tp)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no request")
	}
	f.waitComplete(t, "h1")

	f.enqueue(f.assignment("h2", api.Executor{Type: "http", URL: srv.URL}, ""))
	select {
	case r := <-got:
		if h := r.header.Get("Traceparent"); h != "" {
			t.Errorf("a grant without a trace: traceparent header %q, want none", h)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no request")
	}
	f.waitComplete(t, "h2")

	a = f.assignment("s1", api.Executor{Type: "shell", Command: []string{"sh", "-c", `echo "$TRACEPARENT"`}}, "")
	a.TraceParent = tp
	f.enqueue(a)
	if c := f.waitComplete(t, "s1"); strings.TrimSpace(c.Output) != tp {
		t.Errorf("TRACEPARENT=%q, want the grant's %q", strings.TrimSpace(c.Output), tp)
	}
}
