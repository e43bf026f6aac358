package admin_test

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/jobfleet/jobfleet/admin"
	"github.com/jobfleet/jobfleet/api"
)

// newClockedEnv is newJobsEnv with the store's and the API's clock fixed
// at now.
func newClockedEnv(t *testing.T, now time.Time) *jobsEnv {
	t.Helper()
	clock := func() time.Time { return now }
	return newConfiguredEnv(t, clock, func(cfg *admin.Config) { cfg.Now = clock })
}

func TestJobsNext(t *testing.T) {
	now := time.Date(2026, 3, 7, 12, 0, 0, 0, time.UTC)
	e := newClockedEnv(t, now)
	e.doJSON("POST", "/v1/jobs", httpJob("ny", `"schedule": "30 2 * * *", "timezone": "America/New_York", "paused": true`), http.StatusCreated, nil)
	e.doJSON("POST", "/v1/jobs", httpJob("once", `"run_at": "2026-03-09T10:00:00.5Z"`), http.StatusCreated, nil)

	var got api.NextFires
	e.doJSON("GET", jobPath("ny", "next")+"?count=3", "", http.StatusOK, &got)
	want := api.NextFires{JobID: "ny", Timezone: "America/New_York", Paused: true, Fires: []api.Fire{
		{Local: "2026-03-08T03:00:00-04:00", UTC: "2026-03-08T07:00:00Z"}, // 02:30 does not exist: the jump
		{Local: "2026-03-09T02:30:00-04:00", UTC: "2026-03-09T06:30:00Z"},
		{Local: "2026-03-10T02:30:00-04:00", UTC: "2026-03-10T06:30:00Z"},
	}}
	if !equalNext(got, want) {
		t.Errorf("next: got %+v, want %+v", got, want)
	}
	got = api.NextFires{}
	e.doJSON("GET", jobPath("ny", "next"), "", http.StatusOK, &got)
	if len(got.Fires) != 10 {
		t.Errorf("next without count: got %d fires, want 10", len(got.Fires))
	}
	got = api.NextFires{}
	e.doJSON("GET", jobPath("once", "next"), "", http.StatusOK, &got)
	if want := (api.NextFires{JobID: "once", Timezone: "UTC", Fires: []api.Fire{{Local: "2026-03-09T10:00:00.5Z", UTC: "2026-03-09T10:00:00.5Z"}}}); !equalNext(got, want) {
		t.Errorf("next of a one-off: got %+v, want %+v", got, want)
	}
	for _, q := range []string{"?count=0", "?count=101", "?count=x"} {
		code, body := e.do("GET", jobPath("ny", "next")+q, nil)
		if msg := errorMessage(t, body); code != http.StatusBadRequest || !strings.HasPrefix(msg, "count:") {
			t.Errorf("next%s: got %d %q, want 400 about count", q, code, msg)
		}
	}
	if code, _ := e.do("GET", jobPath("missing", "next"), nil); code != http.StatusNotFound {
		t.Errorf("next of a missing job: got %d, want 404", code)
	}
}

func TestSchedulePreview(t *testing.T) {
	now := time.Date(2026, 10, 31, 12, 0, 0, 0, time.UTC)
	e := newClockedEnv(t, now)
	var got api.NextFires
	e.doJSON("POST", "/v1/schedule:preview", `{"schedule": "30 1 * * *", "timezone": "America/New_York", "count": 2}`, http.StatusOK, &got)
	want := api.NextFires{Timezone: "America/New_York", Fires: []api.Fire{
		{Local: "2026-11-01T01:30:00-04:00", UTC: "2026-11-01T05:30:00Z"}, // fall back: the first 01:30 only
		{Local: "2026-11-02T01:30:00-05:00", UTC: "2026-11-02T06:30:00Z"},
	}}
	if !equalNext(got, want) {
		t.Errorf("preview: got %+v, want %+v", got, want)
	}
	before := e.keys()
	for _, tc := range []struct{ body, field string }{
		{`{"schedule": "61 * * * *"}`, "schedule:"},
		{`{"schedule": "@daily", "timezone": "Mars/Olympus"}`, "timezone:"},
		{`{"schedule": "@daily", "run_at": "2026-12-01T00:00:00Z"}`, "run_at:"},
		{`{"timezone": "UTC"}`, "schedule:"},
		{`{"schedule": "@daily", "count": 101}`, "count:"},
		{`{"schedule": "@daily", "count": 0}`, "count:"},
		{`{"schedule": "@daily", "count": -1}`, "count:"},
		{`{"schedule": "@daily", "cuont": 3}`, "cuont"},
		{`{"run_at": "tomorrow"}`, "run_at"},
	} {
		code, body := e.do("POST", "/v1/schedule:preview", []byte(tc.body))
		if msg := errorMessage(t, body); code != http.StatusBadRequest || !strings.Contains(msg, tc.field) {
			t.Errorf("preview %s: got %d %q, want 400 naming %s", tc.body, code, msg, tc.field)
		}
	}
	if after := e.keys(); after != before {
		t.Errorf("preview wrote to the store: %d keys before, %d after", before, after)
	}
}

func equalNext(a, b api.NextFires) bool {
	if a.JobID != b.JobID || a.Timezone != b.Timezone || a.Paused != b.Paused || len(a.Fires) != len(b.Fires) {
		return false
	}
	for i := range a.Fires {
		if a.Fires[i] != b.Fires[i] {
			return false
		}
	}
	return true
}
