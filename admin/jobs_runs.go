package admin

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"

	"github.com/jobfleet/jobfleet/api"
	"github.com/jobfleet/jobfleet/auth"
	"github.com/jobfleet/jobfleet/store"
)

func (a *jobsAPI) runs(w http.ResponseWriter, r *http.Request) {
	limit, err := limitParam(r)
	if err != nil {
		WriteError(w, http.StatusBadRequest, err.Error())
		return
	}
	s, ctx, cancel, id, ok := a.jobStore(w, r)
	if !ok {
		return
	}
	defer cancel()
	runs, err := s.Runs(ctx, id, limit)
	if err != nil {
		a.fail(w, r, id, err)
		return
	}
	if len(runs) == 0 {
		// No runs: an existing job has none yet, but an ID that names no
		// job is a 404. (A deleted job's runs stay readable until its
		// former owner removes them.)
		if _, err := s.Get(ctx, id); err != nil {
			a.fail(w, r, id, err)
			return
		}
		runs = []api.Run{}
	}
	a.explainPending(ctx, s, id, runs)
	a.explainLimits(runs)
	a.reply(w, r, http.StatusOK, api.RunList{Runs: runs})
}

func (a *jobsAPI) getRun(w http.ResponseWriter, r *http.Request) {
	s, ctx, cancel, ok := a.store(w, r)
	if !ok {
		return
	}
	defer cancel()
	runID, ok := runIDParam(w, r)
	if !ok {
		return
	}
	run, err := s.GetRun(ctx, runID)
	if err != nil {
		if errors.Is(err, store.ErrNotFound) {
			WriteError(w, http.StatusNotFound, fmt.Sprintf("run %s not found", quoteClip(runID)))
			return
		}
		a.fail(w, r, "", err)
		return
	}
	a.addDeliveries(ctx, s, &run)
	runs := []api.Run{run}
	a.explainPending(ctx, s, run.JobID, runs)
	a.explainLimits(runs)
	a.reply(w, r, http.StatusOK, runs[0])
}

// runIDFlaw says what is wrong with runID, which store.ParseRunID refuses.
func runIDFlaw(runID string) string {
	i := strings.LastIndexByte(runID, '@')
	switch {
	case i < 0:
		return "no '@'"
	case i == 0:
		return "no job ID before the '@'"
	}
	return fmt.Sprintf("%s after the '@' is not a time like 2026-01-02T15:04:05.000Z", quoteClip(runID[i+1:]))
}

// explainPending fills in the reason of job id's waiting runs that no
// live worker can take. It reads the job (for its executor type and
// placement selector) only if some run waits; a job that cannot be read
// leaves the runs as they are.
func (a *jobsAPI) explainPending(ctx context.Context, s JobStore, id string, runs []api.Run) {
	if a.whyPending == nil {
		return
	}
	who, _ := auth.FromContext(ctx)
	explain := a.whyPending(who.Prefix)
	if explain == nil {
		return
	}
	read, ex, sel, ok := false, "", "", false
	explain(runs, func() (string, string, bool) {
		if !read {
			read = true
			if j, err := s.Get(ctx, id); err == nil {
				ex, sel, ok = j.Executor.Type, j.Selector(), true
			}
		}
		return ex, sel, ok
	})
}

// limitParam returns ?limit: defaultListLimit if absent, else an integer
// in 1..maxListLimit.
func limitParam(r *http.Request) (int, error) {
	q := r.URL.Query()
	if !q.Has("limit") {
		return defaultListLimit, nil
	}
	n, err := strconv.Atoi(q.Get("limit"))
	if err != nil || n < 1 || n > maxListLimit {
		return 0, fmt.Errorf("limit: %q is not an integer from 1 to %d", q.Get("limit"), maxListLimit)
	}
	return n, nil
}
