package e2e_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/otel"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace/noop"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"

	jfapi "github.com/jobfleet/jobfleet/api"
	"github.com/jobfleet/jobfleet/dispatch/worker"
	"github.com/jobfleet/jobfleet/egress"
	"github.com/jobfleet/jobfleet/internal/orchestrator"
	"github.com/jobfleet/jobfleet/internal/testkit/fleettest"
	"github.com/jobfleet/jobfleet/internal/tracing"
)

// traceTo turns tracing on for the test, into an in-memory exporter (each
// span exported as it ends), and off again at its end.
func traceTo(t *testing.T) *tracetest.InMemoryExporter {
	t.Helper()
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	tracing.SetProvider(tp)
	t.Cleanup(func() {
		tracing.Disable()
		otel.SetTracerProvider(noop.NewTracerProvider())
		_ = tp.Shutdown(context.Background())
	})
	return exp
}

// TestTraceFollowsARunFromFireToTheJobsEndpoint: with tracing on, one
// run of an HTTP job is one trace: the fire's span (the root, with the
// job, partition, epoch and scheduled time), the grant's (its child), the
// worker's attempt's (the grant's child, with its outcome), and the HTTP
// call's traceparent header names the attempt's span as parent; the run
// document records the trace ID, and the notification's delivery is a
// span of the same trace, a child of the fire's.
func TestTraceFollowsARunFromFireToTheJobsEndpoint(t *testing.T) {
	exp := traceTo(t)
	f := fleettest.New(t, etcd, fleettest.Options{Partitions: 2, Scheduler: true, Quiet: true,
		Notify: orchestrator.NotifyConfig{Policy: egress.Policy{Allow: []string{"127.0.0.1"}}}})
	f.Join("m1")
	f.WaitSettled(15 * time.Second)
	base := f.URLs()[0]
	type call struct{ run, traceparent string }
	var (
		mu    sync.Mutex
		calls []call
	)
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		calls = append(calls, call{r.Header.Get(worker.HeaderRunID), r.Header.Get("Traceparent")})
		mu.Unlock()
	}))
	defer hook.Close()
	notified := make(chan string, 16)
	rcv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		notified <- r.Header.Get("Traceparent")
	}))
	defer rcv.Close()
	startWorkers(t, 1, f.URLs(), f.WorkerToken, zaptest.NewLogger(t, zaptest.Level(zap.WarnLevel)))

	id := "trace/http"
	createEverySecond(t, f.AdminToken, base, id, hook.URL, func(j *jfapi.Job) {
		j.Notify = []jfapi.Notification{{On: []jfapi.RunStatus{jfapi.RunSucceeded}, URL: rcv.URL}}
	})
	var first call
	waitFor(t, 20*time.Second, func() bool {
		mu.Lock()
		defer mu.Unlock()
		if len(calls) > 0 {
			first = calls[0]
		}
		return len(calls) > 0
	})
	if code := api(t, f.AdminToken, "POST", base, "/v1/jobs/"+url.PathEscape(id)+"/pause", nil, nil); code != http.StatusOK {
		t.Fatalf("pause: %d", code)
	}
	// traceparent: 00-<trace id>-<parent span id>-<flags>
	tp := strings.Split(first.traceparent, "-")
	if len(tp) != 4 || tp[0] != "00" || len(tp[1]) != 32 || len(tp[2]) != 16 {
		t.Fatalf("the job's request carried traceparent %q, want a W3C one", first.traceparent)
	}
	traceID, callParent := tp[1], tp[2]

	var run jfapi.Run
	waitFor(t, 20*time.Second, func() bool {
		code := api(t, f.AdminToken, "GET", base, "/v1/runs/"+url.PathEscape(first.run), nil, &run)
		return code == http.StatusOK && run.Status == jfapi.RunSucceeded
	})
	if run.TraceID != traceID {
		t.Errorf("run document's trace_id %q, want the traceparent's %q", run.TraceID, traceID)
	}

	byName := func() map[string]tracetest.SpanStub {
		out := map[string]tracetest.SpanStub{}
		for _, s := range exp.GetSpans() {
			if s.SpanContext.TraceID().String() == traceID {
				out[s.Name] = s
			}
		}
		return out
	}
	var spans map[string]tracetest.SpanStub
	waitFor(t, 20*time.Second, func() bool {
		spans = byName()
		return len(spans) >= 4
	})
	fire, grant, att, note := spans[tracing.SpanFire], spans[tracing.SpanGrant], spans[tracing.SpanAttempt], spans[tracing.SpanNotify]
	for name, s := range map[string]tracetest.SpanStub{tracing.SpanFire: fire, tracing.SpanGrant: grant, tracing.SpanAttempt: att, tracing.SpanNotify: note} {
		if !s.SpanContext.IsValid() {
			t.Fatalf("no %s span in trace %s; got %v", name, traceID, names(spans))
		}
	}
	if fire.Parent.IsValid() {
		t.Errorf("%s has parent %s, want none (the root)", tracing.SpanFire, fire.Parent.SpanID())
	}
	link := func(child, parent tracetest.SpanStub) {
		t.Helper()
		if child.Parent.SpanID() != parent.SpanContext.SpanID() {
			t.Errorf("%s's parent is %s, want %s (%s)", child.Name, child.Parent.SpanID(), parent.SpanContext.SpanID(), parent.Name)
		}
	}
	link(grant, fire)
	link(att, grant)
	link(note, fire)
	if callParent != att.SpanContext.SpanID().String() {
		t.Errorf("the job's request names parent span %s, want the attempt's %s", callParent, att.SpanContext.SpanID())
	}
	attrs := func(s tracetest.SpanStub) map[string]string {
		m := map[string]string{}
		for _, kv := range s.Attributes {
			m[string(kv.Key)] = kv.Value.String()
		}
		return m
	}
	fa := attrs(fire)
	if fa["jobfleet.job_id"] != id || fa["jobfleet.partition"] != itoa(run.Partition) || fa["jobfleet.epoch"] != itoa64(run.Epoch) ||
		fa["jobfleet.scheduled_at"] != run.ScheduledAt.UTC().Format(time.RFC3339Nano) {
		t.Errorf("fire span attributes %v, want the run's job, partition %d, epoch %d, scheduled time %v", fa, run.Partition, run.Epoch, run.ScheduledAt)
	}
	if aa := attrs(att); aa["jobfleet.worker"] != "w1" || aa["jobfleet.outcome"] != "succeeded" {
		t.Errorf("attempt span attributes %v, want worker w1, outcome succeeded", aa)
	}
	if ga := attrs(grant); ga["jobfleet.worker"] != "w1" || ga["jobfleet.attempt"] != "1" {
		t.Errorf("grant span attributes %v, want worker w1, attempt 1", ga)
	}
	select {
	case got := <-notified:
		if !strings.Contains(got, note.SpanContext.SpanID().String()) {
			t.Errorf("the notification carried traceparent %q, want its span %s", got, note.SpanContext.SpanID())
		}
	case <-time.After(10 * time.Second):
		t.Error("no notification")
	}
	// The API requests are spans too (the create above: a trace of its own).
	api := false
	for _, s := range exp.GetSpans() {
		api = api || s.Name == "POST /v1/jobs"
	}
	if !api {
		t.Error(`no span "POST /v1/jobs" for the API request that created the job`)
	}
	t.Logf("trace %s: %s (root) ← %s ← %s ← the job's HTTP call (parent %s); %s ← %s",
		traceID, fire.Name, grant.Name, att.Name, callParent, fire.Name, note.Name)
}

