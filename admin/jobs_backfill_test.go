package admin_test

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/jobfleet/jobfleet/admin"
	"github.com/jobfleet/jobfleet/api"
)

// backfillNow is the API's clock in the backfill tests.
var backfillNow = time.Date(2026, 6, 1, 12, 0, 0, 0, time.UTC)

func backfillEnv(t *testing.T) *jobsEnv {
	t.Helper()
	e := newConfiguredEnv(t, nil, func(cfg *admin.Config) { cfg.Now = func() time.Time { return backfillNow } })
	e.doJSON("POST", "/v1/jobs", `{"id":"h","schedule":"0 * * * *","executor":{"type":"http","url":"http://127.0.0.1:9/h"}}`, http.StatusCreated, nil)
	return e
}

func hours(from string, n int) []time.Time {
	t, _ := time.Parse(time.RFC3339, from)
	out := make([]time.Time, n)
	for i := range out {
		out[i] = t.Add(time.Duration(i) * time.Hour)
	}
	return out
}

func sameTimes(t *testing.T, what string, got, want []time.Time) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s = %v, want %v", what, got, want)
	}
	for i := range got {
		if !got[i].Equal(want[i]) {
			t.Fatalf("%s = %v, want %v", what, got, want)
		}
	}
}

func TestBackfillDryRunThenRequest(t *testing.T) {
	e := backfillEnv(t)
	// Hours 03:00 and 05:00 fired already.
	for _, at := range hours("2026-06-01T03:00:00Z", 3) {
		if at.Hour() != 4 {
			e.putRun("h", at, api.RunSucceeded)
		}
	}
	body := `{"from": "2026-06-01T01:30:00Z", "to": "2026-06-01T07:00:00Z", "dry_run": true}`
	before := e.keys()
	var dry api.Backfill
	e.doJSON("POST", "/v1/jobs/h/backfill", body, http.StatusOK, &dry)
	if dry.Status != api.BackfillDryRun || e.keys() != before {
		t.Fatalf("dry run: status %q, %d keys (was %d); want a dry run that writes nothing", dry.Status, e.keys(), before)
	}
	sameTimes(t, "pending", dry.Pending, []time.Time{hours("2026-06-01T02:00:00Z", 1)[0], hours("2026-06-01T04:00:00Z", 1)[0], hours("2026-06-01T06:00:00Z", 1)[0]})
	sameTimes(t, "existing", dry.Existing, []time.Time{hours("2026-06-01T03:00:00Z", 1)[0], hours("2026-06-01T05:00:00Z", 1)[0]})
	if len(dry.Created) != 0 || len(dry.Skipped) != 0 || dry.NextFrom != nil {
		t.Fatalf("dry run %+v: want nothing created or skipped", dry)
	}

	body = strings.Replace(body, `, "dry_run": true`, "", 1)
	var got api.Backfill
	e.doJSON("POST", "/v1/jobs/h/backfill", body, http.StatusAccepted, &got)
	if got.Status != api.BackfillRunning || len(got.Pending) != 3 || len(got.Existing) != 2 || got.RequestedBy == "" {
		t.Fatalf("request: %+v, want running with 3 pending, 2 existing, and who asked", got)
	}
	var read api.Backfill
	e.doJSON("GET", "/v1/jobs/h/backfill", "", http.StatusOK, &read)
	sameTimes(t, "pending as read", read.Pending, got.Pending)
	// One at a time: a second request is refused while it runs, and
	// changes nothing.
	before = e.keys()
	code, reply := e.do("POST", "/v1/jobs/h/backfill", []byte(body))
	if code != http.StatusConflict || !strings.Contains(errorMessage(t, reply), "is running") || e.keys() != before {
		t.Fatalf("second request: %d %s, want 409 saying one runs", code, reply)
	}
	// Stopped, it is forgotten; the next request is taken.
	var stopped api.Backfill
	e.doJSON("DELETE", "/v1/jobs/h/backfill", "", http.StatusOK, &stopped)
	if stopped.Status != api.BackfillStopped {
		t.Fatalf("stop: status %q, want stopped", stopped.Status)
	}
	e.doJSON("GET", "/v1/jobs/h/backfill", "", http.StatusNotFound, nil)
	e.doJSON("POST", "/v1/jobs/h/backfill", body, http.StatusAccepted, nil)
	// A range whose times all exist is done at once.
	e.doJSON("DELETE", "/v1/jobs/h/backfill", "", http.StatusOK, nil)
	var done api.Backfill
	e.doJSON("POST", "/v1/jobs/h/backfill", `{"from": "2026-06-01T03:00:00Z", "to": "2026-06-01T04:00:00Z"}`, http.StatusOK, &done)
	if done.Status != api.BackfillDone || len(done.Existing) != 1 || done.DoneAt.IsZero() {
		t.Fatalf("backfill of a fired time: %+v, want done, the time existing", done)
	}
}

