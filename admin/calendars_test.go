package admin_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/jobfleet/jobfleet/api"
	"github.com/jobfleet/jobfleet/store"
)

func calendarPath(name string) string { return "/v1/calendars/" + url.PathEscape(name) }

func TestCalendarsCRUD(t *testing.T) {
	e := newJobsEnv(t)
	var c api.Calendar
	e.doJSON("PUT", calendarPath("us-holidays"), `{"timezone": "America/New_York", "description": "US federal holidays", "dates": ["2026-12-25", "2026-07-04"], "ranges": [{"from": "2026-12-31T18:00", "to": "2027-01-02"}]}`, http.StatusCreated, &c)
	if c.Name != "us-holidays" || c.Revision == 0 || c.UpdatedAt.IsZero() || len(c.Dates) != 2 {
		t.Fatalf("created %+v", c)
	}
	e.doJSON("PUT", calendarPath("us-holidays"), `{"name": "us-holidays", "dates": ["2026-12-25"]}`, http.StatusOK, &c)
	if c.Timezone != "UTC" || len(c.Dates) != 1 {
		t.Fatalf("replaced %+v, want the new document with UTC by default", c)
	}
	var got api.Calendar
	e.doJSON("GET", calendarPath("us-holidays"), "", http.StatusOK, &got)
	if got.Revision != c.Revision || got.Dates[0] != "2026-12-25" {
		t.Fatalf("got %+v, want %+v", got, c)
	}
	e.doJSON("PUT", calendarPath("team a/maintenance"), `{"ranges": [{"from": "2026-06-01", "to": "2026-06-02"}]}`, http.StatusCreated, nil)
	var list api.CalendarList
	e.doJSON("GET", "/v1/calendars", "", http.StatusOK, &list)
	if len(list.Calendars) != 2 || list.Calendars[0].Name != "team a/maintenance" || list.NextCursor != "" {
		t.Fatalf("list %+v, want both, in name order", list)
	}
	list = api.CalendarList{}
	e.doJSON("GET", "/v1/calendars?limit=1", "", http.StatusOK, &list)
	if len(list.Calendars) != 1 || list.NextCursor == "" || list.NextCursor == "team a/maintenance" {
		t.Fatalf("first page %+v, want one and a sealed cursor", list)
	}
	cursor := list.NextCursor
	list = api.CalendarList{}
	e.doJSON("GET", "/v1/calendars?limit=1&cursor="+url.QueryEscape(cursor), "", http.StatusOK, &list)
	if len(list.Calendars) != 1 || list.Calendars[0].Name != "us-holidays" || list.NextCursor != "" {
		t.Fatalf("second page %+v", list)
	}
	list = api.CalendarList{}
	e.doJSON("GET", "/v1/calendars?prefix=team", "", http.StatusOK, &list)
	if len(list.Calendars) != 1 {
		t.Fatalf("prefix team: %+v", list)
	}
	e.doJSON("DELETE", calendarPath("us-holidays"), "", http.StatusNoContent, nil)
	for _, m := range []string{"GET", "DELETE"} {
		code, body := e.do(m, calendarPath("us-holidays"), nil)
		if msg := errorMessage(t, body); code != http.StatusNotFound || !strings.Contains(msg, `calendar "us-holidays" not found`) {
			t.Errorf("%s after delete: %d %q", m, code, msg)
		}
	}
}

func TestCalendarsRejectBadInput(t *testing.T) {
	e := newJobsEnv(t)
	e.expectRefused([]refusal{
		{calendarPath("a"), `{"dates": ["2026-13-01"]}`, "dates[0]", 400},
		{calendarPath("a"), `{"dates": ["2026-12-25"], "dates": []}`, `duplicate key "dates"`, 400},
		{calendarPath("a"), `{"date": ["2026-12-25"]}`, "date", 400},
		{calendarPath("a"), `{"name": "b"}`, "name", 400},
		{calendarPath("a"), `{"timezone": "Local"}`, "timezone", 400},
		{calendarPath("a"), `{"ranges": [{"from": "2026-01-02", "to": "2026-01-01"}]}`, "ranges[0].to", 400},
		{calendarPath("us\u200bholidays"), `{}`, "name", 400},
		{calendarPath(strings.Repeat("n", api.MaxCalendarNameBytes+1)), `{}`, "name", 400},
		{calendarPath("a"), `{"description": "` + strings.Repeat("x", api.MaxCalendarBytes) + `"}`, "larger than", 413},
		{"/v1/calendars?cursor=" + url.QueryEscape("not\u200ba cursor"), "", "cursor", 400},
		{"/v1/calendars?prefix=team/&cursor=other", "", "cursor", 400},
		{"/v1/calendars?limit=0", "", "limit", 400},
	})
}

