package admin_test

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/jobfleet/jobfleet/api"
	"github.com/jobfleet/jobfleet/auth"
	"github.com/jobfleet/jobfleet/dispatch"
	"github.com/jobfleet/jobfleet/store"
)

// retryViewerToken is a viewer of every job.
const retryViewerToken = "test-retry-viewer"

func init() {
	testAuth[retryViewerToken] = auth.Principal{ID: "retry-viewer", Role: api.RoleViewer}
}

// stepsJob is a job of two steps, load needing extract.
const stepsJob = `{"id":"etl","run_at":"2030-01-01T00:00:00Z","steps":[` +
	`{"id":"extract","executor":{"type":"http","url":"http://127.0.0.1:9/x"}},` +
	`{"id":"load","needs":["extract"],"executor":{"type":"http","url":"http://127.0.0.1:9/l"}}]}`

// putStepsRun stores a run of job etl for at in status st, extract
// succeeded and load as st says, as an owner would.
func (e *jobsEnv) putStepsRun(at time.Time, st api.RunStatus) api.Run {
	e.t.Helper()
	p := e.store.Partition("etl")
	done := api.Attempt{Attempt: 1, Worker: "w1", StartedAt: at, FinishedAt: at.Add(time.Second)}
	r := api.Run{ID: store.RunID("etl", at), JobID: "etl", Partition: p, ScheduledAt: at, FiredAt: at, Status: st, Attempts: []api.Attempt{},
		Steps: []api.RunStep{{ID: "extract", First: 0, Items: 1, Status: api.RunSucceeded}, {ID: "load", Needs: []string{"extract"}, First: 1, Items: 1, Status: st}},
		Items: []api.Item{{Index: 0, Status: api.RunSucceeded, Attempts: []api.Attempt{done}, Result: json.RawMessage(`{"rows":3}`)}, {Index: 1, Status: st, Attempts: []api.Attempt{}}}}
	if st == api.RunDead {
		failed := done
		failed.Error = "status 500"
		r.Items[1].Attempts = []api.Attempt{failed}
	}
	b, err := store.EncodeRun(r)
	if err != nil {
		e.t.Fatal(err)
	}
	if _, err := e.client.Put(context.Background(), e.store.Keys().Run(p, "etl", at), string(b)); err != nil {
		e.t.Fatal(err)
	}
	return r
}

// TestRetryRouteRefusals: a retry from a step the run does not have, or
// of a run not made of steps, is bad input (400 naming from); of a run
// that did not fail, a conflict (409); by a viewer, forbidden (403). None
// changes the store.
func TestRetryRouteRefusals(t *testing.T) {
	e := cancelEnv(t, time.Millisecond)
	e.doJSON("POST", "/v1/jobs", stepsJob, http.StatusCreated, nil)
	e.doJSON("POST", "/v1/jobs", `{"id":"c","run_at":"2030-01-01T00:00:00Z","executor":{"type":"http","url":"http://127.0.0.1:9/h"}}`, http.StatusCreated, nil)
	at := time.Date(2026, 5, 1, 0, 0, 0, 0, time.UTC)
	dead := e.putStepsRun(at, api.RunDead).ID
	succeeded := e.putStepsRun(at.Add(time.Hour), api.RunSucceeded).ID
	plain := e.putRun("c", at, api.RunDead)
	path := func(id string) string { return "/v1/runs/" + url.PathEscape(id) + "/retry" }
	for _, tc := range []struct {
		name, token, run, body string
		code                   int
		want                   string
	}{
		{"unknown step", adminToken, dead, `{"from": "nope"}`, http.StatusBadRequest, `from: `},
		{"no from", adminToken, dead, `{}`, http.StatusBadRequest, `from: required`},
		{"run without steps", adminToken, plain, `{"from": "load"}`, http.StatusBadRequest, `from: `},
		{"run not failed", adminToken, succeeded, `{"from": "load"}`, http.StatusConflict, `succeeded`},
		{"viewer", retryViewerToken, dead, `{"from": "load"}`, http.StatusForbidden, ``},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := e.keys()
			code, body := e.doAs(tc.token, "POST", path(tc.run), tc.body)
			if code != tc.code || !strings.Contains(errorMessage(t, body), tc.want) {
				t.Fatalf("retry: %d %s, want %d with %q", code, body, tc.code, tc.want)
			}
			if tc.name == "unknown step" && !strings.Contains(errorMessage(t, body), `"nope"`) {
				t.Fatalf("retry from an unknown step: %s, want it named", body)
			}
			if after := e.keys(); after != before {
				t.Fatalf("a refused retry changed the store: %d keys, was %d", after, before)
			}
		})
	}
}

// TestRetryRouteStartsTheRunAgain: a retry of a dead run from its dead
// step answers 200 with the run in its new round once the partition's
// owner (here a stand-in applying dispatch.RetryFrom) has started it.
func TestRetryRouteStartsTheRunAgain(t *testing.T) {
	e := cancelEnv(t, 10*time.Second)
	e.doJSON("POST", "/v1/jobs", stepsJob, http.StatusCreated, nil)
	at := time.Date(2026, 5, 1, 0, 0, 0, 0, time.UTC)
	run := e.putStepsRun(at, api.RunDead)
	p := e.store.Partition("etl")
	done := e.standInOwner(t, e.store.Keys().Retry(p, "etl", at), e.store.Keys().Run(p, "etl", at), func(ev *clientv3.Event) []byte {
		var rr store.RetryRequest
		if err := json.Unmarshal(ev.Kv.Value, &rr); err != nil {
			t.Error(err)
			return nil
		}
		next, err := dispatch.RetryFrom(run, rr.From, rr.By, time.Now())
		if err != nil {
			t.Error(err)
			return nil
		}
		b, _ := store.EncodeRun(next)
		return b
	})
	code, body := e.do("POST", "/v1/runs/"+url.PathEscape(run.ID)+"/retry", []byte(`{"from": "load"}`))
	<-done
	if code != http.StatusOK {
		t.Fatalf("retry: %d %s, want 200", code, body)
	}
	var r api.Run
	if err := json.Unmarshal(body, &r); err != nil {
		t.Fatal(err)
	}
	var result bytes.Buffer
	_ = json.Compact(&result, r.Items[0].Result)
	if r.Round != 1 || len(r.Rounds) != 1 || r.Rounds[0].From != "load" || r.Rounds[0].By != "test-admin" || r.Steps[1].Status != api.RunPending || result.String() != `{"rows":3}` {
		t.Fatalf("reply: round %d, rounds %+v, load %s, extract's result %s; want round 1 from load by test-admin, load pending, extract's result kept",
			r.Round, r.Rounds, r.Steps[1].Status, result.String())
	}
}
