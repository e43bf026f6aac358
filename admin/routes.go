package admin

import (
	"context"
	"net/http"

	"github.com/jobfleet/jobfleet/api"
	"github.com/jobfleet/jobfleet/internal/cursor"
)

// route is one endpoint of the API: the mux pattern, what the caller
// needs, where the job ID it concerns comes from, and the handler.
type route struct {
	pattern string
	access  api.Access
	scope   scope
	// longPoll marks the worker poll: counted against the long-poll caps,
	// not the rate limit.
	longPoll bool
	// stream marks a response that lasts (an event stream): it ends when
	// its credential is revoked or expires, as a long poll does.
	stream bool
	// cost is what a request may make etcd store, charged to its
	// credential's write budgets before it is served (budget.go).
	cost    writeCost
	handler http.Handler
}

// scope says where a route finds the job whose ID a credential's prefix
// must cover.
type scope int

const (
	// scopeNone: the route concerns no job (cluster state, metrics,
	// credentials, heartbeats and completions, which are bound to the
	// credential that took the attempt).
	scopeNone scope = iota
	// scopeJob: the path's {id}.
	scopeJob
	// scopeRun: the job of the path's {run_id}.
	scopeRun
	// scopeQueryJob: the query parameter "job".
	scopeQueryJob
	// scopeCalendar: the path's {name}, a calendar's: a credential's
	// prefix limits the calendars it may read and write as it does job
	// IDs.
	scopeCalendar
	// scopeLimit: the path's {key}, a limit key's, scoped as a job ID.
	scopeLimit
	// scopeHandler: the handler applies the prefix itself: POST /v1/jobs
	// checks the body's ID, POST /v1/jobs:batch every item's ID, GET
	// /v1/jobs and GET /v1/runs list only the prefix, a poll is handed
	// only runs within it.
	scopeHandler
)

