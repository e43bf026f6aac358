package admin

import (
	"context"
	"errors"
	"net/http"
	"slices"
	"strings"

	"github.com/jobfleet/jobfleet/api"
	"github.com/jobfleet/jobfleet/auth"
	"github.com/jobfleet/jobfleet/dispatch/placement"
)

// WorkerRegistry is the worker registry as the API serves it;
// *workers.Registry implements it.
type WorkerRegistry interface {
	// Register creates or refreshes a worker's registration
	// (workers.Registry.Register).
	Register(ctx context.Context, req api.RegisterRequest) (api.RegisterResponse, error)
	// Deregister removes it (workers.Registry.Deregister).
	Deregister(ctx context.Context, req api.DeregisterRequest) error
	// Workers lists the live registrations, by ID.
	Workers() ([]api.Worker, error)
	// WhyPending says why no live worker can take a waiting run of job
	// jobID with executor type executor and placement selector selector,
	// "" if some can, as told to a reader scoped to readerPrefix
	// (workers.Registry.WhyPending).
	WhyPending(jobID, executor, selector, readerPrefix string) string
}

// registry returns the worker registry, or an error saying there is none.
func (a *workerAPI) registry() (WorkerRegistry, error) {
	if a.reg == nil {
		return nil, errNoRegistry
	}
	return a.reg, nil
}

// errNoRegistry: the API was configured without a worker registry.
var errNoRegistry = errors.New("this member keeps no worker registry")

// register serves POST /v1/worker/register: the registration is bound
// to the request's credential and scope, and checked against its worker
// label selector, never against what the body says.
func (a *workerAPI) register(w http.ResponseWriter, r *http.Request) {
	var req api.RegisterRequest
	serveProtocol(w, r, a.registry, &req, func(reg WorkerRegistry, who auth.Principal) (any, error) {
		req.Credential, req.Prefix, req.WorkerLabels = who.ID, who.Prefix, who.WorkerLabels
		return reg.Register(r.Context(), req)
	})
}

func (a *workerAPI) deregister(w http.ResponseWriter, r *http.Request) {
	var req api.DeregisterRequest
	serveProtocol(w, r, a.registry, &req, func(reg WorkerRegistry, who auth.Principal) (any, error) {
		req.Credential = who.ID
		return struct{}{}, reg.Deregister(r.Context(), req)
	})
}

// workers serves GET /v1/cluster/workers[?selector=S]: the live
// workers, those whose labels S matches if given.
func (a *workerAPI) workers(w http.ResponseWriter, r *http.Request) {
	sel, err := placement.Parse(r.URL.Query().Get("selector"))
	if err != nil {
		WriteError(w, http.StatusBadRequest, "selector: "+strings.TrimPrefix(err.Error(), placement.ErrInvalid.Error()+": "))
		return
	}
	reg, err := a.registry()
	if err != nil {
		WriteError(w, http.StatusServiceUnavailable, publicMessage(err))
		return
	}
	ws, err := reg.Workers()
	if err != nil {
		WriteError(w, http.StatusServiceUnavailable, publicMessage(err))
		return
	}
	// A credential scoped to a prefix sees the workers that may serve its
	// jobs (unscoped ones, and those whose scope overlaps its own), not
	// other teams' workers and credentials.
	if p, _ := auth.FromContext(r.Context()); p.Prefix != "" {
		ws = slices.DeleteFunc(slices.Clone(ws), func(w api.Worker) bool {
			return !strings.HasPrefix(p.Prefix, w.Prefix) && !strings.HasPrefix(w.Prefix, p.Prefix)
		})
	}
	if !sel.Empty() {
		ws = slices.DeleteFunc(slices.Clone(ws), func(w api.Worker) bool { return !sel.Allows(w.Labels) })
	}
	if ws == nil {
		ws = []api.Worker{}
	}
	WriteJSON(w, http.StatusOK, api.WorkerList{Workers: ws})
}

// whyPending returns a function that fills in the reason of waiting runs
// that no live worker can take, for a job whose executor type and
// placement selector the function reads at most once, as told to a
// reader scoped to readerPrefix; nil without a registry.
func (a *workerAPI) whyPending(readerPrefix string) func(runs []api.Run, job func() (executor, selector string, ok bool)) {
	reg, err := a.registry()
	if err != nil {
		return nil
	}
	return func(runs []api.Run, job func() (executor, selector string, ok bool)) {
		for i := range runs {
			r := &runs[i]
			if r.Status.Final() || r.Status == api.RunRunning || r.Reason != "" {
				continue
			}
			ex, sel, ok := job()
			if !ok {
				return
			}
			r.Reason = reg.WhyPending(r.JobID, ex, sel, readerPrefix)
		}
	}
}
