package admin

import (
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/jobfleet/jobfleet/api"
	"github.com/jobfleet/jobfleet/schedule"
)

// defaultNextCount is how many times GET /v1/jobs/{id}/next and POST
// /v1/schedule:preview list without a count.
const defaultNextCount = 10

// maxPreviewBodyBytes caps the body of POST /v1/schedule:preview.
const maxPreviewBodyBytes = 16 << 10

// countParam returns ?count: defaultNextCount if absent, an error naming
// it unless 1 to api.MaxNextFires.
func countParam(r *http.Request) (int, error) {
	s := r.URL.Query().Get("count")
	if s == "" {
		return defaultNextCount, nil
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 1 || n > api.MaxNextFires {
		return 0, fmt.Errorf("count: %q: want a number from 1 to %d", clip(s), api.MaxNextFires)
	}
	return n, nil
}

// next serves GET /v1/jobs/{id}/next.
func (a *jobsAPI) next(w http.ResponseWriter, r *http.Request) {
	n, err := countParam(r)
	if err != nil {
		WriteError(w, http.StatusBadRequest, err.Error())
		return
	}
	s, ctx, cancel, id, ok := a.jobStore(w, r)
	if !ok {
		return
	}
	defer cancel()
	j, err := s.Get(ctx, id)
	if err != nil {
		a.fail(w, r, id, err)
		return
	}
	var cals api.Calendars
	if cs, ok := s.(CalendarStore); ok && len(j.Exclude) > 0 {
		if cals, err = cs.Calendars(ctx, j.Exclude); err != nil {
			a.fail(w, r, id, err)
			return
		}
	}
	up, err := j.Upcoming(a.now(), n, cals)
	if err != nil {
		a.fail(w, r, id, err)
		return
	}
	doc, err := upcomingFires(j.Timezone, up)
	if err != nil {
		a.fail(w, r, id, err)
		return
	}
	doc.JobID, doc.Paused, doc.Status = j.ID, j.Paused, j.Status
	a.reply(w, r, http.StatusOK, doc)
}

// preview serves POST /v1/schedule:preview: it writes nothing.
func (a *jobsAPI) preview(w http.ResponseWriter, r *http.Request) {
	var req api.PreviewRequest
	if err := decodeBody(w, r, maxPreviewBodyBytes, &req); err != nil {
		var de *api.DecodeError
		if errors.As(err, &de) {
			err = fmt.Errorf("%w; the body must be {\"schedule\" or \"run_at\", \"timezone\", \"count\"}", err)
		}
		a.fail(w, r, "", err)
		return
	}
	count := defaultNextCount
	if req.Count != nil {
		if *req.Count < 1 || *req.Count > api.MaxNextFires {
			WriteError(w, http.StatusBadRequest, fmt.Sprintf("count: %d: want a number from 1 to %d (leave it out for %d)", *req.Count, api.MaxNextFires, defaultNextCount))
			return
		}
		count = *req.Count
	}
	if req.Timezone == "" {
		req.Timezone = api.DefaultTimezone
	}
	fires, err := api.PreviewFires(req.Schedule, req.Timezone, req.RunAt, a.now(), count)
	if err != nil {
		a.fail(w, r, "", err)
		return
	}
	doc, err := nextFires(req.Timezone, fires)
	if err != nil {
		a.fail(w, r, "", err)
		return
	}
	a.reply(w, r, http.StatusOK, doc)
}

// upcomingFires writes the fire times of up in zone (a valid IANA name)
// and in UTC, each with its scheduled time if the jitter moved it.
func upcomingFires(zone string, up []api.Upcoming) (api.NextFires, error) {
	fires := make([]time.Time, len(up))
	for i, u := range up {
		fires[i] = u.FireAt
	}
	doc, err := nextFires(zone, fires)
	if err != nil {
		return api.NextFires{}, err
	}
	for i, u := range up {
		if !u.FireAt.Equal(u.At) {
			doc.Fires[i].ScheduledAt = u.At.UTC().Format(time.RFC3339Nano)
		}
	}
	return doc, nil
}

// nextFires writes fires in zone (a valid IANA name) and in UTC.
func nextFires(zone string, fires []time.Time) (api.NextFires, error) {
	loc, err := schedule.LoadLocation(zone)
	if err != nil {
		return api.NextFires{}, err
	}
	doc := api.NextFires{Timezone: zone, Fires: make([]api.Fire, len(fires))}
	if doc.Timezone == "" {
		doc.Timezone = api.DefaultTimezone
	}
	for i, t := range fires {
		doc.Fires[i] = api.Fire{Local: t.In(loc).Format(time.RFC3339Nano), UTC: t.UTC().Format(time.RFC3339Nano)}
	}
	return doc, nil
}
