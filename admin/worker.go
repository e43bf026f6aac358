package admin

import (
	"context"
	"encoding/json"
	"errors"
	"math"
	"net/http"
	"net/url"
	"strconv"

	"github.com/jobfleet/jobfleet/api"

	"github.com/jobfleet/jobfleet/auth"
	"github.com/jobfleet/jobfleet/dispatch"
	"github.com/jobfleet/jobfleet/dispatch/workers"
	"github.com/jobfleet/jobfleet/store"
)

// WorkerProtocol is the orchestrator side of the worker protocol;
// *dispatch.Dispatcher implements it.
type WorkerProtocol interface {
	Poll(ctx context.Context, req api.PollRequest) (api.PollResponse, error)
	Heartbeat(ctx context.Context, req api.HeartbeatRequest) (api.HeartbeatResponse, error)
	Complete(ctx context.Context, req api.CompleteRequest) (api.CompleteResponse, error)
	EndPolls(ctx context.Context, req api.EndPollsRequest) error
}

// maxProtocolBody caps worker protocol requests: a completion carries at
// most MaxOutputBytes of output and as much error text.
const maxProtocolBody = 2*api.MaxOutputBytes + api.MaxStepResultBytes + 64<<10

// workerAPI serves the worker protocol (dispatch/protocol.go). The
// request's credential, never its body, names the credential an attempt is
// bound to, the prefix a poll is limited to, the worker label selector a
// registration (and a poll's registered labels) must satisfy, and the
// credential a worker ID is bound to.
type workerAPI struct {
	get  func() (WorkerProtocol, error) // Member.WorkerProtocol
	reg  WorkerRegistry                 // nil: none
	etcd func() []string                // the etcd endpoints poll replies carry; may be nil
}

func (a *workerAPI) poll(w http.ResponseWriter, r *http.Request) {
	var req api.PollRequest
	serveProtocol(w, r, a.get, &req, func(p WorkerProtocol, who auth.Principal) (any, error) {
		req.Credential, req.Prefix, req.WorkerLabels = who.ID, who.Prefix, who.WorkerLabels
		resp, err := p.Poll(r.Context(), req)
		n := len(resp.Attempts)
		if n > 1 {
			// Every attempt handed out rewrote its run: the guard
			// charged one before the poll, the others are owed.
			chargeMore(r.Context(), (n-1)*grantBytes, (n-1)*grantRevisions)
		}
		if extra := resp.Written - max(n, 1)*runWrite; extra > 0 {
			// Run documents larger than a grant's estimate (runs of
			// items) cost what they stored.
			chargeMore(r.Context(), extra, 0)
		}
		if err == nil && a.etcd != nil {
			resp.EtcdEndpoints = withoutUserinfo(a.etcd())
		}
		return resp, err
	})
}

// endPolls serves a stopping worker's end of its polls here
// (api.EndPollsRequest).
func (a *workerAPI) endPolls(w http.ResponseWriter, r *http.Request) {
	var req api.EndPollsRequest
	serveProtocol(w, r, a.get, &req, func(p WorkerProtocol, who auth.Principal) (any, error) {
		req.Credential = who.ID
		return struct{}{}, p.EndPolls(r.Context(), req)
	})
}

// withoutUserinfo returns the URLs of endpoints with any user name and
// password removed; entries that are not URLs are kept as they are.
func withoutUserinfo(endpoints []string) []string {
	out := make([]string, 0, len(endpoints))
	for _, e := range endpoints {
		if u, err := url.Parse(e); err == nil && u.User != nil {
			u.User = nil
			e = u.String()
		}
		out = append(out, e)
	}
	return out
}

// reportInScope refuses a heartbeat or completion about a run of a job
// outside who's prefix before the member looks the run up, so that the
// answer is the same 403 whether the run exists, runs or not: a scoped
// worker cannot probe another team's runs through the reports. A run ID
// that does not parse is left to the member, which refuses it as
// malformed.
func reportInScope(who auth.Principal, runID string) error {
	jobID, _, err := store.ParseRunID(runID)
	if err != nil {
		return nil
	}
	return auth.Authorize(who, api.AccessWork, jobID, true)
}

