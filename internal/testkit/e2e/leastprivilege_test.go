package e2e_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	jfapi "github.com/jobfleet/jobfleet/api"
	"github.com/jobfleet/jobfleet/egress"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"

	"github.com/jobfleet/jobfleet/dispatch/worker"
	"github.com/jobfleet/jobfleet/internal/testkit/fleettest"
)

// TestWorkersLeastPrivilege runs jobs aimed at the fleet itself, a real
// orchestrator's drain endpoint and a real etcd's key-value API, on a
// worker that allows loopback (as `jobfleet dev` does): they fail with an
// error naming the address and the rule, the member keeps running and
// etcd gets no key. A job using secret references gets the secrets from
// the worker's environment; they are never stored in etcd nor returned by
// the API.
func TestWorkersLeastPrivilege(t *testing.T) {
	const hookToken, apiKey = "Bearer e2e-hook-s3cret", "e2e-api-s3cret"
	t.Setenv("E2E_HOOK_TOKEN", hookToken)
	t.Setenv("E2E_API_KEY", apiKey)

	f := fleettest.New(t, etcd, fleettest.Options{Partitions: 4, Scheduler: true, Quiet: true})
	f.Join("m1")
	f.WaitSettled(15 * time.Second)
	base := f.URLs()[0]

	var (
		mu   sync.Mutex
		seen []*http.Request
		body []string
	)
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		seen = append(seen, r)
		body = append(body, string(b))
		mu.Unlock()
		io.WriteString(w, "thanks")
	}))
	defer hook.Close()

	ctx, cancel := context.WithCancel(context.Background())
	w, err := worker.New(worker.Config{
		ID: "w1", Orchestrators: worker.StaticOrchestrators(base), ServeHTTP: true, PollWait: time.Second, Token: f.WorkerToken,
		HTTPPolicy: egress.Policy{Allow: []string{"127.0.0.0/8"}, Fleet: etcd.Endpoints()},
		SecretEnv:  []string{"E2E_HOOK_TOKEN", "E2E_API_KEY"},
		Logger:     zaptest.NewLogger(t, zaptest.Level(zap.WarnLevel)),
	})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { defer close(done); w.Run(ctx) }()
	defer func() { cancel(); <-done }()

	put := base64.StdEncoding.EncodeToString([]byte("pwned"))
	jobs := []jfapi.Job{
		{ID: "drain", Executor: jfapi.Executor{Type: "http", URL: base + "/v1/cluster/drain"}},
		{ID: "etcd-range", Executor: jfapi.Executor{Type: "http", URL: etcd.Endpoints()[0] + "/v3/kv/range",
			Body: json.RawMessage(`{"key":"AA==","range_end":"AA=="}`)}},
		{ID: "etcd-put", Executor: jfapi.Executor{Type: "http", URL: etcd.Endpoints()[0] + "/v3/kv/put",
			Body: json.RawMessage(`{"key":"` + put + `","value":"` + put + `"}`)}},
		{ID: "secret", Executor: jfapi.Executor{Type: "http", URL: hook.URL + "/hook",
			Headers: map[string]jfapi.HeaderValue{"Authorization": jfapi.SecretEnv("E2E_HOOK_TOKEN")}},
			Payload: json.RawMessage(`{"key":{"secret_env":"E2E_API_KEY"}}`)},
	}
	final := finalRuns(t, f, base, jobs)

	for id, want := range map[string]string{
		"drain":      "destination " + strings.TrimPrefix(base, "http://") + " refused: orchestrator " + base,
		"etcd-range": "refused: fleet endpoint " + etcd.Endpoints()[0],
		"etcd-put":   "refused: fleet endpoint " + etcd.Endpoints()[0],
	} {
		r := final[id]
		if r.Status != jfapi.RunDead || len(r.Attempts) != 1 || !strings.Contains(r.Attempts[0].Error, want) {
			t.Errorf("job %s: run %s %+v, want dead with an error containing %q", id, r.Status, r.Attempts, want)
		}
	}
	if !slices.Contains(f.Live(), "m1") {
		t.Errorf("live members %v: the member was drained", f.Live())
	}
	if code := api(t, f.AdminToken, "GET", base, "/readyz", nil, nil); code != http.StatusOK {
		t.Errorf("GET /readyz: %d, want 200 (still serving)", code)
	}
	client := etcd.Client(t)
	if resp, err := client.Get(context.Background(), "pwned"); err != nil || resp.Count != 0 {
		t.Errorf("etcd key written by a job: %v, %v", resp, err)
	}

	if r := final["secret"]; r.Status != jfapi.RunSucceeded {
		t.Fatalf("secret job: %s %+v, want succeeded", r.Status, r.Attempts)
	}
	mu.Lock()
	if len(seen) != 1 || seen[0].Header.Get("Authorization") != hookToken || body[0] != `{"key":"`+apiKey+`"}` {
		t.Errorf("receiver got %d requests (first: %v %q), want one with the resolved secrets", len(seen), seen[0].Header, body)
	}
	mu.Unlock()

	// Nowhere in etcd, nowhere in the API's replies.
	all, err := client.Get(context.Background(), "", clientv3.WithPrefix())
	if err != nil {
		t.Fatal(err)
	}
	for _, kv := range all.Kvs {
		if strings.Contains(string(kv.Value), "s3cret") {
			t.Errorf("etcd key %s holds a resolved secret: %s", kv.Key, kv.Value)
		}
	}
	for _, path := range []string{"/v1/jobs/secret", "/v1/jobs/secret/runs", "/v1/jobs", "/v1/runs/" + url.PathEscape(final["secret"].ID)} {
		var raw json.RawMessage
		if code := api(t, f.AdminToken, "GET", base, path, nil, &raw); code != http.StatusOK {
			t.Fatalf("GET %s: %d", path, code)
		}
		if strings.Contains(string(raw), "s3cret") {
			t.Errorf("GET %s returned a resolved secret: %s", path, raw)
		}
	}
	// An orchestrator refuses a worker ID with a control character.
	var refusal struct{ Error string }
	if code := api(t, f.WorkerToken, "POST", base, jfapi.PathPoll, jfapi.PollRequest{Worker: "evil\x1b]0;title\x07", Executors: []string{"http"}, Max: 1}, &refusal); code != http.StatusBadRequest ||
		!strings.Contains(refusal.Error, "worker: control character U+001B") {
		t.Errorf("poll with ESC in the worker ID: %d %q, want 400 naming the field", code, refusal.Error)
	}

	var got jfapi.Job
	api(t, f.AdminToken, "GET", base, "/v1/jobs/secret", nil, &got)
	var payload bytes.Buffer
	json.Compact(&payload, got.Payload)
	if got.Executor.Headers["Authorization"] != jfapi.SecretEnv("E2E_HOOK_TOKEN") || payload.String() != `{"key":{"secret_env":"E2E_API_KEY"}}` {
		t.Errorf("GET /v1/jobs/secret: headers %v payload %s, want the references as stored", got.Executor.Headers, got.Payload)
	}
}
