package admin

import (
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/jobfleet/jobfleet/api"
	"github.com/jobfleet/jobfleet/auth"
	"github.com/jobfleet/jobfleet/store"
)

// maxBackfillBody caps a POST /v1/jobs/{id}/backfill body.
const maxBackfillBody = 4 << 10

// backfillWriteRuns is the fewest runs an owner's write of a backfill
// creates while the backfill has room (dispatch.Config.FireBatch's
// default is 25; ten a job may have active by default), for the charge
// of its record's rewrites.
const backfillWriteRuns = 10

// backfill serves POST /v1/jobs/{id}/backfill: it lists the job's
// scheduled times in [from, to) (at most max), finds which have a run
// already, and, unless it is a dry run, records the backfill for the
// job's partition's owner, which creates the other runs, paced. 200 for a
// dry run or when nothing is to be created, 202 once recorded; 409 while
// another backfill of the job runs.
func (a *jobsAPI) backfill(w http.ResponseWriter, r *http.Request) {
	id, ok := pathID(w, r)
	if !ok {
		return
	}
	var req api.BackfillRequest
	if err := decodeBody(w, r, maxBackfillBody, &req); err != nil {
		a.fail(w, r, id, err)
		return
	}
	now := a.now().UTC()
	from, to, max, err := backfillRange(req, now)
	if err != nil {
		a.fail(w, r, id, err)
		return
	}
	s, ctx, cancel, ok := a.store(w, r)
	if !ok {
		return
	}
	defer cancel()
	j, err := s.Get(ctx, id)
	if err != nil {
		a.fail(w, r, id, err)
		return
	}
	if j.Schedule == "" {
		a.fail(w, r, id, &api.FieldError{Field: "id", Msg: fmt.Sprintf("job %s has no schedule (a one-off job has nothing to backfill); trigger it to run it now", quoteClip(id))})
		return
	}
	sched, err := j.ParseSchedule()
	if err != nil {
		a.fail(w, r, id, err)
		return
	}
	times, next := sched.Between(from, to, max)
	var skipped []time.Time
	if !next.IsZero() {
		skipped, _ = sched.Between(next, to, max)
	}
	var prev int64
	if !req.DryRun {
		old, rev, err := s.GetBackfill(ctx, id)
		switch {
		case errors.Is(err, store.ErrNotFound):
		case err != nil:
			a.fail(w, r, id, err)
			return
		case old.Pending():
			d := old.Doc(id, "")
			WriteError(w, http.StatusConflict, fmt.Sprintf("a backfill of job %s is running (%d of %d times to create, requested %s by %s): wait for it (GET this path) or stop it (DELETE)",
				quoteClip(id), len(d.Pending), len(old.Times), old.RequestedAt.Format(time.RFC3339), old.RequestedBy))
			return
		default:
			prev = rev
		}
	}
	exist := map[int64]bool{}
	if len(times) > 0 {
		if exist, err = s.RunTimes(ctx, id, times[0], times[len(times)-1].Add(time.Millisecond)); err != nil {
			a.fail(w, r, id, err)
			return
		}
	}
	p, _ := auth.FromContext(r.Context())
	b := store.Backfill{From: from, To: to, Max: max, Times: times, Skipped: skipped, NextFrom: next, RequestedBy: p.ID, RequestedAt: now}
	outcome := make([]byte, len(times))
	for i, t := range times {
		outcome[i] = store.BackfillPending
		if exist[t.UnixMilli()] {
			outcome[i] = store.BackfillExisting
		}
	}
	b.Outcome = string(outcome)
	if !b.Pending() {
		b.DoneAt = now
	}
	if req.DryRun {
		a.reply(w, r, http.StatusOK, b.Doc(id, api.BackfillDryRun))
		return
	}
	if _, err := s.PutBackfill(ctx, id, b, prev); err != nil {
		if errors.Is(err, store.ErrBackfillRunning) {
			WriteError(w, http.StatusConflict, err.Error())
			return
		}
		a.fail(w, r, id, err)
		return
	}
	// What the owner writes for it: each pending time's run and queue
	// entry, and the record rewritten with each write of runs.
	pending := len(b.Times) - strings.Count(b.Outcome, string(rune(store.BackfillExisting)))
	rewrites := pending/backfillWriteRuns + 1
	chargeMore(r.Context(), pending*(runWrite+keyOverhead)+rewrites*(keyOverhead+len(b.Times)*55), pending*2+rewrites)
	code := http.StatusAccepted
	if !b.Pending() {
		code = http.StatusOK
	}
	a.reply(w, r, code, b.Doc(id, ""))
}

// backfillRange checks a backfill request at now and returns its range
// and its max.
func backfillRange(req api.BackfillRequest, now time.Time) (from, to time.Time, max int, err error) {
	to = now
	if req.To != nil {
		to = req.To.UTC()
	}
	switch {
	case req.From.IsZero():
		return from, to, 0, &api.FieldError{Field: "from", Msg: "missing: the first scheduled time to backfill (RFC 3339)"}
	case to.After(now):
		return from, to, 0, &api.FieldError{Field: "to", Msg: fmt.Sprintf("%s is after now (%s): a backfill covers times the fleet has passed; the schedule fires the others", to.Format(time.RFC3339Nano), now.Format(time.RFC3339Nano))}
	case !req.From.Before(to):
		return from, to, 0, &api.FieldError{Field: "from", Msg: fmt.Sprintf("%s is not before to (%s)", req.From.UTC().Format(time.RFC3339Nano), to.Format(time.RFC3339Nano))}
	}
	max = api.MaxBackfill
	if req.Max != nil {
		if max = *req.Max; max < 1 || max > api.MaxBackfill {
			return from, to, 0, &api.FieldError{Field: "max", Msg: fmt.Sprintf("%d: want 1 to %d (left out: %d)", max, api.MaxBackfill, api.MaxBackfill)}
		}
	}
	return req.From.UTC(), to, max, nil
}

// getBackfill serves GET /v1/jobs/{id}/backfill: the job's latest
// backfill with its progress.
func (a *jobsAPI) getBackfill(w http.ResponseWriter, r *http.Request) {
	a.backfillDoc(w, r, false)
}

// deleteBackfill serves DELETE /v1/jobs/{id}/backfill: the backfill
// stops (runs it created stay) and is forgotten. 200 with it as it was.
func (a *jobsAPI) deleteBackfill(w http.ResponseWriter, r *http.Request) {
	a.backfillDoc(w, r, true)
}

func (a *jobsAPI) backfillDoc(w http.ResponseWriter, r *http.Request, del bool) {
	id, ok := pathID(w, r)
	if !ok {
		return
	}
	s, ctx, cancel, ok := a.store(w, r)
	if !ok {
		return
	}
	defer cancel()
	b, _, err := s.GetBackfill(ctx, id)
	if err == nil && del {
		err = s.DeleteBackfill(ctx, id)
	}
	if errors.Is(err, store.ErrNotFound) {
		if _, jerr := s.Get(ctx, id); jerr != nil {
			a.fail(w, r, id, jerr)
			return
		}
		WriteError(w, http.StatusNotFound, fmt.Sprintf("job %s has no backfill", quoteClip(id)))
		return
	}
	if err != nil {
		a.fail(w, r, id, err)
		return
	}
	d := b.Doc(id, "")
	if del && d.Status == api.BackfillRunning {
		d.Status = api.BackfillStopped
	}
	a.reply(w, r, http.StatusOK, d)
}
