package admin

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"

	"github.com/jobfleet/jobfleet/auth"
	"github.com/jobfleet/jobfleet/internal/cursor"
	"github.com/jobfleet/jobfleet/store"
)

// namedKind describes a kind of named object the API keeps beside jobs
// (calendars, limit keys): a document of type T stored under a name
// taken from the path, with create-or-replace, get, delete and a paged
// listing within the caller's prefix. Its handlers are the same for
// every kind; what differs is written here once per kind (calendars.go,
// limit_keys.go). A namedKind is read-only once built and safe for
// concurrent use.
type namedKind[T any] struct {
	// noun names one object in replies: "calendar", "limit".
	noun string
	// param is the path's wildcard that holds the name, and the field
	// a too-long name is reported under: "name", "key".
	param string
	// listing is the kind of the listing's sealed cursors.
	listing string
	// maxName is the most bytes of a name; maxDoc of a request's body.
	maxName int
	maxDoc  int64
	// decode reads and checks a request's document.
	decode func(io.Reader) (T, error)
	// name points at the document's own name field.
	name func(*T) *string
	// full is the store's error for "no room for another one", answered
	// 409.
	full error
	// ops returns the store's operations on the kind, ok false when the
	// member's store keeps no such objects (answered 501).
	ops func(JobStore) (namedOps[T], bool)
	// page wraps one page of a listing in its reply document.
	page func(items []T, next string) any
	// decorate, when set, adds what this member knows of an object to
	// the stored document before it is answered (a limit key's use).
	decorate func(a *jobsAPI, v *T)
	// inEffect, when set, waits (bounded) after a PUT until the stored
	// document is in effect on this member, before it is answered.
	inEffect func(a *jobsAPI, ctx context.Context, stored *T)
}

// namedOps are a store's operations on one kind of named object; each
// has the contract of the store method it is built from (for calendars,
// store.Etcd's PutCalendar, GetCalendar, DeleteCalendar, ListCalendars).
type namedOps[T any] struct {
	put  func(ctx context.Context, v T) (stored T, created bool, err error)
	get  func(ctx context.Context, name string) (T, error)
	del  func(ctx context.Context, name string) error
	list func(ctx context.Context, prefix, cursor string, limit int) ([]T, string, error)
}

// open returns the member's operations on k and a bounded context, or
// writes the error reply and returns ok false.
func (k *namedKind[T]) open(a *jobsAPI, w http.ResponseWriter, r *http.Request) (namedOps[T], context.Context, context.CancelFunc, bool) {
	s, ctx, cancel, ok := a.store(w, r)
	if !ok {
		return namedOps[T]{}, nil, nil, false
	}
	ops, ok := k.ops(s)
	if !ok {
		cancel()
		WriteError(w, http.StatusNotImplemented, fmt.Sprintf("this member's store keeps no %ss", k.noun))
		return namedOps[T]{}, nil, nil, false
	}
	return ops, ctx, cancel, true
}

// nameParam returns the path's name, or writes 400 for one longer than
// any name of the kind.
func (k *namedKind[T]) nameParam(w http.ResponseWriter, r *http.Request) (string, bool) {
	name := r.PathValue(k.param)
	if len(name) > k.maxName {
		WriteError(w, http.StatusBadRequest, fmt.Sprintf("%s: %d bytes long; no %s %s is longer than %d", k.param, len(name), k.noun, k.param, k.maxName))
		return "", false
	}
	return name, true
}

// fail writes the error reply of a request about the object name.
func (k *namedKind[T]) fail(a *jobsAPI, w http.ResponseWriter, r *http.Request, name string, err error) {
	switch {
	case errors.Is(err, store.ErrNotFound):
		WriteError(w, http.StatusNotFound, fmt.Sprintf("%s %s not found", k.noun, quoteClip(name)))
	case k.full != nil && errors.Is(err, k.full):
		WriteError(w, http.StatusConflict, err.Error())
	default:
		a.fail(w, r, "", err)
	}
}

