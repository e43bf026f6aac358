package admin

import (
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// MetricsHandler returns the handler of a member's separate metrics
// listener: GET /metrics, /healthz and /readyz only (as Handler serves
// them), for scrapers and probes, with no credential asked. Every other
// path is 404. Of cfg it uses Gatherer and HealthGrace.
func MetricsHandler(m Member, cfg Config) http.Handler {
	if cfg.Gatherer == nil {
		cfg.Gatherer = prometheus.DefaultGatherer
	}
	if cfg.HealthGrace == 0 {
		cfg.HealthGrace = 2 * time.Second
	}
	a := &server{m: m, cfg: cfg}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", a.healthz)
	mux.HandleFunc("GET /readyz", a.readyz)
	mux.Handle("GET /metrics", promhttp.HandlerFor(cfg.Gatherer, promhttp.HandlerOpts{}))
	return jsonErrors{mux}
}
