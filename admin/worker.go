package admin

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/url"

	"github.com/jobfleet/jobfleet/auth"
	"github.com/jobfleet/jobfleet/dispatch"
)

// WorkerProtocol is the orchestrator side of the worker protocol;
// *dispatch.Dispatcher implements it.
type WorkerProtocol interface {
	Poll(ctx context.Context, req dispatch.PollRequest) (dispatch.PollResponse, error)
	Heartbeat(ctx context.Context, req dispatch.HeartbeatRequest) (dispatch.HeartbeatResponse, error)
	Complete(ctx context.Context, req dispatch.CompleteRequest) (dispatch.CompleteResponse, error)
}

// WorkerFunc returns the worker protocol once the member can serve it, or
// an error saying why not yet (answered 503).
type WorkerFunc func() (WorkerProtocol, error)

// maxProtocolBody caps worker protocol requests: a completion carries at
// most MaxOutputBytes of output and as much error text.
const maxProtocolBody = 2*dispatch.MaxOutputBytes + 64<<10

// workerAPI serves the worker protocol (dispatch/protocol.go). The
// request's credential, never its body, names the credential an attempt is
// bound to and the prefix a poll is limited to.
type workerAPI struct {
	get  WorkerFunc
	etcd func() []string // the etcd endpoints poll replies carry; may be nil
}

func (a *workerAPI) poll(w http.ResponseWriter, r *http.Request) {
	var req dispatch.PollRequest
	serveProtocol(w, r, a.get, &req, func(p WorkerProtocol, who auth.Principal) (any, error) {
		req.Credential, req.Prefix = who.ID, who.Prefix
		resp, err := p.Poll(r.Context(), req)
		if err == nil && a.etcd != nil {
			resp.EtcdEndpoints = withoutUserinfo(a.etcd())
		}
		return resp, err
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

func (a *workerAPI) heartbeat(w http.ResponseWriter, r *http.Request) {
	var req dispatch.HeartbeatRequest
	serveProtocol(w, r, a.get, &req, func(p WorkerProtocol, who auth.Principal) (any, error) {
		req.Credential = who.ID
		return p.Heartbeat(r.Context(), req)
	})
}

func (a *workerAPI) complete(w http.ResponseWriter, r *http.Request) {
	var req dispatch.CompleteRequest
	serveProtocol(w, r, a.get, &req, func(p WorkerProtocol, who auth.Principal) (any, error) {
		req.Credential = who.ID
		return p.Complete(r.Context(), req)
	})
}

func serveProtocol(w http.ResponseWriter, r *http.Request, get WorkerFunc, req any, call func(WorkerProtocol, auth.Principal) (any, error)) {
	if get == nil {
		WriteError(w, http.StatusServiceUnavailable, "this member does not serve workers")
		return
	}
	p, err := get()
	if err != nil {
		WriteError(w, http.StatusServiceUnavailable, err.Error())
		return
	}
	if err := decodeBody(w, r, maxProtocolBody, req); err != nil {
		WriteError(w, bodyStatus(err), "malformed request: "+bodyMessage(err))
		return
	}
	who, _ := auth.FromContext(r.Context())
	resp, err := call(p, who)
	var notOwner *dispatch.NotOwnerError
	switch {
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
		WriteJSON(w, http.StatusMisdirectedRequest, dispatch.NotOwner{Error: err.Error(), Owner: notOwner.Owner, OwnerAddr: notOwner.OwnerAddr})
	case errors.Is(err, dispatch.ErrBadRequest):
		WriteError(w, http.StatusBadRequest, err.Error())
	case errors.Is(err, dispatch.ErrForbidden), errors.Is(err, dispatch.ErrWorkerIDTaken):
		WriteError(w, http.StatusForbidden, err.Error())
	case errors.Is(err, dispatch.ErrTooManyWorkers):
		WriteError(w, http.StatusTooManyRequests, err.Error())
	case errors.Is(err, dispatch.ErrStaleAttempt):
		WriteError(w, http.StatusConflict, err.Error())
	default:
		WriteError(w, http.StatusServiceUnavailable, publicMessage(err))
	}
}
