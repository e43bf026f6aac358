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

// CalendarStore is what the calendar endpoints need of the job store
// (*store.Etcd has it); a store without it answers them 501.
type CalendarStore interface {
	PutCalendar(ctx context.Context, c api.Calendar) (stored api.Calendar, created bool, err error)
	GetCalendar(ctx context.Context, name string) (api.Calendar, error)
	DeleteCalendar(ctx context.Context, name string) error
	ListCalendars(ctx context.Context, prefix, cursor string, limit int) ([]api.Calendar, string, error)
	Calendars(ctx context.Context, names []string) (api.Calendars, error)
}

var _ CalendarStore = (*store.Etcd)(nil)

// calendarStore returns the member's calendar store and a bounded
// context, or writes the error reply and returns ok false.
func (a *jobsAPI) calendarStore(w http.ResponseWriter, r *http.Request) (CalendarStore, context.Context, context.CancelFunc, bool) {
	s, ctx, cancel, ok := a.store(w, r)
	if !ok {
		return nil, nil, nil, false
	}
	cs, ok := s.(CalendarStore)
	if !ok {
		cancel()
		WriteError(w, http.StatusNotImplemented, "this member's store keeps no calendars")
		return nil, nil, nil, false
	}
	return cs, ctx, cancel, true
}

// calendarName returns the path's {name}, or writes 400 for one longer
// than any calendar name.
func calendarName(w http.ResponseWriter, r *http.Request) (string, bool) {
	name := r.PathValue("name")
	if len(name) > api.MaxCalendarNameBytes {
		WriteError(w, http.StatusBadRequest, fmt.Sprintf("name: %d bytes long; no calendar name is longer than %d", len(name), api.MaxCalendarNameBytes))
		return "", false
	}
	return name, true
}

// failCalendar writes the error reply of a calendar request.
func (a *jobsAPI) failCalendar(w http.ResponseWriter, r *http.Request, name string, err error) {
	switch {
	case errors.Is(err, store.ErrNotFound):
		WriteError(w, http.StatusNotFound, fmt.Sprintf("calendar %s not found", quoteClip(name)))
	case errors.Is(err, store.ErrCalendarLimit):
		WriteError(w, http.StatusConflict, err.Error())
	default:
		a.fail(w, r, "", err)
	}
}

// putCalendar serves PUT /v1/calendars/{name}: 201 with the stored
// calendar when created, 200 when replaced.
func (a *jobsAPI) putCalendar(w http.ResponseWriter, r *http.Request) {
	name, ok := calendarName(w, r)
	if !ok {
		return
	}
	body, err := readBody(w, r, api.MaxCalendarBytes)
	if err != nil {
		a.fail(w, r, "", err)
		return
	}
	c, err := api.DecodeCalendar(bytes.NewReader(body))
	if err != nil {
		a.fail(w, r, "", err)
		return
	}
	switch c.Name {
	case "":
		c.Name = name
	case name:
	default:
		WriteError(w, http.StatusBadRequest, fmt.Sprintf("name: %s differs from the path's %s", quoteClip(c.Name), quoteClip(name)))
		return
	}
	cs, ctx, cancel, ok := a.calendarStore(w, r)
	if !ok {
		return
	}
	defer cancel()
	stored, created, err := cs.PutCalendar(ctx, c)
	if err != nil {
		a.failCalendar(w, r, name, err)
		return
	}
	code := http.StatusOK
	if created {
		code = http.StatusCreated
	}
	a.reply(w, r, code, stored)
}

// getCalendar serves GET /v1/calendars/{name}.
func (a *jobsAPI) getCalendar(w http.ResponseWriter, r *http.Request) {
	name, ok := calendarName(w, r)
	if !ok {
		return
	}
	cs, ctx, cancel, ok := a.calendarStore(w, r)
	if !ok {
		return
	}
	defer cancel()
	c, err := cs.GetCalendar(ctx, name)
	if err != nil {
		a.failCalendar(w, r, name, err)
		return
	}
	a.reply(w, r, http.StatusOK, c)
}

// deleteCalendar serves DELETE /v1/calendars/{name}: 204. Jobs that
// exclude it exclude nothing from then on.
func (a *jobsAPI) deleteCalendar(w http.ResponseWriter, r *http.Request) {
	name, ok := calendarName(w, r)
	if !ok {
		return
	}
	cs, ctx, cancel, ok := a.calendarStore(w, r)
	if !ok {
		return
	}
	defer cancel()
	if err := cs.DeleteCalendar(ctx, name); err != nil {
		a.failCalendar(w, r, name, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// listCalendars serves GET /v1/calendars: the calendars within the
// caller's prefix (and ?prefix), ?limit per page, ?cursor from the
// previous page's next_cursor, sealed as every listing's (listCursors):
// a cursor of another prefix or listing, or made by hand, is a 400.
func (a *jobsAPI) listCalendars(w http.ResponseWriter, r *http.Request) {
	limit, err := limitParam(r)
	if err != nil {
		WriteError(w, http.StatusBadRequest, err.Error())
		return
	}
	q := r.URL.Query()
	if len(q.Get("prefix")) > api.MaxCalendarNameBytes {
		WriteError(w, http.StatusBadRequest, fmt.Sprintf("prefix: %d bytes long; no calendar name is longer than %d", len(q.Get("prefix")), api.MaxCalendarNameBytes))
		return
	}
	p, _ := auth.FromContext(r.Context())
	prefix, ok := listPrefix(p.Prefix, q.Get("prefix"))
	if !ok {
		a.reply(w, r, http.StatusOK, api.CalendarList{Calendars: []api.Calendar{}})
		return
	}
	cs, ctx, cancel, ok := a.calendarStore(w, r)
	if !ok {
		return
	}
	defer cancel()
	after, seal, ok := a.cursors.open(w, r, cursor.Listing{Kind: "calendars", Params: []string{prefix}})
	if !ok {
		return
	}
	cals, next, err := cs.ListCalendars(ctx, prefix, after, limit)
	if err != nil {
		a.fail(w, r, "", err)
		return
	}
	a.reply(w, r, http.StatusOK, api.CalendarList{Calendars: cals, NextCursor: seal(next)})
}
