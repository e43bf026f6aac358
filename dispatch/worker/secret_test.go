package worker_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/jobfleet/jobfleet/api"
	"github.com/jobfleet/jobfleet/dispatch/worker"
	"github.com/jobfleet/jobfleet/egress"
)

// TestSecretReferences: references in header values, the payload and the
// body are resolved on the worker from the variables it allows; a missing
// or unlisted variable fails the attempt naming it, never a value.
func TestSecretReferences(t *testing.T) {
	t.Setenv("HOOK_TOKEN", "Bearer hook-s3cret")
	t.Setenv("API_KEY", `key"with<quotes>`)
	t.Setenv("NOT_LISTED", "unlisted-s3cret")
	t.Setenv("BAD_VALUE", "a\r\nX-Injected: 1")
	policy := egress.Policy{Allow: []string{"127.0.0.1"}}
	secrets := []string{"HOOK_TOKEN", "API_KEY", "BAD_VALUE", "UNSET_VAR"}

	t.Run("resolved in headers and payload", func(t *testing.T) {
		tg := newTarget(t)
		f := newFakeOrch(t, "a", nil)
		startWorker(t, worker.Config{Orchestrators: worker.StaticOrchestrators(f.URL()), HTTPPolicy: policy, SecretEnv: secrets}, nil)
		ex := api.Executor{Type: "http", URL: tg.url("127.0.0.1", "/"), Headers: map[string]api.HeaderValue{
			"Authorization": api.SecretEnv("HOOK_TOKEN"), "X-Plain": api.Literal("plain")}}
		f.enqueue(f.assignment("r1", ex, `{"key":{"secret_env":"API_KEY"},"n":1.50}`))
		if c := f.waitComplete(t, "r1"); !c.Success {
			t.Fatalf("completion %q, want success", c.Error)
		}
		got := tg.got()
		if len(got) != 1 {
			t.Fatalf("%d requests, want 1", len(got))
		}
		if a := got[0].header.Get("Authorization"); a != "Bearer hook-s3cret" {
			t.Errorf("Authorization %q, want the resolved secret", a)
		}
		if got[0].header.Get("X-Plain") != "plain" {
			t.Errorf("X-Plain %q, want plain", got[0].header.Get("X-Plain"))
		}
		if want := `{"key":"key\"with<quotes>","n":1.50}`; got[0].body != want {
			t.Errorf("body %s, want %s", got[0].body, want)
		}
	})

	t.Run("unlisted in the body", func(t *testing.T) {
		tg := newTarget(t)
		// runHTTPJob's worker allows no secret variable.
		c, _ := runHTTPJob(t, policy, api.Executor{URL: tg.url("127.0.0.1", "/"), Body: json.RawMessage(`[{"secret_env":"HOOK_TOKEN"}]`)}, "")
		if n := tg.ln.accepted.Load(); n != 0 {
			t.Errorf("the receiver accepted %d connections, want none", n)
		}
		if c.Success || !strings.Contains(c.Error, "executor.body[0]: secret reference to HOOK_TOKEN: the variable is not on this worker's secret allow-list") {
			t.Errorf("completion success=%v error=%q, want a failure naming the variable", c.Success, c.Error)
		}
	})

	for _, tt := range []struct {
		name    string
		ex      api.Executor
		payload string
		wantErr string
	}{
		{name: "unlisted variable in a header", ex: api.Executor{Headers: map[string]api.HeaderValue{"X-A": api.SecretEnv("NOT_LISTED")}},
			wantErr: "header X-A: secret reference to NOT_LISTED: the variable is not on this worker's secret allow-list (--secret-env)"},
		{name: "unset variable in the payload", payload: `{"a":{"secret_env":"UNSET_VAR"}}`,
			wantErr: "payload.a: secret reference to UNSET_VAR: the variable is not set in this worker's environment"},
		{name: "value with a control character", ex: api.Executor{Headers: map[string]api.HeaderValue{"X-A": api.SecretEnv("BAD_VALUE")}},
			wantErr: "header X-A: secret BAD_VALUE holds a control character; not sent"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			tg := newTarget(t)
			f := newFakeOrch(t, "a", nil)
			startWorker(t, worker.Config{Orchestrators: worker.StaticOrchestrators(f.URL()), HTTPPolicy: policy, SecretEnv: secrets}, nil)
			tt.ex.Type, tt.ex.URL = "http", tg.url("127.0.0.1", "/")
			f.enqueue(f.assignment("r1", tt.ex, tt.payload))
			c := f.waitComplete(t, "r1")
			if c.Success || c.Error != tt.wantErr {
				t.Errorf("completion success=%v error=%q, want failure %q", c.Success, c.Error, tt.wantErr)
			}
			if n := tg.ln.accepted.Load(); n != 0 {
				t.Errorf("the receiver accepted %d connections, want none", n)
			}
		})
	}

	t.Run("handlers and shell get the resolved payload", func(t *testing.T) {
		f := newFakeOrch(t, "a", nil)
		got := make(chan string, 1)
		startWorker(t, worker.Config{Orchestrators: worker.StaticOrchestrators(f.URL()), SecretEnv: secrets}, func(w *worker.Worker) {
			mustHandle(t, w, "h", func(_ context.Context, r worker.Run) error { got <- string(r.Payload); return nil })
		})
		f.enqueue(f.assignment("r1", handlerExec("h"), `{"t":{"secret_env":"HOOK_TOKEN"}}`))
		if p := recv(t, got, "the handler's payload"); p != `{"t":"Bearer hook-s3cret"}` {
			t.Errorf("payload %s, want the resolved secret", p)
		}
	})
}

// TestHeadersDifferingInCaseAreSentInNameOrder: a job stored before such
// headers were refused sends the value of the last name in byte order,
// every time, not one chosen by map order.
func TestHeadersDifferingInCaseAreSentInNameOrder(t *testing.T) {
	policy := egress.Policy{Allow: []string{"127.0.0.1"}}
	tg := newTarget(t)
	f := newFakeOrch(t, "a", nil)
	startWorker(t, worker.Config{Orchestrators: worker.StaticOrchestrators(f.URL()), HTTPPolicy: policy}, nil)
	ex := api.Executor{Type: "http", URL: tg.url("127.0.0.1", "/"), Headers: map[string]api.HeaderValue{
		"X-A": api.Literal("upper"), "x-a": api.Literal("lower"), "X-a": api.Literal("mixed")}}
	const runs = 20
	for i := range runs {
		f.enqueue(f.assignment(fmt.Sprint("r", i), ex, ""))
	}
	for i := range runs {
		if c := f.waitComplete(t, fmt.Sprint("r", i)); !c.Success {
			t.Fatalf("completion %q, want success", c.Error)
		}
	}
	for i, r := range tg.got() {
		if v := r.header.Values("X-A"); len(v) != 1 || v[0] != "lower" {
			t.Fatalf("request %d: X-A %q, want only \"lower\" (the last of X-A, X-a, x-a)", i, v)
		}
	}
}