func (a *workerAPI) heartbeat(w http.ResponseWriter, r *http.Request) {
	var req api.HeartbeatRequest
	serveProtocol(w, r, a.get, &req, func(p WorkerProtocol, who auth.Principal) (any, error) {
		req.Credential = who.ID
		if err := reportInScope(who, req.RunID); err != nil {
			return nil, err
		}
		return p.Heartbeat(r.Context(), req)
	})
}

func (a *workerAPI) complete(w http.ResponseWriter, r *http.Request) {
	var req api.CompleteRequest
	serveProtocol(w, r, a.get, &req, func(p WorkerProtocol, who auth.Principal) (any, error) {
		req.Credential = who.ID
		if err := reportInScope(who, req.RunID); err != nil {
			return nil, err
		}
		resp, err := p.Complete(r.Context(), req)
		if extra := resp.Written - runWrite; extra > 0 {
			// The run's document is larger than the route's estimate (a
			// run of items): it costs what it stored.
			chargeMore(r.Context(), extra, 0)
		}
		return resp, err
	})
}

// serveProtocol serves one request of the worker protocol: get returns
// its server (an error answers 503 before the body is read), req is
// decoded from the body, and call's reply or error is written out, the
// error with its status code:
//
//	dispatch.ErrBadRequest                                   400
//	dispatch.ErrForbidden, auth.ErrForbidden                 403
//	dispatch.ErrStaleAttempt, workers.ErrIDTaken             409
//	*dispatch.NotOwnerError                                  421
//	workers.ErrRateLimited (Retry-After), ErrTooManyWorkers  429
//	store.ErrNoSpace, store.ErrHighWater                     507
//	anything else (store.ErrUnavailable, not ready)          503
func serveProtocol[P any](w http.ResponseWriter, r *http.Request, get func() (P, error), req any, call func(P, auth.Principal) (any, error)) {
	p, err := get()
	if err != nil {
		WriteError(w, http.StatusServiceUnavailable, unavailable(err, "this member"))
		return
	}
	if err := decodeBody(w, r, maxProtocolBody, req); err != nil {
		WriteError(w, bodyStatus(err), "malformed request: "+bodyMessage(err))
		return
	}
	who, _ := auth.FromContext(r.Context())
	resp, err := call(p, who)
	var notOwner *dispatch.NotOwnerError
	var limited *workers.RateError
	switch {
	case errors.Is(err, errReplied):
		// call wrote the reply (a request forwarded to the owner).
	case err == nil:
		// Compact, unlike the human-facing API: payloads travel inside
		// and must reach executors byte for byte as stored. Encoded in
		// full first: a reply that cannot be encoded is a 500, never a
		// 200 the worker cannot decode.
		body, err := json.Marshal(resp)
		if err != nil {
			WriteError(w, http.StatusInternalServerError, "internal error: the reply could not be encoded as JSON")
			return
		}
		writeBody(w, http.StatusOK, body) // a write error means the worker went away; its attempts' leases expire
	case errors.As(err, &notOwner):
		WriteJSON(w, http.StatusMisdirectedRequest, api.NotOwner{Error: err.Error(), Owner: notOwner.Owner, OwnerAddr: notOwner.OwnerAddr})
	case errors.Is(err, dispatch.ErrBadRequest):
		WriteError(w, http.StatusBadRequest, err.Error())
	case errors.Is(err, dispatch.ErrForbidden), errors.Is(err, auth.ErrForbidden):
		WriteError(w, http.StatusForbidden, err.Error())
	case errors.Is(err, dispatch.ErrStaleAttempt), errors.Is(err, workers.ErrIDTaken):
		WriteError(w, http.StatusConflict, err.Error())
	case errors.As(err, &limited):
		w.Header().Set("Retry-After", strconv.Itoa(int(math.Ceil(limited.RetryAfter.Seconds()))))
		WriteError(w, http.StatusTooManyRequests, err.Error())
	case errors.Is(err, workers.ErrTooManyWorkers):
		WriteError(w, http.StatusTooManyRequests, err.Error())
	case errors.Is(err, store.ErrNoSpace):
		WriteError(w, http.StatusInsufficientStorage, store.ErrNoSpace.Error()+"; writes resume once an operator frees space")
	case errors.Is(err, store.ErrHighWater):
		WriteError(w, http.StatusInsufficientStorage, err.Error()) // the fleet's own words: size, mark, quota
	default:
		WriteError(w, http.StatusServiceUnavailable, publicMessage(err))
	}
}
