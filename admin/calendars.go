package admin

import (
	"context"

	"github.com/jobfleet/jobfleet/api"
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

// calendars are the named objects of /v1/calendars/{name}: PUT answers
// 201 with the stored calendar when created, 200 when replaced; after a
// DELETE (204), jobs that exclude the calendar exclude nothing.
var calendars = &namedKind[api.Calendar]{
	noun:    "calendar",
	param:   "name",
	listing: "calendars",
	maxName: api.MaxCalendarNameBytes,
	maxDoc:  api.MaxCalendarBytes,
	decode:  api.DecodeCalendar,
	name:    func(c *api.Calendar) *string { return &c.Name },
	full:    store.ErrCalendarLimit,
	ops: func(s JobStore) (namedOps[api.Calendar], bool) {
		cs, ok := s.(CalendarStore)
		if !ok {
			return namedOps[api.Calendar]{}, false
		}
		return namedOps[api.Calendar]{put: cs.PutCalendar, get: cs.GetCalendar, del: cs.DeleteCalendar, list: cs.ListCalendars}, true
	},
	page: func(cals []api.Calendar, next string) any {
		return api.CalendarList{Calendars: cals, NextCursor: next}
	},
}