func names(m map[string]tracetest.SpanStub) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

func itoa(i int) string     { b, _ := json.Marshal(i); return string(b) }
func itoa64(i int64) string { b, _ := json.Marshal(i); return string(b) }

// TestSlackNotificationBody: a notify entry of format "slack" delivers a
// Slack incoming webhook message naming the job, the event, the run's
// status and error, with a button linking to the run in the console.
func TestSlackNotificationBody(t *testing.T) {
	f := fleettest.New(t, etcd, fleettest.Options{Partitions: 2, Scheduler: true, Quiet: true,
		Notify: orchestrator.NotifyConfig{Policy: egress.Policy{Allow: []string{"127.0.0.1"}}, ConsoleURL: "https://jobfleet.example/ui/"}})
	f.Join("m1")
	f.WaitSettled(15 * time.Second)
	base := f.URLs()[0]
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "the database is down", http.StatusInternalServerError)
	}))
	defer hook.Close()
	bodies := make(chan []byte, 4)
	rcv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		bodies <- b
	}))
	defer rcv.Close()
	startWorkers(t, 1, f.URLs(), f.WorkerToken, zaptest.NewLogger(t, zaptest.Level(zap.WarnLevel)))

	// An unknown format is refused, naming the field.
	var e struct{ Error string }
	bad := jfapi.Job{ID: "slack/bad", Schedule: "@daily", Executor: jfapi.Executor{Type: "http", URL: hook.URL},
		Notify: []jfapi.Notification{{On: []jfapi.RunStatus{jfapi.RunDead}, URL: rcv.URL, Format: "teams"}}}
	if code := api(t, f.AdminToken, "POST", base, "/v1/jobs", bad, &e); code != http.StatusBadRequest || !strings.Contains(e.Error, "notify[0].format") {
		t.Errorf("a job with format teams: %d %q, want 400 naming notify[0].format", code, e.Error)
	}
	if code := api(t, f.AdminToken, "GET", base, "/v1/jobs/"+url.PathEscape(bad.ID), nil, nil); code != http.StatusNotFound {
		t.Errorf("the refused job was stored: GET answered %d", code)
	}

	id := "slack/dead"
	createEverySecond(t, f.AdminToken, base, id, hook.URL, func(j *jfapi.Job) {
		j.Notify = []jfapi.Notification{{On: []jfapi.RunStatus{jfapi.RunDead}, URL: rcv.URL, Format: jfapi.NotifySlack}}
	})
	var body []byte
	select {
	case body = <-bodies:
	case <-time.After(20 * time.Second):
		t.Fatal("no notification")
	}
	api(t, f.AdminToken, "POST", base, "/v1/jobs/"+url.PathEscape(id)+"/pause", nil, nil)
	var msg struct {
		Text   string `json:"text"`
		Blocks []struct {
			Type     string `json:"type"`
			Text     *struct{ Text string }
			Fields   []struct{ Text string }
			Elements []struct {
				Type string `json:"type"`
				URL  string `json:"url"`
			}
		} `json:"blocks"`
	}
	if err := json.Unmarshal(body, &msg); err != nil {
		t.Fatalf("notification body %s: %v", body, err)
	}
	if !strings.Contains(msg.Text, id) || !strings.Contains(msg.Text, "dead") || !strings.Contains(msg.Text, "500") {
		t.Errorf("text %q, want the job, dead and the error", msg.Text)
	}
	var all strings.Builder
	link := ""
	for _, b := range msg.Blocks {
		if b.Text != nil {
			all.WriteString(b.Text.Text + "\n")
		}
		for _, f := range b.Fields {
			all.WriteString(f.Text + "\n")
		}
		for _, el := range b.Elements {
			link = el.URL
		}
	}
	for _, want := range []string{"*Job*\n" + id, "*Status*\ndead", "*Event*\ndead", "*Error*", "500"} {
		if !strings.Contains(all.String(), want) {
			t.Errorf("blocks %s lack %q", body, want)
		}
	}
	if !strings.HasPrefix(link, "https://jobfleet.example/ui/#/run/") {
		t.Errorf("button URL %q, want a link to the run in the console", link)
	}
	t.Logf("slack message: %s", body)
}
