package main

import (
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	collectortrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"google.golang.org/protobuf/proto"

	"github.com/jobfleet/jobfleet/internal/etcdserver"
	"github.com/jobfleet/jobfleet/internal/testkit/proctest"
	"github.com/jobfleet/jobfleet/internal/tracing"
)

// otlpSpan is a span as the test's OTLP receiver decoded it.
type otlpSpan struct {
	name, trace, id, parent, service string
	attrs                            map[string]string
}

// otlpReceiver is an OTLP/HTTP trace receiver: it accepts POST /v1/traces
// of protobuf ExportTraceServiceRequests and keeps their spans.
type otlpReceiver struct {
	srv   *httptest.Server
	mu    sync.Mutex
	spans []otlpSpan
}

func newOTLPReceiver(t *testing.T) *otlpReceiver {
	r := &otlpReceiver{}
	r.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if req.Method != http.MethodPost || req.URL.Path != "/v1/traces" || req.Header.Get("Content-Type") != "application/x-protobuf" {
			t.Errorf("OTLP receiver got %s %s (%s), want POST /v1/traces of protobuf", req.Method, req.URL.Path, req.Header.Get("Content-Type"))
			http.Error(w, "no", http.StatusBadRequest)
			return
		}
		body, _ := io.ReadAll(req.Body)
		var ex collectortrace.ExportTraceServiceRequest
		if err := proto.Unmarshal(body, &ex); err != nil {
			t.Errorf("decoding an OTLP export: %v", err)
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		r.mu.Lock()
		defer r.mu.Unlock()
		for _, rs := range ex.ResourceSpans {
			service := ""
			for _, kv := range rs.GetResource().GetAttributes() {
				if kv.Key == "service.name" {
					service = kv.Value.GetStringValue()
				}
			}
			for _, ss := range rs.ScopeSpans {
				for _, s := range ss.Spans {
					sp := otlpSpan{name: s.Name, trace: hex.EncodeToString(s.TraceId), id: hex.EncodeToString(s.SpanId),
						parent: hex.EncodeToString(s.ParentSpanId), service: service, attrs: map[string]string{}}
					for _, kv := range s.Attributes {
						v := kv.Value.GetStringValue()
						if v == "" {
							v = strconv.FormatInt(kv.Value.GetIntValue(), 10)
						}
						sp.attrs[kv.Key] = v
					}
					r.spans = append(r.spans, sp)
				}
			}
		}
		w.Header().Set("Content-Type", "application/x-protobuf")
		b, _ := proto.Marshal(&collectortrace.ExportTraceServiceResponse{})
		w.Write(b)
	}))
	t.Cleanup(r.srv.Close)
	return r
}

// received returns how many spans arrived.
func (r *otlpReceiver) received() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.spans)
}

// run returns the fire, grant and attempt spans of one trace of job's
// runs that has all three, if any.
func (r *otlpReceiver) run(job string) (fire, grant, attempt otlpSpan, ok bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	byTrace := map[string]map[string]otlpSpan{}
	for _, s := range r.spans {
		if byTrace[s.trace] == nil {
			byTrace[s.trace] = map[string]otlpSpan{}
		}
		byTrace[s.trace][s.name] = s
	}
	for _, m := range byTrace {
		f, g, a := m[tracing.SpanFire], m[tracing.SpanGrant], m[tracing.SpanAttempt]
		if f.attrs["jobfleet.job_id"] == job && g.id != "" && a.id != "" {
			return f, g, a, true
		}
	}
	return
}

func (r *otlpReceiver) named(name string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, s := range r.spans {
		if s.name == name {
			return true
		}
	}
	return false
}

