// Package admin serves jobfleet's HTTP API on an orchestrator: health,
// readiness, metrics, the cluster, job, run, credential and worker
// protocol endpoints. Every orchestrator serves all of it. Errors are JSON
// documents {"error": "message"} with a fitting status code.
//
// Every route is listed once, as data, in the route table (routes.go) with
// the access it needs (api.Access); one guard in front of the routes
// authenticates the caller and enforces the table, the browser defences,
// the request-rate ceiling, each credential's write budgets (budget.go:
// the bytes and key versions a request may make etcd store) and long-poll
// caps, and writes the audit log. Only GET /healthz and GET /readyz answer
// without a credential.
package admin

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/jonboulle/clockwork"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	"go.uber.org/zap"
	grpcstatus "google.golang.org/grpc/status"

	"github.com/jobfleet/jobfleet/api"
	"github.com/jobfleet/jobfleet/auth"
	"github.com/jobfleet/jobfleet/console"
	"github.com/jobfleet/jobfleet/internal/tracing"
	"github.com/jobfleet/jobfleet/store"
)

// Config configures the API.
type Config struct {
	// Gatherer serves /metrics; nil serves the default registry.
	Gatherer prometheus.Gatherer
	// Registry receives the API's own metrics
	// (jobfleet_api_requests_total); nil means not registered.
	Registry prometheus.Registerer
	// HealthGrace is added to the lease TTL before /healthz fails for a
	// member that owns partitions without renewing its lease. Default 2s.
	HealthGrace time.Duration
	// Logger; nil means no logs. Audit lines go to its "audit" child.
	Logger *zap.Logger
	// Tokens serves /v1/tokens (an *auth.Store); nil answers 503.
	Tokens TokenStore
	// Insecure turns authentication off: every request acts as the admin
	// auth.AnonymousID. The browser defences still apply. The caller must
	// allow it only on loopback listeners.
	Insecure bool
	// Loopback says the API is served on loopback addresses only: the
	// Host header of every request must then name a loopback address or
	// "localhost", with the port the request arrived on, so that a web
	// page cannot reach the API through a DNS name rebound to 127.0.0.1.
	Loopback bool
	// Limits are the rate limit and the long-poll caps; zero fields take
	// their defaults (DefaultLimits).
	Limits Limits
	// Clock times rate limits; nil means the real clock.
	Clock clockwork.Clock
	// TriggerRate and TriggerBurst limit the triggers of each job this
	// member accepts (POST /v1/jobs/{id}/trigger): per second, and at once;
	// beyond them it answers 429 with Retry-After. The limit is per member.
	// Zero means DefaultTriggerRate and DefaultTriggerBurst; a negative
	// rate, no limit.
	TriggerRate  float64
	TriggerBurst int
	// Now is the clock of the trigger limit and of next fire times (GET
	// /v1/jobs/{id}/next, POST /v1/schedule:preview); nil is Clock.Now.
	Now func() time.Time
	// CancelWait is how long POST /v1/runs/{run_id}/cancel waits for the
	// run's partition's owner to apply the request before it answers 202
	// (the request stays recorded); 0 means DefaultCancelWait.
	CancelWait time.Duration
	// Console serves the web console's static files under /ui/; nil
	// serves the console embedded in package console.
	Console http.Handler
	// EtcdEndpoints returns the etcd client URLs this member uses (such as
	// (*clientv3.Client).Endpoints). Poll replies carry them, without any
	// user information, so that workers deny them to "http" jobs; nil
	// sends none.
	EtcdEndpoints func() []string
	// ForwardTransport carries the requests this member forwards to the
	// owner of a run's partition (live output: GET /v1/runs/{id}/output,
	// POST /v1/worker/output), to the owner's advertised address; it must
	// trust the members' certificates when they serve TLS. Nil: a clone
	// of http.DefaultTransport.
	ForwardTransport http.RoundTripper
}

// withDefaults returns c with its zero fields set to their defaults.
func (c Config) withDefaults() Config {
	if c.Gatherer == nil {
		c.Gatherer = prometheus.DefaultGatherer
	}
	if c.HealthGrace == 0 {
		c.HealthGrace = 2 * time.Second
	}
	if c.Logger == nil {
		c.Logger = zap.NewNop()
	}
	if c.Clock == nil {
		c.Clock = clockwork.NewRealClock()
	}
	if c.Now == nil {
		c.Now = c.Clock.Now
	}
	if c.CancelWait <= 0 {
		c.CancelWait = DefaultCancelWait
	}
	if c.Console == nil {
		c.Console = console.Handler()
	}
	c.Limits = c.Limits.withDefaults()
	return c
}