// TestCalendarsAreScoped: a credential limited to a prefix reads, lists
// and writes only the calendars under it.
func TestCalendarsAreScoped(t *testing.T) {
	e := newJobsEnv(t)
	e.doJSON("PUT", calendarPath("billing/holidays"), `{"dates": ["2026-12-25"]}`, http.StatusCreated, nil)
	e.doJSON("PUT", calendarPath("ops/holidays"), `{"dates": ["2026-12-25"]}`, http.StatusCreated, nil)
	if code, body := e.doAs(billingToken, "PUT", calendarPath("ops/holidays"), `{"dates": []}`); code != http.StatusForbidden {
		t.Errorf("billing operator writing ops/holidays: %d %s, want 403", code, body)
	}
	if code, body := e.doAs(billingToken, "GET", calendarPath("ops/holidays"), ""); code != http.StatusForbidden {
		t.Errorf("billing operator reading ops/holidays: %d %s, want 403", code, body)
	}
	if code, body := e.doAs(billingToken, "PUT", calendarPath("billing/holidays"), `{"dates": ["2026-12-26"]}`); code != http.StatusOK {
		t.Errorf("billing operator writing billing/holidays: %d %s, want 200", code, body)
	}
	code, body := e.doAs(billingToken, "GET", "/v1/calendars", "")
	var list api.CalendarList
	if code != http.StatusOK || json.Unmarshal(body, &list) != nil || len(list.Calendars) != 1 || list.Calendars[0].Name != "billing/holidays" {
		t.Errorf("billing operator's listing: %d %s, want billing/holidays only", code, body)
	}
}

func TestCalendarLimit(t *testing.T) {
	e := newJobsEnv(t)
	ctx := context.Background()
	// Fill the fleet's calendars to the bound directly.
	for i := 0; i < api.MaxCalendars; i += 100 {
		var ops []clientv3.Op
		for k := i; k < i+100 && k < api.MaxCalendars; k++ {
			name := "c" + strings.Repeat("0", 4-len(itoa(k))) + itoa(k)
			ops = append(ops, clientv3.OpPut(e.store.Keys().Calendar(name), `{"name":"`+name+`","timezone":"UTC"}`))
		}
		if _, err := e.client.Txn(ctx).Then(ops...).Commit(); err != nil {
			t.Fatal(err)
		}
	}
	code, body := e.do("PUT", calendarPath("one-more"), []byte(`{}`))
	if msg := errorMessage(t, body); code != http.StatusConflict || !strings.Contains(msg, "too many calendars") {
		t.Errorf("one calendar too many: %d %q, want 409", code, msg)
	}
	e.doJSON("PUT", calendarPath("c0007"), `{"dates": ["2026-01-01"]}`, http.StatusOK, nil) // replacing one is fine
}

func itoa(i int) string { b, _ := json.Marshal(i); return string(b) }

// TestNextSkipsCalendarsAndShowsJitter: GET /v1/jobs/{id}/next lists the
// fires as the owner fires them: not the times a calendar excludes, and
// at their jittered moments with their scheduled times.
func TestNextSkipsCalendarsAndShowsJitter(t *testing.T) {
	now := time.Date(2026, 12, 23, 12, 0, 0, 0, time.UTC)
	e := newClockedEnv(t, now)
	e.doJSON("PUT", calendarPath("holidays"), `{"dates": ["2026-12-25"]}`, http.StatusCreated, nil)
	e.doJSON("POST", "/v1/jobs", httpJob("daily", `"schedule": "@daily", "exclude": ["holidays"], "jitter": "30m"`), http.StatusCreated, nil)
	var got api.NextFires
	e.doJSON("GET", jobPath("daily", "next")+"?count=3", "", http.StatusOK, &got)
	want := []string{"2026-12-24T00:00:00Z", "2026-12-26T00:00:00Z", "2026-12-27T00:00:00Z"}
	if len(got.Fires) != 3 || got.Status != api.JobActive {
		t.Fatalf("next %+v, want 3 fires of an active job", got)
	}
	for i, f := range got.Fires {
		fire, err := time.Parse(time.RFC3339Nano, f.UTC)
		if err != nil {
			t.Fatal(err)
		}
		sched := want[i]
		if f.ScheduledAt != "" {
			if f.ScheduledAt != sched {
				t.Errorf("fire %d: scheduled at %s, want %s", i, f.ScheduledAt, sched)
			}
		}
		at, _ := time.Parse(time.RFC3339, sched)
		if d := fire.Sub(at); d < 0 || d >= 30*time.Minute || (d > 0) != (f.ScheduledAt != "") {
			t.Errorf("fire %d at %s for %s: want within the jitter, with scheduled_at when delayed", i, f.UTC, sched)
		}
	}
}