func TestBackfillMaxSkipsTheRest(t *testing.T) {
	e := backfillEnv(t)
	var got api.Backfill
	e.doJSON("POST", "/v1/jobs/h/backfill", `{"from": "2026-06-01T00:00:00Z", "max": 3, "dry_run": true}`, http.StatusOK, &got)
	sameTimes(t, "pending", got.Pending, hours("2026-06-01T00:00:00Z", 3))
	// The range to now holds 12 hours (00:00 to 11:00): the 9 after max
	// are skipped (at most max listed) and the next request starts after.
	sameTimes(t, "skipped", got.Skipped, hours("2026-06-01T03:00:00Z", 3))
	if got.NextFrom == nil || !got.NextFrom.Equal(hours("2026-06-01T03:00:00Z", 1)[0]) || !got.To.Equal(backfillNow) {
		t.Fatalf("next_from %v, to %v; want 03:00 and now", got.NextFrom, got.To)
	}
}

func TestBackfillRefusals(t *testing.T) {
	e := backfillEnv(t)
	e.doJSON("POST", "/v1/jobs", `{"id":"once","run_at":"2030-01-01T00:00:00Z","executor":{"type":"http","url":"http://127.0.0.1:9/h"}}`, http.StatusCreated, nil)
	for _, tc := range []struct {
		name, path, body string
		code             int
		field            string
	}{
		{"no from", "/v1/jobs/h/backfill", `{"to": "2026-06-01T03:00:00Z"}`, 400, "from"},
		{"to in the future", "/v1/jobs/h/backfill", `{"from": "2026-06-01T00:00:00Z", "to": "2026-06-01T12:00:01Z"}`, 400, "to"},
		{"from not before to", "/v1/jobs/h/backfill", `{"from": "2026-06-01T03:00:00Z", "to": "2026-06-01T03:00:00Z"}`, 400, "from"},
		{"max zero", "/v1/jobs/h/backfill", `{"from": "2026-06-01T00:00:00Z", "max": 0}`, 400, "max"},
		{"max over 1000", "/v1/jobs/h/backfill", `{"from": "2026-06-01T00:00:00Z", "max": 1001}`, 400, "max"},
		{"unknown field", "/v1/jobs/h/backfill", `{"from": "2026-06-01T00:00:00Z", "until": "x"}`, 400, "until"},
		{"not a time", "/v1/jobs/h/backfill", `{"from": "yesterday"}`, 400, "from"},
		{"a one-off job", "/v1/jobs/once/backfill", `{"from": "2026-06-01T00:00:00Z"}`, 400, "id"},
		{"no such job", "/v1/jobs/nope/backfill", `{"from": "2026-06-01T00:00:00Z"}`, 404, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := e.keys()
			code, body := e.do("POST", tc.path, []byte(tc.body))
			if code != tc.code {
				t.Fatalf("%d %s, want %d", code, body, tc.code)
			}
			if msg := errorMessage(t, body); tc.field != "" && !strings.Contains(msg, tc.field) {
				t.Fatalf("message %q does not name %s", msg, tc.field)
			}
			if e.keys() != before {
				t.Fatal("a refused backfill changed the store")
			}
		})
	}
	e.doJSON("GET", "/v1/jobs/h/backfill", "", http.StatusNotFound, nil)
	e.doJSON("GET", "/v1/jobs/nope/backfill", "", http.StatusNotFound, nil)
}

// The record the API writes is what the owner reads: every time with its
// outcome, the request's bounds and who asked.
func TestBackfillRecord(t *testing.T) {
	e := backfillEnv(t)
	e.doJSON("POST", "/v1/jobs/h/backfill", `{"from": "2026-06-01T10:00:00Z"}`, http.StatusAccepted, nil)
	b, _, err := e.store.GetBackfill(context.Background(), "h")
	if err != nil {
		t.Fatal(err)
	}
	if b.Outcome != "pp" || len(b.Times) != 2 || b.Max != api.MaxBackfill || !b.To.Equal(backfillNow) {
		raw, _ := json.Marshal(b)
		t.Fatalf("stored %s, want 10:00 and 11:00 pending, max %d, to now", raw, api.MaxBackfill)
	}
}
