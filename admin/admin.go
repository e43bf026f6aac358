// Package admin serves jobfleet's HTTP API on an orchestrator: health,
// readiness, metrics and the cluster and job endpoints listed in the
// README. Every orchestrator serves all of it. Errors are JSON documents
// {"error": "message"} with a fitting status code.
package admin

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	"go.uber.org/zap"
	grpcstatus "google.golang.org/grpc/status"

	"github.com/jobfleet/jobfleet/internal/orchestrator"
	"github.com/jobfleet/jobfleet/membership"
	"github.com/jobfleet/jobfleet/store"
)

// Member is what the API needs of the orchestrator it runs in;
// *orchestrator.Orchestrator implements it.
type Member interface {
	Members() membership.View
	Partitions() (orchestrator.PartitionTable, error)
	Ready() (bool, string)
	Healthy(grace time.Duration) error
	Drain()
}

// Config configures the API.
type Config struct {
	// Gatherer serves /metrics; nil serves the default registry.
	Gatherer prometheus.Gatherer
	// HealthGrace is added to the lease TTL before /healthz fails for a
	// member that owns partitions without renewing its lease. Default 2s.
	HealthGrace time.Duration
	// Logger; nil means no logs.
	Logger *zap.Logger
	// Jobs returns the job store the /v1/jobs and /v1/runs endpoints use;
	// nil, or an error from it, makes them answer 503.
	Jobs JobsFunc
	// Worker returns the worker protocol's server (POST /v1/worker/...);
	// nil, or an error from it, answers 503.
	Worker WorkerFunc
	// Storage reads etcd's storage (GET /v1/cluster/storage); nil answers
	// 503.
	Storage StorageFunc
	// TriggerRate and TriggerBurst limit the triggers of each job this
	// member accepts (POST /v1/jobs/{id}/trigger): per second, and at once;
	// beyond them it answers 429 with Retry-After. The limit is per member.
	// Zero means DefaultTriggerRate and DefaultTriggerBurst; a negative
	// rate, no limit.
	TriggerRate  float64
	TriggerBurst int
	// Now is the clock of the trigger limit; nil is time.Now.
	Now func() time.Time
}

// Handler returns the API's handler for member m.
func Handler(m Member, cfg Config) http.Handler {
	if cfg.Gatherer == nil {
		cfg.Gatherer = prometheus.DefaultGatherer
	}
	if cfg.HealthGrace == 0 {
		cfg.HealthGrace = 2 * time.Second
	}
	if cfg.Logger == nil {
		cfg.Logger = zap.NewNop()
	}
	a := &api{m: m, cfg: cfg}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", a.healthz)
	mux.HandleFunc("GET /readyz", a.readyz)
	mux.Handle("GET /metrics", promhttp.HandlerFor(cfg.Gatherer, promhttp.HandlerOpts{}))
	mux.HandleFunc("GET /v1/cluster/members", a.members)
	mux.HandleFunc("GET /v1/cluster/partitions", a.partitions)
	mux.HandleFunc("POST /v1/cluster/drain", a.drain)
	registerStorageRoute(mux, cfg.Storage)
	registerJobRoutes(mux, cfg)
	RegisterWorkerRoutes(mux, cfg.Worker)
	return jsonErrors{mux}
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
		WriteError(w, rec.code, "no such endpoint: "+r.Method+" "+r.URL.Path)
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

type api struct {
	m   Member
	cfg Config
}

func (a *api) healthz(w http.ResponseWriter, r *http.Request) {
	if err := a.m.Healthy(a.cfg.HealthGrace); err != nil {
		WriteError(w, http.StatusServiceUnavailable, err.Error())
		return
	}
	WriteJSON(w, http.StatusOK, map[string]string{"status": "ok"})
}

func (a *api) readyz(w http.ResponseWriter, r *http.Request) {
	ok, reason := a.m.Ready()
	if !ok {
		WriteJSON(w, http.StatusServiceUnavailable, map[string]string{"status": "not ready", "reason": reason})
		return
	}
	WriteJSON(w, http.StatusOK, map[string]string{"status": "ready"})
}

func (a *api) members(w http.ResponseWriter, r *http.Request) {
	v := a.m.Members()
	if v.Members == nil {
		v.Members = []membership.Member{}
	}
	WriteJSON(w, http.StatusOK, v)
}

func (a *api) partitions(w http.ResponseWriter, r *http.Request) {
	t, err := a.m.Partitions()
	if errors.Is(err, orchestrator.ErrNotStarted) {
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

func (a *api) drain(w http.ResponseWriter, r *http.Request) {
	a.cfg.Logger.Info("drain requested over the API", zap.String("remote", r.RemoteAddr))
	a.m.Drain()
	WriteJSON(w, http.StatusAccepted, map[string]string{"status": "draining"})
}

// Indentation of replies: replies are indented for people reading them
// with curl, unless that would make them more than indentGrowth times
// larger than compact JSON (deeply nested payloads) or the reply is over
// indentMaxBytes: indentation must never multiply what a request costs.
const (
	indentMaxBytes = 1 << 20
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
		writeBody(w, http.StatusInternalServerError, []byte(`{"error":"internal error: the reply could not be encoded as JSON (logged by the server)"}`))
		return fmt.Errorf("encode the reply: %w", err)
	}
	if len(body) <= indentMaxBytes {
		var indented bytes.Buffer
		if json.Indent(&indented, body, "", "  ") == nil && indented.Len() <= indentGrowth*len(body)+1024 {
			body = indented.Bytes()
		}
	}
	writeBody(w, code, body)
	return nil
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
	_ = WriteJSON(w, code, map[string]string{"error": msg}) // a map of strings always encodes
}
