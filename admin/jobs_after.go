package admin

import (
	"context"
	"fmt"
	"net/http"

	"github.com/jobfleet/jobfleet/api"
	"github.com/jobfleet/jobfleet/auth"
)

// This file has the API's side of job-to-job dependencies ("after"):
// a job may name only upstream jobs its credential may read, and GET
// /v1/jobs/{id}/dependents lists the jobs that run after a job.

// dependentsStore is what GET /v1/jobs/{id}/dependents needs of the job
// store (*store.Etcd has it).
type dependentsStore interface {
	Dependents(ctx context.Context, id string) ([]api.Dependency, error)
}

// authorizeAfter refuses job j, written by the request's caller, if its
// after names a job the caller's credential may not read: a job may
// hand its runs' ends to another team's job only if that team's
// credential names it.
func authorizeAfter(r *http.Request, j api.Job) error {
	p, _ := auth.FromContext(r.Context())
	for i, d := range j.After {
		if err := auth.Authorize(p, api.AccessRead, d.Job, true); err != nil {
			return fmt.Errorf("after[%d].job %s: %w", i, quoteClip(d.Job), err)
		}
	}
	return nil
}

// dependents serves GET /v1/jobs/{id}/dependents: the jobs whose after
// names the job, as the dependency index says, those the caller may
// read (a credential limited to a prefix sees the dependents under it).
func (a *jobsAPI) dependents(w http.ResponseWriter, r *http.Request) {
	s, ctx, cancel, id, ok := a.jobStore(w, r)
	if !ok {
		return
	}
	defer cancel()
	ds, ok := s.(dependentsStore)
	if !ok {
		WriteError(w, http.StatusNotImplemented, "this member's job store keeps no dependency index")
		return
	}
	deps, err := ds.Dependents(ctx, id)
	if err != nil {
		a.fail(w, r, id, err)
		return
	}
	p, _ := auth.FromContext(r.Context())
	out := api.Dependents{Job: id, Dependents: []api.Dependency{}}
	for _, d := range deps {
		if p.InScope(d.Job) {
			out.Dependents = append(out.Dependents, d)
		}
	}
	a.reply(w, r, http.StatusOK, out)
}
