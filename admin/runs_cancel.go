package admin

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"go.uber.org/zap"

	"github.com/jobfleet/jobfleet/api"
	"github.com/jobfleet/jobfleet/auth"
	"github.com/jobfleet/jobfleet/store"
)

// DefaultCancelWait is Config.CancelWait's default: an owner applies a
// cancel request at its next tick, within milliseconds; a partition
// between owners takes a lease TTL or more.
const DefaultCancelWait = 5 * time.Second

// runIDParam returns the request's {run_id}, or writes 400 and returns
// false if it is not a run ID.
func runIDParam(w http.ResponseWriter, r *http.Request) (string, bool) {
	runID := r.PathValue("run_id")
	if len(runID) > api.MaxRunIDBytes {
		WriteError(w, http.StatusBadRequest, fmt.Sprintf("run_id: %d bytes long; no run ID is longer than %d", len(runID), api.MaxRunIDBytes))
		return "", false
	}
	if _, _, err := store.ParseRunID(runID); err != nil {
		WriteError(w, http.StatusBadRequest, fmt.Sprintf("run_id: %s is not a run ID: want <escaped job ID>@<scheduled time>, as the job's runs list them (%s)", quoteClip(runID), runIDFlaw(runID)))
		return "", false
	}
	return runID, true
}

// cancelRun serves POST /v1/runs/{run_id}/cancel: it records the request
// (any member may: the run's partition's owner applies it, as it fires
// triggers), then waits up to Config.CancelWait for the owner. 200 with the run
// once cancelled; 409 naming the status if the run is final (already, or
// by the time the owner looked); 202 if the owner has not applied it yet.
func (a *jobsAPI) cancelRun(w http.ResponseWriter, r *http.Request) {
	runID, ok := runIDParam(w, r)
	if !ok {
		return
	}
	s, ctx, cancel, ok := a.store(w, r)
	if !ok {
		return
	}
	defer cancel()
	p, _ := auth.FromContext(r.Context())
	if _, err := s.RequestCancel(ctx, runID, p.ID); err != nil {
		a.cancelFailed(w, r, runID, err)
		return
	}
	wctx, stop := context.WithTimeout(ctx, a.cancelWait)
	defer stop()
	run, consumed, err := s.AwaitCancel(wctx, runID)
	switch {
	case err != nil:
		a.lg.Warn("waiting for a cancel request failed; it stays recorded", zap.String("run_id", clip(runID)), zap.Error(err))
		fallthrough
	case !consumed:
		a.reply(w, r, http.StatusAccepted, api.CancelRequested{RunID: runID, Status: api.StatusCancelRequested})
	case run.Status != api.RunCancelled:
		a.cancelFailed(w, r, runID, &store.FinalError{RunID: run.ID, Status: run.Status})
	default:
		a.reply(w, r, http.StatusOK, run)
	}
}

// cancelFailed writes the error reply of a cancel request: 409 naming the
// status of a final run, 404 for no such run, else as fail.
func (a *jobsAPI) cancelFailed(w http.ResponseWriter, r *http.Request, runID string, err error) {
	switch {
	case errors.Is(err, store.ErrFinal):
		WriteError(w, http.StatusConflict, err.Error())
	case errors.Is(err, store.ErrNotFound):
		WriteError(w, http.StatusNotFound, fmt.Sprintf("run %s not found", quoteClip(runID)))
	default:
		a.fail(w, r, "", err)
	}
}
