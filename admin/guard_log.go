package admin

import (
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/jobfleet/jobfleet/api"

	"github.com/jonboulle/clockwork"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// finish counts the request and writes its audit line.
func (g *guard) finish(w *statusWriter, r *http.Request, route string, info *requestInfo) {
	code := w.code
	if code == 0 {
		code = http.StatusOK
	}
	g.requests.WithLabelValues(route, strconv.Itoa(code)).Inc()
	if r.Method == http.MethodGet || r.Method == http.MethodHead {
		return
	}
	lvl := zapcore.InfoLevel
	refused := code == http.StatusUnauthorized || code == http.StatusForbidden || code == http.StatusTooManyRequests ||
		code == http.StatusConflict && (route == "POST "+api.PathRegister || route == "POST "+api.PathDeregister) // a worker ID held by another credential
	if strings.HasPrefix(route, "POST /v1/worker/") && !refused {
		// The fleet's own steady traffic, redirects (421) and stale
		// reports (409) included: the dispatcher logs each attempt
		// started and finished with its worker and credential.
		lvl = zapcore.DebugLevel
	}
	if code == http.StatusUnauthorized && info.principal == nil && !g.anonLog.first(r.RemoteAddr) {
		// Anyone can send these, as fast as they like: one line per
		// remote host and minute at info, the rest at debug (the
		// requests metric counts them all).
		lvl = zapcore.DebugLevel
	}
	ce := g.audit.Check(lvl, "request")
	if ce == nil {
		return
	}
	credential, role := "", ""
	if info.principal != nil {
		credential, role = info.principal.ID, string(info.principal.Role)
	}
	ce.Write(zap.String("credential", credential), zap.String("role", role), zap.String("method", r.Method),
		zap.String("route", route), zap.String("job_id", info.jobID), zap.Int("status", code), zap.String("remote", r.RemoteAddr))
}

// anonLog decides which refused requests without a credential are audited
// at info level: the first from a remote host in each anonLogInterval.
// Safe for concurrent use.
type anonLog struct {
	clock clockwork.Clock
	mu    sync.Mutex
	last  map[string]time.Time // remote host: when a line was last written at info
}

// anonLogInterval is how often a remote host's refused anonymous requests
// reach the audit log at info level; anonLogHosts bounds the hosts kept.
const (
	anonLogInterval = time.Minute
	anonLogHosts    = 4096
)

// first reports whether a refused anonymous request from remote
// ("host:port") is the first from its host in the interval, and records it.
func (l *anonLog) first(remote string) bool {
	host, _, err := net.SplitHostPort(remote)
	if err != nil {
		host = remote
	}
	now := l.clock.Now()
	l.mu.Lock()
	defer l.mu.Unlock()
	if t, ok := l.last[host]; ok && now.Sub(t) < anonLogInterval {
		return false
	}
	if len(l.last) >= anonLogHosts {
		clear(l.last) // many hosts at once: start over rather than grow
	}
	l.last[host] = now
	return true
}
