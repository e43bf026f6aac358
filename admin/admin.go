// Package admin serves jobfleet's HTTP API on an orchestrator: health,
// readiness, metrics and the cluster endpoints of DESIGN.md's contract. Every
// orchestrator serves all of it. Errors are JSON documents
// {"error": "message"} with a fitting status code.
package admin

import (
	"encoding/json"
	"errors"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"go.uber.org/zap"

	"github.com/jobfleet/jobfleet/internal/orchestrator"
	"github.com/jobfleet/jobfleet/membership"
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
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		WriteError(w, http.StatusNotFound, "no such endpoint: "+r.Method+" "+r.URL.Path)
	})
	return mux
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
	if err != nil {
		WriteError(w, http.StatusInternalServerError, err.Error())
		return
	}
	WriteJSON(w, http.StatusOK, t)
}

func (a *api) drain(w http.ResponseWriter, r *http.Request) {
	a.cfg.Logger.Info("drain requested over the API", zap.String("remote", r.RemoteAddr))
	a.m.Drain()
	WriteJSON(w, http.StatusAccepted, map[string]string{"status": "draining"})
}

// WriteJSON writes v as a JSON response with status code.
func WriteJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	_ = enc.Encode(v) // the client went away; nothing to do
}

// WriteError writes {"error": msg} with status code.
func WriteError(w http.ResponseWriter, code int, msg string) {
	WriteJSON(w, code, map[string]string{"error": msg})
}
