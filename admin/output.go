package admin

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strconv"
	"time"

	"go.uber.org/zap"

	"github.com/jobfleet/jobfleet/api"
	"github.com/jobfleet/jobfleet/auth"
	"github.com/jobfleet/jobfleet/dispatch"
	"github.com/jobfleet/jobfleet/internal/httpserver"
	"github.com/jobfleet/jobfleet/store"
)

// LiveOutput is the orchestrator side of live output, held by the owner
// of each run's partition; *dispatch.Dispatcher implements it. A
// WorkerProtocol without it answers the output routes 503.
type LiveOutput interface {
	PushOutput(ctx context.Context, req api.OutputPush) (api.OutputPushResponse, error)
	Output(runID string, item *int, attempt int) (api.RunOutput, error)
	FollowOutput(ctx context.Context, runID string, item *int, attempt int, emit func(event string, v any) error) error
}

// outputAPI serves GET /v1/runs/{run_id}/output and POST
// /v1/worker/output. A member that does not own the run's partition
// forwards either to the owner (once: a forwarded request is not
// forwarded again).
type outputAPI struct {
	proto   func() (WorkerProtocol, error)
	jobs    *jobsAPI
	streams *streamCap
	proxy   http.RoundTripper
	clock   func() time.Time
	lg      *zap.Logger
}

func (o *outputAPI) live() (LiveOutput, error) {
	p, err := o.proto()
	if err != nil {
		return nil, err
	}
	l, ok := p.(LiveOutput)
	if !ok {
		return nil, errors.New("this member keeps no live output")
	}
	return l, nil
}

// push serves POST /v1/worker/output, bound to the credential that took
// the attempt as heartbeats are (reportInScope first: no existence
// probe).
func (o *outputAPI) push(w http.ResponseWriter, r *http.Request) {
	var req api.OutputPush
	serveProtocol(w, r, o.live, &req, func(l LiveOutput, who auth.Principal) (any, error) {
		req.Credential = who.ID
		if err := reportInScope(who, req.RunID); err != nil {
			return nil, err
		}
		resp, err := l.PushOutput(r.Context(), req)
		var notOwner *dispatch.NotOwnerError
		if errors.As(err, &notOwner) && o.forwardable(r, notOwner) {
			body, _ := json.Marshal(req) // plain document; Credential is not encoded
			o.forward(w, r, notOwner.OwnerAddr, body)
			return nil, errReplied
		}
		return resp, err
	})
}

// outputQuery is GET /v1/runs/{run_id}/output's query.
type outputQuery struct {
	follow  bool
	item    *int
	attempt int
}

func parseOutputQuery(q url.Values) (outputQuery, error) {
	var oq outputQuery
	if v := q.Get("follow"); v != "" {
		b, err := strconv.ParseBool(v)
		if err != nil {
			return oq, fmt.Errorf("follow: %q is not 1, 0, true or false", v)
		}
		oq.follow = b
	}
	if v := q.Get("item"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 {
			return oq, fmt.Errorf("item: %q is not an item index (0 or more)", v)
		}
		oq.item = &n
	}
	if v := q.Get("attempt"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			return oq, fmt.Errorf("attempt: %q is not an attempt number (1 or more)", v)
		}
		oq.attempt = n
	}
	return oq, nil
}

// get serves GET /v1/runs/{run_id}/output: what the owner of the run's
// partition holds of the attempt's output while it runs (and a while
// after), else the output the run stored; with follow, an event stream
// of it until the attempt ends.
func (o *outputAPI) get(w http.ResponseWriter, r *http.Request) {
	runID, ok := runIDParam(w, r)
	if !ok {
		return
	}
	q, err := parseOutputQuery(r.URL.Query())
	if err != nil {
		WriteError(w, http.StatusBadRequest, err.Error())
		return
	}
	l, err := o.live()
	if err != nil {
		WriteError(w, http.StatusServiceUnavailable, unavailable(err, "this member"))
		return
	}
	if q.follow {
		o.follow(w, r, l, runID, q)
		return
	}
	out, err := l.Output(runID, q.item, q.attempt)
	if err == nil {
		WriteJSON(w, http.StatusOK, out)
		return
	}
	if errors.Is(err, dispatch.ErrOutputNotHeld) {
		out, ok := o.stored(w, r, runID, q)
		if ok {
			WriteJSON(w, http.StatusOK, out)
		}
		return
	}
	o.failed(w, r, err)
}

