package admin

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"

	"github.com/jobfleet/jobfleet/api"
	"github.com/jobfleet/jobfleet/auth"
	"github.com/jobfleet/jobfleet/internal/cursor"
	"github.com/jobfleet/jobfleet/store"
)

// LimitStore is what the limit endpoints need of the job store
// (*store.Etcd has it); a store without it answers them 501.
type LimitStore interface {
	PutLimit(ctx context.Context, l api.Limit) (stored api.Limit, created bool, err error)
	GetLimit(ctx context.Context, key string) (api.Limit, error)
	DeleteLimit(ctx context.Context, key string) error
	ListLimits(ctx context.Context, prefix, cursor string, limit int) ([]api.Limit, string, error)
}

var _ LimitStore = (*store.Etcd)(nil)

// limitStore returns the member's limit store and a bounded context, or
// writes the error reply and returns ok false.
func (a *jobsAPI) limitStore(w http.ResponseWriter, r *http.Request) (LimitStore, context.Context, context.CancelFunc, bool) {
	s, ctx, cancel, ok := a.store(w, r)
	if !ok {
		return nil, nil, nil, false
	}
	ls, ok := s.(LimitStore)
	if !ok {
		cancel()
		WriteError(w, http.StatusNotImplemented, "this member's store keeps no limits")
		return nil, nil, nil, false
	}
	return ls, ctx, cancel, true
}

// limitKey returns the path's {key}, or writes 400 for one longer than
// any limit key.
func limitKey(w http.ResponseWriter, r *http.Request) (string, bool) {
	key := r.PathValue("key")
	if len(key) > api.MaxLimitKeyBytes {
		WriteError(w, http.StatusBadRequest, fmt.Sprintf("key: %d bytes long; no limit key is longer than %d", len(key), api.MaxLimitKeyBytes))
		return "", false
	}
	return key, true
}

// failLimit writes the error reply of a limit request.
func (a *jobsAPI) failLimit(w http.ResponseWriter, r *http.Request, key string, err error) {
	switch {
	case errors.Is(err, store.ErrNotFound):
		WriteError(w, http.StatusNotFound, fmt.Sprintf("limit %s not found", quoteClip(key)))
	case errors.Is(err, store.ErrLimitCount):
		WriteError(w, http.StatusConflict, err.Error())
	default:
		a.fail(w, r, "", err)
	}
}

// putLimit serves PUT /v1/limits/{key}: 201 with the stored limit when
// created, 200 when replaced.
func (a *jobsAPI) putLimit(w http.ResponseWriter, r *http.Request) {
	key, ok := limitKey(w, r)
	if !ok {
		return
	}
	body, err := readBody(w, r, api.MaxLimitBytes)
	if err != nil {
		a.fail(w, r, "", err)
		return
	}
	l, err := api.DecodeLimit(bytes.NewReader(body))
	if err != nil {
		a.fail(w, r, "", err)
		return
	}
	switch l.Key {
	case "":
		l.Key = key
	case key:
	default:
		WriteError(w, http.StatusBadRequest, fmt.Sprintf("key: %s differs from the path's %s", quoteClip(l.Key), quoteClip(key)))
		return
	}
	ls, ctx, cancel, ok := a.limitStore(w, r)
	if !ok {
		return
	}
	defer cancel()
	stored, created, err := ls.PutLimit(ctx, l)
	if err != nil {
		a.failLimit(w, r, key, err)
		return
	}
	code := http.StatusOK
	if created {
		code = http.StatusCreated
	}
	a.reply(w, r, code, stored)
}

// getLimit serves GET /v1/limits/{key}, with the key's status as this
// member sees it.
func (a *jobsAPI) getLimit(w http.ResponseWriter, r *http.Request) {
	key, ok := limitKey(w, r)
	if !ok {
		return
	}
	ls, ctx, cancel, ok := a.limitStore(w, r)
	if !ok {
		return
	}
	defer cancel()
	l, err := ls.GetLimit(ctx, key)
	if err != nil {
		a.failLimit(w, r, key, err)
		return
	}
	if a.limitStatus != nil {
		if st, ok := a.limitStatus(key); ok {
			l.Status = &st
		}
	}
	a.reply(w, r, http.StatusOK, l)
}

// deleteLimit serves DELETE /v1/limits/{key}: 204. Runs waiting for the
// key start as their workers poll; attempts holding it keep running.
func (a *jobsAPI) deleteLimit(w http.ResponseWriter, r *http.Request) {
	key, ok := limitKey(w, r)
	if !ok {
		return
	}
	ls, ctx, cancel, ok := a.limitStore(w, r)
	if !ok {
		return
	}
	defer cancel()
	if err := ls.DeleteLimit(ctx, key); err != nil {
		a.failLimit(w, r, key, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// listLimits serves GET /v1/limits: the limits within the caller's prefix
// (and ?prefix), ?limit per page, ?cursor from the previous page's
// next_cursor, sealed as every listing's (listCursors): a cursor of
// another prefix or listing, or made by hand, is a 400.
func (a *jobsAPI) listLimits(w http.ResponseWriter, r *http.Request) {
	limit, err := limitParam(r)
	if err != nil {
		WriteError(w, http.StatusBadRequest, err.Error())
		return
	}
	q := r.URL.Query()
	if len(q.Get("prefix")) > api.MaxLimitKeyBytes {
		WriteError(w, http.StatusBadRequest, fmt.Sprintf("prefix: %d bytes long; no limit key is longer than %d", len(q.Get("prefix")), api.MaxLimitKeyBytes))
		return
	}
	p, _ := auth.FromContext(r.Context())
	prefix, ok := listPrefix(p.Prefix, q.Get("prefix"))
	if !ok {
		a.reply(w, r, http.StatusOK, api.LimitList{Limits: []api.Limit{}})
		return
	}
	ls, ctx, cancel, ok := a.limitStore(w, r)
	if !ok {
		return
	}
	defer cancel()
	after, seal, ok := a.cursors.open(w, r, cursor.Listing{Kind: "limits", Params: []string{prefix}})
	if !ok {
		return
	}
	out, next, err := ls.ListLimits(ctx, prefix, after, limit)
	if err != nil {
		a.fail(w, r, "", err)
		return
	}
	if a.limitStatus != nil {
		for i := range out {
			if st, ok := a.limitStatus(out[i].Key); ok {
				out[i].Status = &st
			}
		}
	}
	a.reply(w, r, http.StatusOK, api.LimitList{Limits: out, NextCursor: seal(next)})
}

// explainLimits gives the waiting runs among runs that wait for a limit
// key on this member (their partition is owned here) that key as their
// reason, unless they have one already.
func (a *jobsAPI) explainLimits(runs []api.Run) {
	if a.runWaitingFor == nil {
		return
	}
	for i := range runs {
		r := &runs[i]
		if r.Status.Final() || r.Status == api.RunRunning && len(r.Items) == 0 || r.Reason != "" {
			continue
		}
		if k := a.runWaitingFor(r.ID); k != "" {
			r.Reason = fmt.Sprintf("waiting for limit key %s: no room (GET /v1/limits/%s)", quoteClip(k), k)
		}
	}
}