// TestDevExportsTracesOverOTLP: `jobfleet dev` with
// OTEL_EXPORTER_OTLP_ENDPOINT aimed at an OTLP/HTTP receiver sends it
// the spans of its example HTTP job's runs, fire ← grant ← attempt in
// one trace (the attempt's from the worker dev runs), under the service
// name OTEL_SERVICE_NAME gives, and the spans of API requests.
func TestDevExportsTracesOverOTLP(t *testing.T) {
	rcv := newOTLPReceiver(t)
	t.Setenv("XDG_CONFIG_HOME", t.TempDir())
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", rcv.srv.URL)
	t.Setenv("OTEL_SERVICE_NAME", "jobfleet-under-test")
	t.Setenv("OTEL_BSP_SCHEDULE_DELAY", "200") // ms
	var dev *proctest.Process
	var url string
	for attempt := 1; ; attempt++ {
		port := freePortPair(t)
		etcdAddr, err := etcdserver.FreeAddr()
		if err != nil {
			t.Fatal(err)
		}
		peerAddr, err := etcdserver.FreeAddr()
		if err != nil {
			t.Fatal(err)
		}
		url = fmt.Sprintf("http://127.0.0.1:%d", port)
		dev = startProc(t, "dev", "dev", "--orchestrators=1", "--listen=127.0.0.1:"+strconv.Itoa(port),
			"--etcd-listen="+etcdAddr, "--etcd-peer-listen="+peerAddr, "--data-dir="+t.TempDir())
		poll(t, 60*time.Second, "jobfleet dev ready, or exited", func() (bool, string) {
			if dev.Exited() {
				return true, ""
			}
			code, err := getJSON(url+"/readyz", nil)
			return err == nil && code == http.StatusOK, fmt.Sprintf("GET /readyz: %d %v", code, err)
		})
		if !dev.Exited() {
			break
		}
		if strings.Contains(dev.Stderr.String(), "address already in use") && attempt < 3 {
			continue
		}
		t.Fatalf("jobfleet dev exited at start-up: %v", dev.Cmd.ProcessState)
	}
	if logLine(dev.Stderr.String(), "tracing on") == "" {
		poll(t, 10*time.Second, "the log line saying tracing is on", func() (bool, string) {
			return logLine(dev.Stderr.String(), "tracing on") != "", dev.Stderr.String()
		})
	}
	var fire, grant, att otlpSpan
	poll(t, 60*time.Second, "the spans of a run of example-echo at the receiver", func() (bool, string) {
		var ok bool
		fire, grant, att, ok = rcv.run("example-echo")
		return ok, fmt.Sprintf("%d spans received", rcv.received())
	})
	if fire.parent != "" {
		t.Errorf("fire span has parent %s, want none", fire.parent)
	}
	if grant.parent != fire.id || att.parent != grant.id {
		t.Errorf("parents: grant's %s (want the fire's %s), attempt's %s (want the grant's %s)", grant.parent, fire.id, att.parent, grant.id)
	}
	if fire.service != "jobfleet-under-test" || att.service != "jobfleet-under-test" {
		t.Errorf("service names %q, %q, want OTEL_SERVICE_NAME's", fire.service, att.service)
	}
	if att.attrs["jobfleet.outcome"] != "succeeded" || att.attrs["jobfleet.worker"] == "" {
		t.Errorf("attempt attributes %v, want a worker and outcome succeeded", att.attrs)
	}
	// An API request (the CLI's, here a plain GET) is a span too.
	getJSON(url+"/readyz", nil)
	poll(t, 20*time.Second, "a span of GET /readyz", func() (bool, string) { return rcv.named("GET /readyz"), "" })
	t.Logf("trace %s of example-echo: %s %s (root, partition %s, epoch %s) ← %s %s (worker %s) ← %s %s (worker %s, %s)",
		fire.trace, fire.name, fire.id, fire.attrs["jobfleet.partition"], fire.attrs["jobfleet.epoch"],
		grant.name, grant.id, grant.attrs["jobfleet.worker"], att.name, att.id, att.attrs["jobfleet.worker"], att.attrs["jobfleet.outcome"])
}
