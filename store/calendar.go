package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/jobfleet/jobfleet/api"
)

// Calendars live under one prefix of the namespace, not partitioned:
// every partition's owner reads them all (dispatch.CalendarCache).
//
//	calendars/<name>   calendar document (API), <name> EscapeID(name)

// ErrCalendarLimit means the fleet stores api.MaxCalendars calendars
// already: delete one to create another.
var ErrCalendarLimit = errors.New("too many calendars")

// CalendarPrefix is the prefix of every calendar.
func (k Keys) CalendarPrefix() string { return k.NS + "calendars/" }

// Calendar is the key of calendar name.
func (k Keys) Calendar(name string) string { return k.CalendarPrefix() + EscapeID(name) }

// PutCalendar creates or replaces calendar c, normalized and validated
// here (errors match api.ErrInvalidCalendar), and returns it as stored
// with created telling which happened. Creating one beyond
// api.MaxCalendars returns ErrCalendarLimit (the count is checked before
// the write, so concurrent creations may pass it by a few); a store
// WithGuard asks its guard first.
func (s *Etcd) PutCalendar(ctx context.Context, c api.Calendar) (stored api.Calendar, created bool, err error) {
	c.Normalize()
	c.Revision = 0
	if err := c.Validate(); err != nil {
		return api.Calendar{}, false, err
	}
	if err := s.guard(); err != nil {
		return api.Calendar{}, false, err
	}
	key := s.keys.Calendar(c.Name)
	c.UpdatedAt = s.nowMillis()
	val, err := json.Marshal(c)
	if err != nil {
		return api.Calendar{}, false, err
	}
	if len(val) > api.MaxCalendarBytes {
		return api.Calendar{}, false, fmt.Errorf("%w: calendar %q is %d bytes stored; at most %d", api.ErrInvalidCalendar, c.Name, len(val), api.MaxCalendarBytes)
	}
	rev, created, err := s.putNamed(ctx, key, s.keys.CalendarPrefix(), val, api.MaxCalendars, func(have int64) error {
		return fmt.Errorf("calendar %q: %w: the fleet has %d, at most %d", c.Name, ErrCalendarLimit, have, api.MaxCalendars)
	})
	if err != nil {
		return api.Calendar{}, false, err
	}
	c.Revision = rev
	return c, created, nil
}

// GetCalendar returns calendar name, or ErrNotFound.
func (s *Etcd) GetCalendar(ctx context.Context, name string) (api.Calendar, error) {
	return getNamed(ctx, s.client, s.keys.Calendar(name), decodeCalendar)
}

// Calendars returns the compiled calendars of names (a job's exclude)
// that exist; names without a calendar are left out, and a stored
// calendar that no longer compiles excludes nothing.
func (s *Etcd) Calendars(ctx context.Context, names []string) (api.Calendars, error) {
	if len(names) == 0 {
		return nil, nil
	}
	ops := make([]clientv3.Op, len(names))
	for i, n := range names {
		ops[i] = clientv3.OpGet(s.keys.Calendar(n))
	}
	resp, err := s.client.Txn(ctx).Then(ops...).Commit()
	if err != nil {
		return nil, Classify(err)
	}
	out := api.Calendars{}
	for _, r := range resp.Responses {
		kvs := r.GetResponseRange().Kvs
		if len(kvs) == 0 {
			continue
		}
		c, err := decodeCalendar(kvs[0].Value, kvs[0].ModRevision)
		if err != nil {
			continue
		}
		if cc, err := c.Compile(); err == nil {
			out[c.Name] = cc
		}
	}
	return out, nil
}

// DeleteCalendar deletes calendar name; ErrNotFound if there is none.
// Jobs that exclude it exclude nothing from then on.
func (s *Etcd) DeleteCalendar(ctx context.Context, name string) error {
	resp, err := s.client.Delete(ctx, s.keys.Calendar(name))
	if err != nil {
		return Classify(err)
	}
	if resp.Deleted == 0 {
		return ErrNotFound
	}
	return nil
}

// ListCalendars returns up to limit (1 to 1000) calendars whose names
// start with prefix, in name order, after the calendar named cursor (""
// for the first page), and the cursor of the next page ("" at the end):
// the last name returned. A cursor that is not a calendar name under
// prefix is refused with a *FieldError naming "cursor".
func (s *Etcd) ListCalendars(ctx context.Context, prefix, cursor string, limit int) ([]api.Calendar, string, error) {
	return listNamed(ctx, s.client, s.keys.CalendarPrefix(), prefix, cursor, limit, api.MaxCalendarNameBytes,
		decodeCalendar, func(c api.Calendar) string { return c.Name })
}

func decodeCalendar(val []byte, rev int64) (api.Calendar, error) {
	var c api.Calendar
	if err := json.Unmarshal(val, &c); err != nil {
		return api.Calendar{}, fmt.Errorf("stored calendar is corrupt: %w", err)
	}
	c.Revision = rev
	return c, nil
}
