package client

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"

	"github.com/jobfleet/jobfleet/api"
)

func calendarPath(name string) string { return "/v1/calendars/" + url.PathEscape(name) }

// PutCalendar creates or replaces calendar c (PUT /v1/calendars/{name})
// and returns it as stored; created says which. Invalid documents fail
// with an *Error of status 400 naming the field.
func (c *Client) PutCalendar(ctx context.Context, cal api.Calendar) (stored api.Calendar, created bool, err error) {
	code, err := c.do(ctx, request{method: http.MethodPut, path: calendarPath(cal.Name), body: cal, out: &stored})
	return stored, code == http.StatusCreated, err
}

// PutCalendarJSON is PutCalendar with the document as JSON text, sent as
// it is (the server decodes it strictly), for calendar name.
func (c *Client) PutCalendarJSON(ctx context.Context, name string, doc []byte) (stored api.Calendar, created bool, err error) {
	code, err := c.do(ctx, request{method: http.MethodPut, path: calendarPath(name), body: doc, out: &stored})
	return stored, code == http.StatusCreated, err
}

// GetCalendar returns calendar name; ErrNotFound if there is none.
func (c *Client) GetCalendar(ctx context.Context, name string) (api.Calendar, error) {
	var cal api.Calendar
	_, err := c.do(ctx, request{method: http.MethodGet, path: calendarPath(name), out: &cal})
	return cal, err
}

// DeleteCalendar deletes calendar name; ErrNotFound if there is none.
func (c *Client) DeleteCalendar(ctx context.Context, name string) error {
	_, err := c.do(ctx, request{method: http.MethodDelete, path: calendarPath(name)})
	return err
}

// ListCalendars returns one page of calendars (GET /v1/calendars) in
// name order, within opts.Prefix (and the credential's); the page's
// NextCursor continues it ("" on the last page). Paused is ignored.
func (c *Client) ListCalendars(ctx context.Context, opts ListOptions) (api.CalendarList, error) {
	q := opts.pageQuery()
	var page api.CalendarList
	_, err := c.do(ctx, request{method: http.MethodGet, path: "/v1/calendars", query: q, out: &page})
	return page, err
}

// TriggerJobWith fires job id now with payload instead of the job's (nil:
// the job's) and returns the ID its run will have; the run records the
// payload. As TriggerJob otherwise.
func (c *Client) TriggerJobWith(ctx context.Context, id string, payload json.RawMessage) (runID string, err error) {
	var t api.Triggered
	var body any
	if payload != nil {
		body = api.TriggerRequest{Payload: payload}
	}
	_, err = c.do(ctx, request{method: http.MethodPost, path: jobPath(id, "trigger"), body: body, out: &t})
	return t.RunID, err
}
