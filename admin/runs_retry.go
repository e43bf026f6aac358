package admin

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	"go.uber.org/zap"

	"github.com/jobfleet/jobfleet/api"
	"github.com/jobfleet/jobfleet/auth"
	"github.com/jobfleet/jobfleet/store"
)

// retryRun serves POST /v1/runs/{run_id}/retry {"from": STEP}: it
// records the request (refused at once: 400 naming "from" for a run
// that is not made of steps or has no such step, 409 for a run that has
// not ended or that succeeded, 404 for no such run), then waits up to Config.CancelWait for the run's
// partition's owner, as a cancel does. 200 with the run in its new round
// once started; 409 if the owner found it could not start it; 202 if
// the owner has not applied it yet. The credential rules are a cancel's:
// write access to the run's job.
func (a *jobsAPI) retryRun(w http.ResponseWriter, r *http.Request) {
	runID, ok := runIDParam(w, r)
	if !ok {
		return
	}
	var req api.RetryRequest
	if err := decodeBody(w, r, 4<<10, &req); err != nil {
		WriteError(w, bodyStatus(err), bodyMessage(err))
		return
	}
	if req.From == "" {
		WriteError(w, http.StatusBadRequest, `from: required: the ID of the step to start the run again from`)
		return
	}
	s, ctx, cancel, ok := a.store(w, r)
	if !ok {
		return
	}
	defer cancel()
	before, err := s.GetRun(ctx, runID)
	if err != nil {
		a.retryFailed(w, r, runID, err)
		return
	}
	p, _ := auth.FromContext(r.Context())
	if _, err := s.RequestRetry(ctx, runID, req.From, p.ID); err != nil {
		a.retryFailed(w, r, runID, err)
		return
	}
	wctx, stop := context.WithTimeout(ctx, a.cancelWait)
	defer stop()
	run, consumed, err := s.AwaitRetry(wctx, runID)
	switch {
	case err != nil:
		a.lg.Warn("waiting for a retry request failed; it stays recorded", zap.String("run_id", clip(runID)), zap.Error(err))
		fallthrough
	case !consumed:
		a.reply(w, r, http.StatusAccepted, api.RetryRequested{RunID: runID, Status: api.StatusRetryRequested})
	case run.Round <= before.Round:
		WriteError(w, http.StatusConflict, fmt.Sprintf("run %s was not started again from step %s: its partition's owner found it %s, or the steps from there unable to run", quoteClip(runID), quoteClip(req.From), run.Status))
	default:
		a.reply(w, r, http.StatusOK, run)
	}
}

// retryFailed writes the error reply of a retry request.
func (a *jobsAPI) retryFailed(w http.ResponseWriter, r *http.Request, runID string, err error) {
	switch {
	case errors.Is(err, store.ErrRetryFrom): // before ErrNotRetryable, which it matches
		WriteError(w, http.StatusBadRequest, "from: "+err.Error())
	case errors.Is(err, store.ErrNotRetryable):
		WriteError(w, http.StatusConflict, err.Error())
	case errors.Is(err, store.ErrNotFound):
		WriteError(w, http.StatusNotFound, fmt.Sprintf("run %s not found", quoteClip(runID)))
	default:
		a.fail(w, r, "", err)
	}
}
