package admin

import (
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/jobfleet/jobfleet/api"
	"github.com/jobfleet/jobfleet/auth"
	"github.com/jobfleet/jobfleet/internal/cursor"
	"github.com/jobfleet/jobfleet/store"
)

// failingQuery returns the store query of GET /v1/runs's parameters at
// now: status (a comma-separated list of dead and failed, default both),
// since (a Go duration from 1ms to api.FailingWindow, default the
// window; returned too), prefix and limit (see limitParam); not the
// cursor (listCursors opens it). The prefix is the one asked, not yet
// combined with the credential's. Errors name the parameter.
func failingQuery(r *http.Request, now time.Time) (store.FailingQuery, time.Duration, error) {
	q := r.URL.Query()
	limit, err := limitParam(r)
	if err != nil {
		return store.FailingQuery{}, 0, err
	}
	statuses := []api.RunStatus{api.RunDead, api.RunFailed}
	if q.Has("status") {
		statuses = nil
		for s := range strings.SplitSeq(q.Get("status"), ",") {
			st := api.RunStatus(strings.TrimSpace(s))
			if !st.Failing() {
				return store.FailingQuery{}, 0, fmt.Errorf("status: %s is not %q or %q (a comma-separated list of them)", quoteClip(string(st)), api.RunDead, api.RunFailed)
			}
			if !slices.Contains(statuses, st) {
				statuses = append(statuses, st)
			}
		}
	}
	since := api.FailingWindow
	if q.Has("since") {
		d, err := time.ParseDuration(q.Get("since"))
		if err != nil || d < time.Millisecond || d > api.FailingWindow {
			return store.FailingQuery{}, 0, fmt.Errorf("since: %s is not a duration from 1ms to %s (e.g. 1h30m)", quoteClip(q.Get("since")), api.FailingWindow)
		}
		since = d
	}
	prefix := q.Get("prefix")
	if len(prefix) > api.MaxIDBytes {
		return store.FailingQuery{}, 0, fmt.Errorf("prefix: %d bytes long; no job ID is longer than %d", len(prefix), api.MaxIDBytes)
	}
	return store.FailingQuery{Prefix: prefix, Statuses: statuses, Since: now.Add(-since), Limit: limit}, since, nil
}

// failingListing is the listing of GET /v1/runs for query q (its prefix
// combined with the credential's) within since: its cursors are valid
// only for the same prefix, statuses and since.
func failingListing(q store.FailingQuery, since time.Duration) cursor.Listing {
	st := make([]string, len(q.Statuses))
	for i, s := range q.Statuses {
		st[i] = string(s)
	}
	slices.Sort(st)
	return cursor.Listing{Kind: "runs", Params: []string{q.Prefix, strings.Join(st, ","), since.String()}}
}

// failing serves GET /v1/runs: the runs failed or dead across the fleet,
// from the failing-runs index, within the credential's job prefix.
func (a *jobsAPI) failing(w http.ResponseWriter, r *http.Request) {
	fq, since, err := failingQuery(r, a.now())
	if err != nil {
		WriteError(w, http.StatusBadRequest, err.Error())
		return
	}
	s, ctx, cancel, ok := a.store(w, r)
	if !ok {
		return
	}
	defer cancel()
	p, _ := auth.FromContext(r.Context())
	if fq.Prefix, ok = listPrefix(p.Prefix, fq.Prefix); !ok {
		a.reply(w, r, http.StatusOK, api.FailingRunList{Runs: []api.FailingRun{}})
		return
	}
	var seal func(string) string
	if fq.Cursor, seal, ok = a.cursors.open(w, r, failingListing(fq, since)); !ok {
		return
	}
	runs, next, err := s.ListFailing(ctx, fq)
	if err != nil {
		a.fail(w, r, "", err)
		return
	}
	a.reply(w, r, http.StatusOK, api.FailingRunList{Runs: runs, NextCursor: seal(next)})
}