// Handler returns the API's handler for member m.
func Handler(m Member, cfg Config) http.Handler {
	cfg = cfg.withDefaults()
	authn := m.Authenticator()
	a := &server{m: m, authn: authn, reg: m.WorkerRegistry(), cfg: cfg, streams: newStreamCap(cfg.Limits, "partition streams"), outputStreams: newStreamCap(cfg.Limits, "output streams"), throttled: newThrottleCounter(cfg.Registry)}
	g := newGuard(cfg, m, authn, a.throttled)
	mux := http.NewServeMux()
	for _, rt := range a.routes() {
		mux.Handle(rt.pattern, g.route(rt))
		if rt.access.Anonymous() {
			g.anon[rt.pattern] = true
		}
		if rt.access == api.AccessStatic {
			g.static[rt.pattern] = true
		}
	}
	g.next = jsonErrors{mux}
	g.mux = mux
	return tracing.Handler(g, func(r *http.Request) string {
		_, pattern := mux.Handler(r)
		return pattern
	})
}

// metricsHandler serves GET /metrics.
func (a *server) metricsHandler() http.Handler {
	return promhttp.HandlerFor(a.cfg.Gatherer, promhttp.HandlerOpts{})
}

// jsonErrors serves mux, turning the replies the mux makes itself for
// requests no route takes (plain-text 404 for an unknown path, 405 with an
// Allow header for a known path and another method) into JSON errors. A
// catch-all "/" route cannot do this: it would take every method of every
// known path too, answering 404 where 405 is right.
type jsonErrors struct{ mux *http.ServeMux }

func (j jsonErrors) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h, pattern := j.mux.Handler(r)
	if pattern != "" {
		j.mux.ServeHTTP(w, r) // sets the request's pattern and path values
		return
	}
	rec := &recorder{header: http.Header{}}
	h.ServeHTTP(rec, r)
	switch {
	case rec.code == http.StatusMethodNotAllowed:
		allow := rec.header.Get("Allow")
		w.Header().Set("Allow", allow)
		WriteError(w, rec.code, "method "+r.Method+" not allowed on "+r.URL.Path+" (allowed: "+allow+")")
	case rec.code >= 400:
		msg := "no such endpoint: " + r.Method + " " + r.URL.Path
		if hint := slashHint(r.URL.EscapedPath()); hint != "" {
			msg += "; " + hint
		}
		WriteError(w, rec.code, msg)
	default: // a redirect to the canonical path
		maps.Copy(w.Header(), rec.header)
		w.WriteHeader(rec.code)
		_, _ = w.Write(rec.body)
	}
}

// recorder keeps the reply of the mux's own handlers (small, bodies of a
// line) so that jsonErrors can rewrite it.
type recorder struct {
	header http.Header
	code   int
	body   []byte
}

func (r *recorder) Header() http.Header { return r.header }

func (r *recorder) WriteHeader(code int) {
	if r.code == 0 {
		r.code = code
	}
}

func (r *recorder) Write(p []byte) (int, error) {
	r.WriteHeader(http.StatusOK)
	r.body = append(r.body, p...)
	return len(p), nil
}

type server struct {
	m       Member
	authn   Authenticator  // m's, nil without one
	reg     WorkerRegistry // m's, nil without one
	cfg     Config
	streams *streamCap // the partition streams served at once
	// outputStreams bounds the output streams (GET
	// /v1/runs/{id}/output?follow=1) served at once.
	outputStreams *streamCap
	throttled     throttleCounter // 429s by reason
}

func (a *server) healthz(w http.ResponseWriter, r *http.Request) {
	if err := a.m.Healthy(a.cfg.HealthGrace); err != nil {
		WriteError(w, http.StatusServiceUnavailable, err.Error())
		return
	}
	WriteJSON(w, http.StatusOK, api.Status{Status: "ok"})
}

func (a *server) readyz(w http.ResponseWriter, r *http.Request) {
	ok, reason := a.m.Ready()
	if !ok {
		WriteJSON(w, http.StatusServiceUnavailable, api.Status{Status: "not ready", Reason: reason})
		return
	}
	WriteJSON(w, http.StatusOK, api.Status{Status: "ready"})
}

func (a *server) members(w http.ResponseWriter, r *http.Request) {
	v := a.m.Members()
	if v.Members == nil {
		v.Members = []api.Member{}
	}
	WriteJSON(w, http.StatusOK, v)
}

