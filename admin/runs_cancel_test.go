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

	"github.com/jobfleet/jobfleet/admin"
	"github.com/jobfleet/jobfleet/api"
	"github.com/jobfleet/jobfleet/store"
)

// cancelEnv is a jobsEnv whose cancel requests wait wait for an owner.
func cancelEnv(t *testing.T, wait time.Duration) *jobsEnv {
	t.Helper()
	return newConfiguredEnv(t, nil, func(cfg *admin.Config) { cfg.CancelWait = wait })
}

// standInOwner plays the owner of a partition for one request: it
// watches the request key req from the store's current revision on and,
// at its first event, puts the run document answer returns at runKey and
// deletes req in one transaction (nothing where answer returns nil,
// having reported why with t.Error). The channel closes once it is done,
// or after 10 s.
func (e *jobsEnv) standInOwner(t *testing.T, req, runKey string, answer func(ev *clientv3.Event) []byte) <-chan struct{} {
	t.Helper()
	now, err := e.client.Get(context.Background(), "x")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		for ev := range e.client.Watch(ctx, req, clientv3.WithRev(now.Header.Revision+1)) {
			if len(ev.Events) == 0 {
				continue
			}
			if b := answer(ev.Events[0]); b != nil {
				e.client.Txn(ctx).Then(clientv3.OpPut(runKey, string(b)), clientv3.OpDelete(req)).Commit()
			}
			return
		}
	}()
	return done
}

// putRun stores run of job id for at in status st, as an owner would.
func (e *jobsEnv) putRun(id string, at time.Time, st api.RunStatus) string {
	e.t.Helper()
	p := e.store.Partition(id)
	r := api.Run{ID: store.RunID(id, at), JobID: id, Partition: p, ScheduledAt: at, Status: st, Attempts: []api.Attempt{}}
	b, _ := json.Marshal(r)
	if _, err := e.client.Put(context.Background(), e.store.Keys().Run(p, id, at), string(b)); err != nil {
		e.t.Fatal(err)
	}
	return r.ID
}

func TestCancelRouteRefusals(t *testing.T) {
	e := cancelEnv(t, time.Millisecond)
	e.doJSON("POST", "/v1/jobs", `{"id":"c","run_at":"2030-01-01T00:00:00Z","executor":{"type":"http","url":"http://127.0.0.1:9/h"}}`, http.StatusCreated, nil)
	at := time.Date(2026, 5, 1, 0, 0, 0, 0, time.UTC)
	for _, st := range []api.RunStatus{api.RunSucceeded, api.RunDead, api.RunSkipped, api.RunCancelled} {
		t.Run(string(st), func(t *testing.T) {
			id := e.putRun("c", at, st)
			before := e.keys()
			code, body := e.do("POST", "/v1/runs/"+url.PathEscape(id)+"/cancel", nil)
			if code != http.StatusConflict || !strings.Contains(errorMessage(t, body), "is "+string(st)+" already") {
				t.Fatalf("cancel of a %s run: %d %s, want 409 naming %s", st, code, body, st)
			}
			if after := e.keys(); after != before {
				t.Fatalf("a refused cancel changed the store: %d keys, was %d", after, before)
			}
		})
	}
	for _, tc := range []struct {
		name, path string
		code       int
	}{
		{"no such run", "/v1/runs/" + url.PathEscape(store.RunID("c", at.Add(time.Hour))) + "/cancel", http.StatusNotFound},
		{"no such job", "/v1/runs/" + url.PathEscape(store.RunID("nope", at)) + "/cancel", http.StatusNotFound},
		{"not a run ID", "/v1/runs/nope/cancel", http.StatusBadRequest},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := e.keys()
			if code, body := e.do("POST", tc.path, nil); code != tc.code {
				t.Fatalf("POST %s: %d %s, want %d", tc.path, code, body, tc.code)
			}
			if after := e.keys(); after != before {
				t.Fatalf("a refused cancel changed the store: %d keys, was %d", after, before)
			}
		})
	}
	// Without an owner the request is recorded (202) and stays, once.
	id := e.putRun("c", at.Add(2*time.Hour), api.RunPending)
	for range 2 {
		var got api.CancelRequested
		e.doJSON("POST", "/v1/runs/"+url.PathEscape(id)+"/cancel", "", http.StatusAccepted, &got)
		if got.RunID != id || got.Status != api.StatusCancelRequested {
			t.Fatalf("reply %+v, want the request recorded for %s", got, id)
		}
	}
	resp, err := e.client.Get(context.Background(), e.store.Keys().CancelPrefix(e.store.Partition("c"), "c"), clientv3.WithPrefix())
	if err != nil || len(resp.Kvs) != 1 {
		t.Fatalf("cancel requests stored: %v, %v; want one", resp, err)
	}
	// The job's deletion takes its requests with it.
	e.doJSON("DELETE", "/v1/jobs/c", "", http.StatusNoContent, nil)
	if resp, err := e.client.Get(context.Background(), e.store.Keys().JobRequestsPrefix(e.store.Partition("c"), "c"), clientv3.WithPrefix()); err != nil || len(resp.Kvs) != 0 {
		t.Fatalf("requests of a deleted job: %v, %v; want none", resp, err)
	}
}

// The reply waits for the owner: 200 with the cancelled run, or 409 if
// the owner found the run final (here a stand-in owner applies it).
func TestCancelRouteWaitsForTheOwner(t *testing.T) {
	e := cancelEnv(t, 10*time.Second)
	e.doJSON("POST", "/v1/jobs", `{"id":"c","run_at":"2030-01-01T00:00:00Z","executor":{"type":"http","url":"http://127.0.0.1:9/h"}}`, http.StatusCreated, nil)
	for _, tc := range []struct {
		outcome api.RunStatus
		code    int
	}{{api.RunCancelled, http.StatusOK}, {api.RunSucceeded, http.StatusConflict}} {
		t.Run(string(tc.outcome), func(t *testing.T) {
			at := time.Date(2026, 5, 1, 0, 0, 0, 0, time.UTC).Add(time.Duration(tc.code) * time.Second)
			id := e.putRun("c", at, api.RunRunning)
			p := e.store.Partition("c")
			done := e.standInOwner(t, e.store.Keys().Cancel(p, "c", at), e.store.Keys().Run(p, "c", at), func(*clientv3.Event) []byte {
				r := api.Run{ID: id, JobID: "c", Partition: p, ScheduledAt: at, Status: tc.outcome, Attempts: []api.Attempt{}}
				b, _ := json.Marshal(r)
				return b
			})
			code, body := e.do("POST", "/v1/runs/"+url.PathEscape(id)+"/cancel", nil)
			<-done
			if code != tc.code {
				t.Fatalf("cancel: %d %s, want %d", code, body, tc.code)
			}
			if code == http.StatusOK {
				var r api.Run
				if err := json.Unmarshal(body, &r); err != nil || r.Status != api.RunCancelled {
					t.Fatalf("reply %s, want the cancelled run", body)
				}
			} else if !strings.Contains(errorMessage(t, body), "succeeded") {
				t.Fatalf("reply %s, want it to name the run's status", body)
			}
		})
	}
}