// follow serves ?follow=1: the stream's headers are written with its
// first event, so that a refusal before it is a plain error reply.
func (o *outputAPI) follow(w http.ResponseWriter, r *http.Request, l LiveOutput, runID string, q outputQuery) {
	release, ok := o.streams.admit(w, r)
	if !ok {
		return
	}
	defer release()
	rc := http.NewResponseController(w)
	started := false
	last := o.clock()
	send := func(chunk []byte) error {
		if !started {
			started = true
			h := w.Header()
			h.Set("Content-Type", "text/event-stream")
			h.Set("Cache-Control", "no-store")
			h.Set("X-Accel-Buffering", "no")
			w.WriteHeader(http.StatusOK)
		}
		_ = httpserver.ExtendWriteDeadline(w, streamWriteWindow)
		if _, err := w.Write(chunk); err != nil {
			return err
		}
		last = o.clock()
		return rc.Flush()
	}
	emit := func(event string, v any) error {
		if event == "" {
			// A keep-alive chance: a comment once the stream has been
			// quiet for StreamPing.
			if started && o.clock().Sub(last) < StreamPing {
				return nil
			}
			return send([]byte(": ping\n\n"))
		}
		return send(streamEvent(event, v))
	}
	err := l.FollowOutput(r.Context(), runID, q.item, q.attempt, emit)
	switch {
	case started || err == nil:
		return // the stream has ended, or its client gone
	case errors.Is(err, dispatch.ErrOutputNotHeld):
		out, ok := o.stored(w, r, runID, q)
		if !ok {
			return
		}
		end := out
		end.Output = ""
		if out.Output != "" {
			if emit(api.EventOutput, api.OutputEvent{Attempt: out.Attempt, Data: out.Output}) != nil {
				return
			}
		}
		_ = emit(api.EventEnd, end)
	default:
		o.failed(w, r, err)
	}
}

// stored returns the output run runID keeps of the attempt asked for (the
// latest if none), or writes the error reply and returns false.
func (o *outputAPI) stored(w http.ResponseWriter, r *http.Request, runID string, q outputQuery) (api.RunOutput, bool) {
	s, ctx, cancel, ok := o.jobs.store(w, r)
	if !ok {
		return api.RunOutput{}, false
	}
	defer cancel()
	run, err := s.GetRun(ctx, runID)
	if err != nil {
		if errors.Is(err, store.ErrNotFound) {
			WriteError(w, http.StatusNotFound, fmt.Sprintf("run %s not found", quoteClip(runID)))
			return api.RunOutput{}, false
		}
		o.jobs.fail(w, r, "", err)
		return api.RunOutput{}, false
	}
	attempts, status := run.Attempts, run.Status
	if q.item != nil {
		if *q.item >= len(run.Items) {
			WriteError(w, http.StatusNotFound, fmt.Sprintf("item %d: run %s has %d items", *q.item, quoteClip(runID), len(run.Items)))
			return api.RunOutput{}, false
		}
		attempts, status = run.Items[*q.item].Attempts, run.Items[*q.item].Status
	}
	out := api.RunOutput{RunID: runID, Item: q.item, Source: api.OutputStored}
	i := len(attempts) - 1
	if q.attempt > 0 {
		i = q.attempt - 1
		if i >= len(attempts) {
			WriteError(w, http.StatusNotFound, fmt.Sprintf("attempt %d: run %s has %d attempts", q.attempt, quoteClip(runID), len(attempts)))
			return api.RunOutput{}, false
		}
	}
	if i >= 0 {
		out.Attempt, out.Output = attempts[i].Attempt, attempts[i].Output
		out.Running = status == api.RunRunning && i == len(attempts)-1
	}
	return out, true
}