func (a *server) partitions(w http.ResponseWriter, r *http.Request) {
	t, err := a.m.Partitions()
	if errors.Is(err, ErrNotStarted) {
		WriteError(w, http.StatusServiceUnavailable, "this member has not joined the cluster yet")
		return
	}
	if errors.Is(store.Classify(err), store.ErrUnavailable) {
		a.cfg.Logger.Warn("reading the owner table failed", zap.Error(err))
		WriteError(w, http.StatusServiceUnavailable, "cannot read the owner table from etcd now; retry later")
		return
	}
	if err != nil {
		a.cfg.Logger.Error("reading the owner table failed", zap.Error(err))
		WriteError(w, http.StatusInternalServerError, publicMessage(err))
		return
	}
	WriteJSON(w, http.StatusOK, t)
}

func (a *server) drain(w http.ResponseWriter, r *http.Request) {
	p, _ := auth.FromContext(r.Context())
	a.cfg.Logger.Info("drain requested over the API", zap.String("credential", p.ID), zap.String("remote", r.RemoteAddr))
	a.m.Drain()
	WriteJSON(w, http.StatusAccepted, api.Status{Status: "draining"})
}

// Indentation of replies: replies are indented for people reading them
// with curl, unless that would make them more than indentGrowth times
// larger than compact JSON (deeply nested payloads) or the compact reply
// is over indentMaxBytes: indentation must never multiply what a request
// costs. A page of 1 000 jobs (about 600 KB) is over it: indenting it made
// it a quarter larger and cost server and client a quarter more CPU per
// job listed, for a reply nobody reads on a terminal; a page of the
// default 100 jobs is under it.
const (
	indentMaxBytes = 64 << 10
	indentGrowth   = 4
)

// WriteJSON writes v as a JSON response with status code. v is encoded in
// full before anything is written, so that a value that cannot be encoded
// gives a 500 with a JSON error instead of a 200 with a truncated or empty
// body; the encoding error is returned for the caller to log (other
// write errors mean the client went away and are not returned).
func WriteJSON(w http.ResponseWriter, code int, v any) error {
	body, err := json.Marshal(v)
	if err != nil {
		writeEncodeFailure(w)
		return fmt.Errorf("encode the reply: %w", err)
	}
	writeJSONBody(w, code, body)
	return nil
}

// writeEncodeFailure writes the 500 reply for a document that could not be
// encoded as JSON.
func writeEncodeFailure(w http.ResponseWriter) {
	writeBody(w, http.StatusInternalServerError, []byte(`{"error":"internal error: the reply could not be encoded as JSON (logged by the server)"}`))
}

// writeJSONBody writes body, compact JSON, as WriteJSON writes an encoded
// reply (indented within the limits above).
func writeJSONBody(w http.ResponseWriter, code int, body []byte) {
	if len(body) <= indentMaxBytes {
		if indented := indentReply(body, indentGrowth*len(body)+1024); indented != nil {
			body = indented
		}
	}
	writeBody(w, code, body)
}

func writeBody(w http.ResponseWriter, code int, body []byte) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(body)+1))
	w.WriteHeader(code)
	_, _ = w.Write(append(body, '\n')) // an error means the client went away
}

// publicMessage returns err's message for a reply, unless it carries
// etcd's or gRPC's wording (which is for logs, not clients): then a fixed
// sentence.
func publicMessage(err error) string {
	var etcdErr rpctypes.EtcdError
	if _, isGRPC := grpcstatus.FromError(err); isGRPC || errors.As(err, &etcdErr) {
		switch {
		case errors.Is(store.Classify(err), store.ErrNoSpace):
			return store.ErrNoSpace.Error()
		case errors.Is(store.Classify(err), store.ErrUnavailable):
			return store.ErrUnavailable.Error() + ": etcd did not answer in time or has no leader; retry later"
		}
		return "internal error: the store failed"
	}
	return err.Error()
}

// WriteError writes {"error": msg} with status code.
func WriteError(w http.ResponseWriter, code int, msg string) {
	_ = WriteJSON(w, code, api.Error{Message: msg}) // a string always encodes
}

// slashHint says, for a path under /v1/jobs/ or /v1/runs/ that no route
// serves and that goes on after the ID, that an ID holding "/" goes
// percent-encoded: job team/nightly is /v1/jobs/team%2Fnightly.
func slashHint(escaped string) string {
	for _, p := range []string{"/v1/jobs/", "/v1/runs/"} {
		rest, ok := strings.CutPrefix(escaped, p)
		if ok && strings.Contains(rest, "/") {
			id, more, _ := strings.Cut(rest, "/")
			return fmt.Sprintf("if the ID is %s/%s, percent-encode its \"/\" in the path: %s%s%%2F%s", id, more, p, id, strings.ReplaceAll(more, "/", "%2F"))
		}
	}
	return ""
}