// put serves PUT of one object: 201 with the stored document when
// created, 200 when replaced. A document naming another object than the
// path is a 400; one without a name takes the path's.
func (k *namedKind[T]) put(a *jobsAPI) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		name, ok := k.nameParam(w, r)
		if !ok {
			return
		}
		body, err := readBody(w, r, k.maxDoc)
		if err != nil {
			a.fail(w, r, "", err)
			return
		}
		v, err := k.decode(bytes.NewReader(body))
		if err != nil {
			a.fail(w, r, "", err)
			return
		}
		switch own := k.name(&v); *own {
		case "":
			*own = name
		case name:
		default:
			WriteError(w, http.StatusBadRequest, fmt.Sprintf("%s: %s differs from the path's %s", k.param, quoteClip(*own), quoteClip(name)))
			return
		}
		ops, ctx, cancel, ok := k.open(a, w, r)
		if !ok {
			return
		}
		defer cancel()
		stored, created, err := ops.put(ctx, v)
		if err != nil {
			k.fail(a, w, r, name, err)
			return
		}
		if k.inEffect != nil {
			k.inEffect(a, ctx, &stored)
		}
		code := http.StatusOK
		if created {
			code = http.StatusCreated
		}
		a.reply(w, r, code, stored)
	}
}

// get serves GET of one object.
func (k *namedKind[T]) get(a *jobsAPI) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		name, ok := k.nameParam(w, r)
		if !ok {
			return
		}
		ops, ctx, cancel, ok := k.open(a, w, r)
		if !ok {
			return
		}
		defer cancel()
		v, err := ops.get(ctx, name)
		if err != nil {
			k.fail(a, w, r, name, err)
			return
		}
		if k.decorate != nil {
			k.decorate(a, &v)
		}
		a.reply(w, r, http.StatusOK, v)
	}
}

// delete serves DELETE of one object: 204.
func (k *namedKind[T]) delete(a *jobsAPI) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		name, ok := k.nameParam(w, r)
		if !ok {
			return
		}
		ops, ctx, cancel, ok := k.open(a, w, r)
		if !ok {
			return
		}
		defer cancel()
		if err := ops.del(ctx, name); err != nil {
			k.fail(a, w, r, name, err)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	}
}

// list serves the listing: the objects within the caller's prefix (and
// ?prefix), ?limit per page, ?cursor from the previous page's
// next_cursor, sealed as every listing's (listCursors): a cursor of
// another prefix or listing, or made by hand, is a 400.
func (k *namedKind[T]) list(a *jobsAPI) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		limit, err := limitParam(r)
		if err != nil {
			WriteError(w, http.StatusBadRequest, err.Error())
			return
		}
		q := r.URL.Query()
		if n := len(q.Get("prefix")); n > k.maxName {
			WriteError(w, http.StatusBadRequest, fmt.Sprintf("prefix: %d bytes long; no %s %s is longer than %d", n, k.noun, k.param, k.maxName))
			return
		}
		p, _ := auth.FromContext(r.Context())
		prefix, ok := listPrefix(p.Prefix, q.Get("prefix"))
		if !ok {
			a.reply(w, r, http.StatusOK, k.page([]T{}, ""))
			return
		}
		ops, ctx, cancel, ok := k.open(a, w, r)
		if !ok {
			return
		}
		defer cancel()
		after, seal, ok := a.cursors.open(w, r, cursor.Listing{Kind: k.listing, Params: []string{prefix}})
		if !ok {
			return
		}
		out, next, err := ops.list(ctx, prefix, after, limit)
		if err != nil {
			a.fail(w, r, "", err)
			return
		}
		if k.decorate != nil {
			for i := range out {
				k.decorate(a, &out[i])
			}
		}
		a.reply(w, r, http.StatusOK, k.page(out, seal(next)))
	}
}