// failed answers an output request's error: forwarded to the owner of
// the run's partition if this member is not it, else its status.
func (o *outputAPI) failed(w http.ResponseWriter, r *http.Request, err error) {
	var notOwner *dispatch.NotOwnerError
	switch {
	case errors.As(err, &notOwner) && o.forwardable(r, notOwner):
		o.forward(w, r, notOwner.OwnerAddr, nil)
	case errors.As(err, &notOwner):
		w.Header().Set("Retry-After", "1")
		WriteError(w, http.StatusServiceUnavailable, err.Error()+": the run's partition is moving; retry")
	case errors.Is(err, dispatch.ErrBadRequest):
		WriteError(w, http.StatusBadRequest, err.Error())
	default:
		WriteError(w, http.StatusServiceUnavailable, publicMessage(err))
	}
}

// errReplied is what a protocol call returns after writing the reply
// itself (a forwarded request).
var errReplied = errors.New("replied")

// forwardable reports whether r may be forwarded to the owner n names:
// there is one, and r was not forwarded here already.
func (o *outputAPI) forwardable(r *http.Request, n *dispatch.NotOwnerError) bool {
	return n.OwnerAddr != "" && r.Header.Get(api.HeaderForwarded) == ""
}

// forward sends r (with body instead of its own, if not nil) to the
// member at addr and copies its reply back, streaming it.
func (o *outputAPI) forward(w http.ResponseWriter, r *http.Request, addr string, body []byte) {
	target, err := url.Parse(addr)
	if err != nil || target.Host == "" {
		WriteError(w, http.StatusServiceUnavailable, fmt.Sprintf("the run's partition is owned by a member at %s, which cannot be reached from here", quoteClip(addr)))
		return
	}
	p := &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.Out.URL.Scheme, pr.Out.URL.Host = target.Scheme, target.Host
			pr.Out.Host = target.Host
			pr.Out.Header.Set(api.HeaderForwarded, "1")
			if body != nil {
				pr.Out.Body = io.NopCloser(bytes.NewReader(body))
				pr.Out.ContentLength = int64(len(body))
			}
		},
		Transport:     o.proxy,
		FlushInterval: -1, // event streams go through as they come
		ErrorHandler: func(w http.ResponseWriter, _ *http.Request, err error) {
			if certificateRefused(err) {
				// Not a passing failure: every forward fails until the
				// members are configured to trust each other.
				o.lg.Warn("forwarding to the partition's owner failed: its certificate is not trusted here (give the members --peer-ca)", zap.String("owner_addr", addr), zap.Error(err))
				WriteError(w, http.StatusBadGateway, fmt.Sprintf("the owner of the run's partition, at %s, could not be reached: this member does not trust its certificate (the members need --peer-ca)", quoteClip(addr)))
				return
			}
			o.lg.Debug("forwarding to the partition's owner failed", zap.String("owner_addr", addr), zap.Error(err))
			WriteError(w, http.StatusBadGateway, fmt.Sprintf("the owner of the run's partition, at %s, did not answer; retry", quoteClip(addr)))
		},
	}
	p.ServeHTTP(w, r)
}

// certificateRefused reports whether err is a TLS certificate that did
// not verify (an unknown authority, a wrong host name, an expired one).
func certificateRefused(err error) bool {
	var ua x509.UnknownAuthorityError
	var hn x509.HostnameError
	var ci x509.CertificateInvalidError
	var tv *tls.CertificateVerificationError
	return errors.As(err, &ua) || errors.As(err, &hn) || errors.As(err, &ci) || errors.As(err, &tv)
}