// routes is the route table: every endpoint of the API, with the access
// it needs. The mux is built from it and nothing else, so no endpoint can
// exist without an entry; TestRouteMatrix checks every entry against
// every role.
func (a *server) routes() []route {
	// The member is asked for its parts per request (Routes lists the
	// table without a member).
	cur := listCursors{codec: func() (*cursor.Codec, error) { return a.m.Cursors() }}
	w := &workerAPI{get: func() (WorkerProtocol, error) { return a.m.WorkerProtocol() }, reg: a.reg, etcd: a.cfg.EtcdEndpoints}
	j := &jobsAPI{jobs: func() (JobStore, error) { return a.m.JobStore() }, lg: a.cfg.Logger.Named("jobs-api"), triggers: newTriggerLimiter(a.cfg.TriggerRate, a.cfg.TriggerBurst, a.cfg.Now), now: a.cfg.Now, whyPending: w.whyPending, throttled: a.throttled, cancelWait: a.cfg.CancelWait, cursors: cur}
	if ls, ok := a.m.(interface {
		LimitStatus(key string) (api.LimitStatus, bool)
		RunWaitingFor(runID string) (string, int)
	}); ok {
		j.limitStatus, j.runWaitingFor = ls.LimitStatus, ls.RunWaitingFor
	}
	if lw, ok := a.m.(interface {
		WaitLimits(ctx context.Context, rev int64) error
	}); ok {
		j.limitsApplied = lw.WaitLimits
	}
	if nc, ok := a.m.(interface {
		CheckNotifications(ns []api.Notification) error
	}); ok {
		j.checkNotify = nc.CheckNotifications
	}
	t := &tokensAPI{tokens: a.cfg.Tokens, auth: a.authn, insecure: a.cfg.Insecure, cursors: cur}
	proxy := a.cfg.ForwardTransport
	if proxy == nil {
		proxy = http.DefaultTransport.(*http.Transport).Clone()
	}
	out := &outputAPI{proto: w.get, jobs: j, streams: a.outputStreams, proxy: proxy, clock: a.cfg.Clock.Now, lg: a.cfg.Logger.Named("output-api")}
	hf := func(f http.HandlerFunc) http.Handler { return f }
	return []route{
		{pattern: "GET /healthz", access: api.AccessAnonymous, handler: hf(a.healthz)},
		{pattern: "GET /readyz", access: api.AccessAnonymous, handler: hf(a.readyz)},
		{pattern: "GET /metrics", access: api.AccessRead, handler: a.metricsHandler()},

		{pattern: "GET /v1/cluster/members", access: api.AccessMembers, handler: hf(a.members)},
		{pattern: "GET /v1/cluster/partitions", access: api.AccessRead, handler: hf(a.partitions)},
		{pattern: "POST /v1/cluster/drain", access: api.AccessAdmin, cost: costAdminWrite, handler: hf(a.drain)},
		{pattern: "GET /v1/cluster/storage", access: api.AccessRead, handler: storageHandler(func(ctx context.Context) (api.StorageReport, error) { return a.m.Storage(ctx) })},
		{pattern: "GET /v1/cluster/workers", access: api.AccessRead, handler: hf(w.workers)},
		{pattern: "GET /v1/cluster/placement", access: api.AccessRead, scope: scopeQueryJob, handler: hf(a.placement)},
		{pattern: "GET /v1/cluster/overview", access: api.AccessRead, handler: hf(a.overview)},
		{pattern: "GET /v1/cluster/activity", access: api.AccessRead, handler: hf(a.activity)},
		{pattern: "GET /v1/runs/late", access: api.AccessRead, scope: scopeHandler, handler: hf(a.late)},
		{pattern: "GET /v1/cluster/partitions/watch", access: api.AccessRead, stream: true, handler: hf(a.watchPartitions)},
		{pattern: "GET /v1/whoami", access: api.AccessMembers, handler: hf(a.whoami)},

		{pattern: "GET /v1/jobs", access: api.AccessRead, scope: scopeHandler, handler: hf(j.list)},
		{pattern: "POST /v1/jobs", access: api.AccessWrite, scope: scopeHandler, cost: costJobWrite, handler: hf(j.create)},
		{pattern: "POST /v1/jobs:batch", access: api.AccessWrite, scope: scopeHandler, cost: costBatch, handler: hf(j.batch)},
		{pattern: "GET /v1/jobs/{id}", access: api.AccessRead, scope: scopeJob, handler: j.byID(http.StatusOK, getJob)},
		{pattern: "PUT /v1/jobs/{id}", access: api.AccessWrite, scope: scopeJob, cost: costJobWrite, handler: hf(j.put)},
		{pattern: "DELETE /v1/jobs/{id}", access: api.AccessWrite, scope: scopeJob, cost: costJobDelete, handler: j.byID(http.StatusNoContent, deleteJob)},
		{pattern: "POST /v1/jobs/{id}/pause", access: api.AccessWrite, scope: scopeJob, cost: costPause, handler: j.byID(http.StatusOK, pauseJob)},
		{pattern: "POST /v1/jobs/{id}/resume", access: api.AccessWrite, scope: scopeJob, cost: costPause, handler: j.byID(http.StatusOK, resumeJob)},
		{pattern: "POST /v1/jobs/{id}/trigger", access: api.AccessWrite, scope: scopeJob, cost: costTrigger, handler: hf(j.trigger)},
		{pattern: "POST /v1/jobs/{id}/backfill", access: api.AccessWrite, scope: scopeJob, cost: costBackfill, handler: hf(j.backfill)},
		{pattern: "GET /v1/jobs/{id}/backfill", access: api.AccessRead, scope: scopeJob, handler: hf(j.getBackfill)},
		{pattern: "DELETE /v1/jobs/{id}/backfill", access: api.AccessWrite, scope: scopeJob, cost: costAdminWrite, handler: hf(j.deleteBackfill)},
		{pattern: "GET /v1/jobs/{id}/next", access: api.AccessRead, scope: scopeJob, handler: hf(j.next)},
		{pattern: "POST /v1/schedule:preview", access: api.AccessRead, handler: hf(j.preview)},
		{pattern: "GET /v1/jobs/{id}/dependents", access: api.AccessRead, scope: scopeJob, handler: hf(j.dependents)},
		{pattern: "GET /v1/jobs/{id}/runs", access: api.AccessRead, scope: scopeJob, handler: hf(j.runs)},
		{pattern: "GET /v1/jobs/{id}/notifications", access: api.AccessRead, scope: scopeJob, handler: hf(j.notifications)},
		{pattern: "GET /v1/runs", access: api.AccessRead, scope: scopeHandler, handler: hf(j.failing)},
		{pattern: "GET /v1/runs/{run_id}", access: api.AccessRead, scope: scopeRun, handler: hf(j.getRun)},
		{pattern: "POST /v1/runs/{run_id}/cancel", access: api.AccessWrite, scope: scopeRun, cost: costCancel, handler: hf(j.cancelRun)},
		{pattern: "POST /v1/runs/{run_id}/retry", access: api.AccessWrite, scope: scopeRun, cost: costCancel, handler: hf(j.retryRun)},
		{pattern: "GET /v1/runs/{run_id}/output", access: api.AccessRead, scope: scopeRun, stream: true, handler: hf(out.get)},

		{pattern: "GET /v1/calendars", access: api.AccessRead, scope: scopeHandler, handler: calendars.list(j)},
		{pattern: "GET /v1/calendars/{name}", access: api.AccessRead, scope: scopeCalendar, handler: calendars.get(j)},
		{pattern: "PUT /v1/calendars/{name}", access: api.AccessWrite, scope: scopeCalendar, handler: calendars.put(j)},
		{pattern: "DELETE /v1/calendars/{name}", access: api.AccessWrite, scope: scopeCalendar, handler: calendars.delete(j)},

		{pattern: "GET /v1/limits", access: api.AccessRead, scope: scopeHandler, handler: limits.list(j)},
		{pattern: "GET /v1/limits/{key}", access: api.AccessRead, scope: scopeLimit, handler: limits.get(j)},
		{pattern: "PUT /v1/limits/{key}", access: api.AccessWrite, scope: scopeLimit, handler: limits.put(j)},
		{pattern: "DELETE /v1/limits/{key}", access: api.AccessWrite, scope: scopeLimit, handler: limits.delete(j)},

		{pattern: "POST " + api.PathPoll, access: api.AccessWork, scope: scopeHandler, longPoll: true, handler: hf(w.poll)},
		{pattern: "POST " + api.PathEndPolls, access: api.AccessWork, handler: hf(w.endPolls)},
		{pattern: "POST " + api.PathHeartbeat, access: api.AccessWork, handler: hf(w.heartbeat)},
		{pattern: "POST " + api.PathComplete, access: api.AccessWork, cost: costComplete, handler: hf(w.complete)},
		{pattern: "POST " + api.PathRegister, access: api.AccessWork, cost: costRegister, handler: hf(w.register)},
		{pattern: "POST " + api.PathDeregister, access: api.AccessWork, cost: costDeregister, handler: hf(w.deregister)},
		{pattern: "POST " + api.PathOutput, access: api.AccessWork, handler: hf(out.push)},
		{pattern: "POST " + api.PathPresence, access: api.AccessWork, stream: true, cost: costPresence, handler: hf(w.presence)},

		{pattern: "POST /v1/tokens", access: api.AccessAdmin, cost: costToken, handler: hf(t.create)},
		{pattern: "GET /v1/tokens", access: api.AccessAdmin, handler: hf(t.list)},
		{pattern: "DELETE /v1/tokens/{id}", access: api.AccessAdmin, cost: costAdminWrite, handler: hf(t.revoke)},

		{pattern: "GET /ui/", access: api.AccessStatic, handler: a.cfg.Console},
		{pattern: "GET /{$}", access: api.AccessStatic, handler: http.RedirectHandler("/ui/", http.StatusFound)},
	}
}

// Route describes one endpoint of the API for documentation and tests.
type Route struct {
	// Pattern is the mux pattern, "METHOD /path/{wildcard}"; it is also
	// the route label of jobfleet_api_requests_total.
	Pattern string
	// Access is what the caller needs.
	Access api.Access
	// Scoped says whether a credential's job-ID prefix limits the route.
	Scoped bool
	// Writes says whether the route's requests are charged to their
	// credential's write budgets (Limits.WriteBytes, WriteRevisions).
	Writes bool
}

// Routes returns the route table, in the order the API documents it.
func Routes() []Route {
	a := &server{cfg: Config{}.withDefaults()}
	var out []Route
	for _, rt := range a.routes() {
		out = append(out, Route{Pattern: rt.pattern, Access: rt.access, Scoped: rt.scope != scopeNone, Writes: !rt.cost.zero() || rt.longPoll})
	}
	return out
}