func TestTriggerWithPayload(t *testing.T) {
	e := newJobsEnv(t)
	e.doJSON("POST", "/v1/jobs", httpJob("p", `"schedule": "@hourly", "payload": {"day": "today"}`), http.StatusCreated, nil)
	var tr api.Triggered
	e.doJSON("POST", jobPath("p", "trigger"), `{"payload": {"day": "2026-05-31"}}`, http.StatusAccepted, &tr)
	at, err := time.Parse(api.TimeFormat, tr.RunID[strings.LastIndex(tr.RunID, "@")+1:])
	if err != nil {
		t.Fatal(err)
	}
	resp, err := e.client.Get(context.Background(), e.store.Keys().Trigger(e.store.Partition("p"), "p", at))
	if err != nil || len(resp.Kvs) != 1 || string(resp.Kvs[0].Value) != `{"payload":{"day":"2026-05-31"}}` {
		t.Fatalf("trigger request stored as %v (%v), want the payload", resp, err)
	}
	e.doJSON("POST", jobPath("p", "trigger"), "", http.StatusAccepted, nil)
	e.doJSON("POST", jobPath("p", "trigger"), `{"payload": null}`, http.StatusAccepted, nil)
	before := e.keys()
	for _, tc := range []struct{ body, msg string }{
		{`{"payload": {"a": 1}, "payload": 2}`, "duplicate"},
		{`{"params": {}}`, "params"},
		{`[1]`, "payload"},
		{`{"payload": {"secret_env": "lower-case"}}`, "payload"},
		{`{"payload": "` + strings.Repeat("x", store.MaxTriggerPayloadBytes) + `"}`, "payload"},
	} {
		code, body := e.do("POST", jobPath("p", "trigger"), []byte(tc.body))
		if msg := errorMessage(t, body); code != http.StatusBadRequest || !strings.Contains(msg, tc.msg) {
			t.Errorf("trigger with %.40s: %d %q, want 400 naming %s", tc.body, code, msg, tc.msg)
		}
	}
	if code, _ := e.do("POST", jobPath("p", "trigger"), []byte(`{"payload": "`+strings.Repeat("x", 2*store.MaxTriggerPayloadBytes)+`"}`)); code != http.StatusRequestEntityTooLarge {
		t.Errorf("trigger with a body over the limit: %d, want 413", code)
	}
	if after := e.keys(); after != before {
		t.Errorf("refused triggers changed the store: %d keys, then %d", before, after)
	}
}

func TestListWithState(t *testing.T) {
	e := newJobsEnv(t)
	e.doJSON("POST", "/v1/jobs", httpJob("a", `"schedule": "@hourly"`), http.StatusCreated, nil)
	e.doJSON("POST", "/v1/jobs", httpJob("b", `"schedule": "@hourly", "paused": true`), http.StatusCreated, nil)
	e.doJSON("POST", "/v1/jobs", httpJob("c", `"schedule": "@hourly", "max_fires": 1`), http.StatusCreated, nil)
	// c's owner recorded that it completed.
	st, _ := json.Marshal(api.JobState{Last: time.Now(), ScheduledRuns: 1, FinishedAt: time.Now()})
	if _, err := e.client.Put(context.Background(), e.store.Keys().State(e.store.Partition("c"), "c"), string(st)); err != nil {
		t.Fatal(err)
	}
	var list api.JobList
	e.doJSON("GET", "/v1/jobs?state=true", "", http.StatusOK, &list)
	got := map[string]api.JobStatus{}
	for _, j := range list.Jobs {
		got[j.ID] = j.Status
	}
	if got["a"] != api.JobActive || got["b"] != api.JobPaused || got["c"] != api.JobCompleted {
		t.Errorf("statuses %v, want a active, b paused, c completed", got)
	}
	var plain api.JobList
	e.doJSON("GET", "/v1/jobs", "", http.StatusOK, &plain)
	for _, j := range plain.Jobs {
		if j.Status != "" || j.State != nil {
			t.Errorf("plain listing: %s with status %q and state %v, want neither", j.ID, j.Status, j.State)
		}
	}
	if code, _ := e.do("GET", "/v1/jobs?state=yes", nil); code != http.StatusBadRequest {
		t.Errorf("?state=yes: %d, want 400", code)
	}
}
