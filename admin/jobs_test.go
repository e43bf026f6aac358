package admin_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest"
	"go.uber.org/zap/zaptest/observer"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/jobfleet/jobfleet/admin"
	"github.com/jobfleet/jobfleet/api"
	"github.com/jobfleet/jobfleet/internal/testkit/admintest"
	"github.com/jobfleet/jobfleet/internal/testkit/etcdtest"
	"github.com/jobfleet/jobfleet/store"
)

// etcd is the embedded etcd the job tests share, each in its own namespace.
var etcd *etcdtest.Server

func TestMain(m *testing.M) { os.Exit(etcdtest.Main(m, &etcd)) }

// testPartitions is P of the tests' stores.
const testPartitions = 16

// jobsEnv is an API server over a real etcd store in a fresh namespace.
type jobsEnv struct {
	t      *testing.T
	client *clientv3.Client
	ns     string
	store  *store.Etcd
	srv    *httptest.Server
}

func newJobsEnv(t *testing.T) *jobsEnv {
	t.Helper()
	return newConfiguredEnv(t, nil, nil)
}

// newConfiguredEnv is newJobsEnv with the store's clock now (nil: the
// real one) and the API's configuration edited by configure (nil: none).
func newConfiguredEnv(t *testing.T, now func() time.Time, configure func(*admin.Config)) *jobsEnv {
	t.Helper()
	client := etcd.Client(t)
	ns := etcdtest.Namespace(t)
	s := store.NewEtcd(client, ns, testPartitions, api.DefaultLimits(), now)
	return newEnvWith(t, client, ns, s, s, configure)
}

// newEnvWith is newJobsEnv serving jobs (nil: a member that has not
// joined the cluster yet), the API's configuration edited by configure
// (nil: none).
func newEnvWith(t *testing.T, client *clientv3.Client, ns string, s *store.Etcd, jobs admin.JobStore, configure func(*admin.Config)) *jobsEnv {
	t.Helper()
	cfg := admin.Config{
		Gatherer: prometheus.NewRegistry(),
		Logger:   zaptest.NewLogger(t),
		Limits:   admin.Limits{Rate: -1}, // these tests make many requests fast
	}
	if configure != nil {
		configure(&cfg)
	}
	h := admin.Handler(admintest.Member{Jobs: jobs, Auth: testAuth}, cfg)
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return &jobsEnv{t: t, client: client, ns: ns, store: s, srv: srv}
}

// do sends a request with an escaped path (and query) and returns the
// status and body.
func (e *jobsEnv) do(method, path string, body []byte) (int, []byte) {
	e.t.Helper()
	return send(e.t, e.srv, adminToken, method, path, body)
}

// send sends srv the request method path (escaped, with its query) as the
// holder of token, with body as JSON (no body if nil), and returns the
// status and body of the reply; it fails t where there is none.
func send(t *testing.T, srv *httptest.Server, token, method, path string, body []byte) (int, []byte) {
	t.Helper()
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequest(method, srv.URL+path, rd)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	req.Header.Set("Authorization", "Bearer "+token)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := srv.Client().Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("%s %s: read reply: %v", method, path, err)
	}
	return resp.StatusCode, data
}

// doJSON is do with a string body that must get status want; the reply is
// decoded into out if not nil.
func (e *jobsEnv) doJSON(method, path, body string, want int, out any) {
	e.t.Helper()
	var b []byte
	if body != "" {
		b = []byte(body)
	}
	code, data := e.do(method, path, b)
	if code != want {
		e.t.Fatalf("%s %s: got status %d, want %d; body %s", method, path, code, want, data)
	}
	if out != nil {
		if err := json.Unmarshal(data, out); err != nil {
			e.t.Fatalf("%s %s: decode %s: %v", method, path, data, err)
		}
	}
}

// keys returns the number of keys in the test's namespace.
func (e *jobsEnv) keys() int64 {
	e.t.Helper()
	resp, err := e.client.Get(context.Background(), e.ns, clientv3.WithPrefix(), clientv3.WithCountOnly())
	if err != nil {
		e.t.Fatalf("count keys: %v", err)
	}
	return resp.Count
}

// errorMessage checks that body is exactly {"error": "..."} and returns
// the message.
func errorMessage(t *testing.T, body []byte) string {
	t.Helper()
	var doc map[string]any
	if err := json.Unmarshal(body, &doc); err != nil {
		t.Fatalf("error body %q is not JSON: %v", body, err)
	}
	msg, ok := doc["error"].(string)
	if !ok || len(doc) != 1 || msg == "" {
		t.Fatalf("got error body %s, want {\"error\": \"...\"}", body)
	}
	return msg
}

// refusal is a request the API must refuse: PUT body to path (GET where
// body is ""), answered with code and an error message containing field.
type refusal struct {
	path, body, field string
	code              int
}

// expectRefused sends each of cases and checks its refusal, then that the
// store holds as many keys as before them.
func (e *jobsEnv) expectRefused(cases []refusal) {
	e.t.Helper()
	before := e.keys()
	for _, tc := range cases {
		method := "PUT"
		var body []byte
		if tc.body == "" {
			method = "GET"
		} else {
			body = []byte(tc.body)
		}
		code, reply := e.do(method, tc.path, body)
		if msg := errorMessage(e.t, reply); code != tc.code || !strings.Contains(msg, tc.field) {
			e.t.Errorf("%s %.60s %.60s: got %d %q, want %d naming %s", method, tc.path, tc.body, code, msg, tc.code, tc.field)
		}
	}
	if after := e.keys(); after != before {
		e.t.Errorf("bad input changed the store: %d keys, then %d", before, after)
	}
}

func jobPath(id string, sub ...string) string {
	return strings.Join(append([]string{"/v1/jobs/" + url.PathEscape(id)}, sub...), "/")
}

// httpJob returns a valid job document with the given ID and extra fields
// (a JSON object's members, without braces, or "").
func httpJob(id, extra string) string {
	doc := `{"id": ` + quote(id) + `, "executor": {"type": "http", "url": "http://127.0.0.1:9000/hook"}`
	if extra != "" {
		doc += ", " + extra
	}
	return doc + "}"
}

func quote(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

func TestJobsRejectBadInput(t *testing.T) {
	e := newJobsEnv(t)
	e.doJSON("POST", "/v1/jobs", httpJob("existing", ""), http.StatusCreated, nil)
	var existing api.Job
	e.doJSON("GET", jobPath("existing"), "", http.StatusOK, &existing)

	big := strings.Repeat("x", 300<<10)
	tests := []struct {
		name   string
		method string
		path   string
		body   string
		// wantCode is the status; wantMsg starts the error message (a field
		// name and colon for invalid fields).
		wantCode int
		wantMsg  string
	}{
		{"unknown field", "POST", "/v1/jobs", httpJob("a", `"colour": "red"`), 400, "colour: unknown field"},
		{"field in wrong case", "POST", "/v1/jobs", `{"ID": "a", "executor": {"type": "http", "url": "http://h/"}}`, 400, "ID: unknown field"},
		{"unknown executor field", "POST", "/v1/jobs", `{"id": "a", "executor": {"type": "http", "url": "http://h/", "verb": "GET"}}`, 400, "executor.verb: unknown field"},
		{"field given twice", "POST", "/v1/jobs", `{"id": "a", "id": "b", "executor": {"type": "http", "url": "http://h/"}}`, 400, `invalid job: duplicate key "id"`},
		{"header given twice", "POST", "/v1/jobs", `{"id": "a", "executor": {"type": "http", "url": "http://h/", "headers": {"X-A": "1", "X-A": "2"}}}`, 400, `executor.headers: duplicate key "X-A"`},
		{"notify header given twice", "POST", "/v1/jobs", `{"id": "a", "executor": {"type": "http", "url": "http://h/"}, "notify": [{"on": ["dead"], "url": "http://h/"}, {"on": ["dead"], "url": "http://h/", "headers": {"X-A": "1", "X-A": "2"}}]}`, 400, `notify[1].headers: duplicate key "X-A"`},
		{"payload key given twice", "POST", "/v1/jobs", httpJob("a", `"payload": {"a": {"b": 1, "b": 2}}`), 400, `payload.a: duplicate key "b"`},
		{"secret reference key given twice", "POST", "/v1/jobs", httpJob("a", `"payload": {"t": {"secret_env": "A", "secret_env": "B"}}`), 400, `payload.t: duplicate key "secret_env"`},
		{"second document after the job", "POST", "/v1/jobs", httpJob("a", "") + ` {"id": "b"}`, 400, "invalid job: unexpected data after the document"},
		{"unknown notify field", "POST", "/v1/jobs", httpJob("a", `"notify": [{"on": ["dead"], "url": "http://h/", "header": {}}]`), 400, "notify[0].header: unknown field"},
		{"invalid cron", "POST", "/v1/jobs", httpJob("a", `"schedule": "61 * * * *"`), 400, "schedule:"},
		{"cron of wrong arity", "POST", "/v1/jobs", httpJob("a", `"schedule": "* * *"`), 400, "schedule:"},
		{"impossible schedule", "POST", "/v1/jobs", httpJob("a", `"schedule": "0 0 30 2 *"`), 400, "schedule:"},
		{"bad time zone", "POST", "/v1/jobs", httpJob("a", `"schedule": "0 2 * * *", "timezone": "Mars/Olympus"`), 400, "timezone:"},
		{"negative timeout", "POST", "/v1/jobs", httpJob("a", `"timeout": "-5s"`), 400, "timeout:"},
		{"absurd timeout", "POST", "/v1/jobs", httpJob("a", `"timeout": "1000h"`), 400, "timeout:"},
		{"absurd backoff", "POST", "/v1/jobs", httpJob("a", `"retry": {"max_attempts": 3, "max_backoff": "48h"}`), 400, "retry.max_backoff:"},
		{"negative backoff", "POST", "/v1/jobs", httpJob("a", `"retry": {"initial_backoff": "-1s"}`), 400, "retry.initial_backoff:"},
		{"absurd attempts", "POST", "/v1/jobs", httpJob("a", `"retry": {"max_attempts": 1000000}`), 400, "retry.max_attempts:"},
		{"duration as a number", "POST", "/v1/jobs", httpJob("a", `"timeout": 30`), 400, "timeout:"},
		{"empty ID", "POST", "/v1/jobs", httpJob("", ""), 400, "id: required"},
		{"missing ID", "POST", "/v1/jobs", `{"executor": {"type": "http", "url": "http://h/"}}`, 400, "id: required"},
		{"oversized ID", "POST", "/v1/jobs", httpJob(strings.Repeat("é", 101), ""), 400, "id:"},
		{"control character in ID", "POST", "/v1/jobs", httpJob("a\tb", ""), 400, "id:"},
		{"reserved ID", "PUT", "/v1/jobs/%2E%2E", `{"executor": {"type": "http", "url": "http://h/"}}`, 400, "id:"},
		{"schedule and run_at", "POST", "/v1/jobs", httpJob("a", `"schedule": "@hourly", "run_at": "2030-01-01T00:00:00Z"`), 400, "run_at:"},
		{"bad run_at", "POST", "/v1/jobs", httpJob("a", `"run_at": "tomorrow"`), 400, "run_at:"},
		{"oversized payload", "POST", "/v1/jobs", httpJob("a", `"payload": `+quote(big)), 400, "payload:"},
		{"oversized body", "POST", "/v1/jobs", httpJob("a", `"payload": `+quote(strings.Repeat("x", 2<<20))), 413, "request body is larger than"},
		{"oversized body on PUT", "PUT", jobPath("a"), httpJob("a", `"payload": `+quote(strings.Repeat("x", 2<<20))), 413, "request body is larger than"},
		{"malformed JSON", "POST", "/v1/jobs", `{"id": "a", "executor": `, 400, "executor: the document ends before this value does"},
		{"not an object", "POST", "/v1/jobs", `["a"]`, 400, "invalid job"},
		{"empty body", "POST", "/v1/jobs", ``, 400, "invalid job"},
		{"trailing data", "POST", "/v1/jobs", httpJob("a", "") + ` {}`, 400, "invalid job"},
		{"ID of wrong type", "POST", "/v1/jobs", `{"id": 5, "executor": {"type": "http", "url": "http://h/"}}`, 400, "id:"},
		{"paused of wrong type", "POST", "/v1/jobs", httpJob("a", `"paused": "yes"`), 400, "paused:"},
		{"attempts of wrong type", "POST", "/v1/jobs", httpJob("a", `"retry": {"max_attempts": "3"}`), 400, "retry.max_attempts:"},
		{"missing executor", "POST", "/v1/jobs", `{"id": "a"}`, 400, "executor.type:"},
		{"bad executor URL", "POST", "/v1/jobs", `{"id": "a", "executor": {"type": "http", "url": "ftp://h/"}}`, 400, "executor.url:"},
		{"shell field on http executor", "POST", "/v1/jobs", `{"id": "a", "executor": {"type": "http", "url": "http://h/", "command": ["ls"]}}`, 400, "executor.command:"},
		{"bad policy", "POST", "/v1/jobs", httpJob("a", `"misfire_policy": "sometimes"`), 400, "misfire_policy:"},
		{"payload nested 9999 deep", "POST", "/v1/jobs", httpJob("a", `"payload": `+strings.Repeat("[", 9999)+strings.Repeat("]", 9999)), 400, "payload: nested more than 64 levels deep"},
		{"ID with byte 0xFF", "POST", "/v1/jobs", "{\"id\": \"exist\xffing\", \"executor\": {\"type\": \"http\", \"url\": \"http://h/\"}}", 400, "id: byte 0xFF is not valid UTF-8"},
		{"payload with byte 0xFF", "POST", "/v1/jobs", httpJob("a", "\"payload\": {\"s\": \"\xff\"}"), 400, "payload.s: byte 0xFF is not valid UTF-8"},
		{"path ID with byte 0xFF", "PUT", "/v1/jobs/a%FF", `{"executor": {"type": "http", "url": "http://h/"}}`, 400, "id: not valid UTF-8"},
		{"ID in NFD", "POST", "/v1/jobs", httpJob("cafe\u0301", ""), 400, "id: \"cafe\u0301\" is not in Unicode normalization form C (NFC); send it as \"caf\u00e9\""},
		{"ID with surrounding blanks", "POST", "/v1/jobs", httpJob("  spaced  ", ""), 400, "id: \"  spaced  \" has leading or trailing white space"},
		{"ID of one blank", "PUT", jobPath(" "), `{"executor": {"type": "http", "url": "http://h/"}}`, 400, "id:"},
		{"ID with zero-width space", "POST", "/v1/jobs", httpJob("exist\u200bing", ""), 400, "id: invisible format character U+200B"},
		{"ID with right-to-left override", "POST", "/v1/jobs", httpJob("a\u202eb", ""), 400, "id: invisible format character U+202E"},
		{"ID with byte order mark", "POST", "/v1/jobs", httpJob("\ufeffexisting", ""), 400, "id: invisible format character U+FEFF"},
		{"ID with a cyrillic look-alike", "POST", "/v1/jobs", httpJob("\u0435xisting", ""), 400, "id: the word \"еxisting\" mixes the Cyrillic and Latin scripts"},
		{"URL of 900 KB", "POST", "/v1/jobs", `{"id": "a", "executor": {"type": "http", "url": "http://h/` + strings.Repeat("u", 900<<10) + `"}}`, 400, "executor.url: 921609 bytes long; want at most 8192"},
		{"10000 headers", "POST", "/v1/jobs", `{"id": "a", "executor": {"type": "http", "url": "http://h/", "headers": {` + manyHeaders(10000) + `}}}`, 400, "executor.headers: 10000 headers; want at most 64"},
		{"header value of 200 KB", "POST", "/v1/jobs", `{"id": "a", "executor": {"type": "http", "url": "http://h/", "headers": {"X-A": "` + strings.Repeat("v", 200<<10) + `"}}}`, 400, "executor.headers[X-A]: value of 204800 bytes; want at most 8192"},
		{"100000 shell arguments", "POST", "/v1/jobs", `{"id": "a", "executor": {"type": "shell", "command": ["echo"` + strings.Repeat(`,"a"`, 100000) + `]}}`, 400, "executor.command: 100001 words; want at most 1024"},
		{"type Shell", "POST", "/v1/jobs", `{"id": "a", "executor": {"type": "Shell", "command": ["true"]}}`, 400, `executor.type: unknown type "Shell"; did you mean "shell"?`},
		{"type HTTP", "POST", "/v1/jobs", `{"id": "a", "executor": {"type": "HTTP", "url": "http://h/"}}`, 400, `executor.type: unknown type "HTTP"; did you mean "http"`},
		{"run_at in year 0", "POST", "/v1/jobs", httpJob("a", `"run_at": "0000-01-01T00:00:00Z"`), 400, "run_at: 0000-01-01T00:00:00Z is before 1970-01-01T00:00:00Z"},
		{"run_at in year 3000", "POST", "/v1/jobs", httpJob("a", `"run_at": "3000-01-01T00:00:00Z"`), 400, "run_at: 3000-01-01T00:00:00Z is more than 100 years ahead"},
		{"oversized path ID", "GET", jobPath(strings.Repeat("i", 300<<10)), "", 400, "id: 307200 bytes long; no job ID is longer than 200"},
		{"oversized path ID on PUT", "PUT", jobPath(strings.Repeat("i", 300<<10)), httpJob("a", ""), 400, "id: 307200 bytes long"},
		{"oversized path ID on DELETE", "DELETE", jobPath(strings.Repeat("i", 300<<10)), "", 400, "id: 307200 bytes long"},
		{"oversized path ID on trigger", "POST", jobPath(strings.Repeat("i", 300<<10), "trigger"), "", 400, "id: 307200 bytes long"},
		{"oversized path ID on runs", "GET", jobPath(strings.Repeat("i", 300<<10), "runs"), "", 400, "id: 307200 bytes long"},
		{"run ID without @", "GET", "/v1/runs/nosuch", "", 400, `run_id: "nosuch" is not a run ID: want <escaped job ID>@<scheduled time>, as the job's runs list them (no '@')`},
		{"run ID without a job", "GET", "/v1/runs/@2026-01-01T00:00:00.000Z", "", 400, `run_id: "@2026-01-01T00:00:00.000Z" is not a run ID: want <escaped job ID>@<scheduled time>, as the job's runs list them (no job ID before the '@')`},
		{"run ID with a bad time", "GET", "/v1/runs/j@yesterday", "", 400, `run_id: "j@yesterday" is not a run ID: want <escaped job ID>@<scheduled time>, as the job's runs list them ("yesterday" after the '@' is not a time like 2026-01-02T15:04:05.000Z)`},
		{"oversized run ID", "GET", "/v1/runs/" + strings.Repeat("r", 300<<10) + "@2026-01-01T00:00:00.000Z", "", 400, "run_id: 307225 bytes long; no run ID is longer than 625"},
		{"oversized cursor", "GET", "/v1/jobs?cursor=" + strings.Repeat("c", 300<<10), "", 400, "cursor: 307200 bytes long"},
		{"negative revision", "PUT", jobPath("existing"), httpJob("existing", `"paused": true, "revision": -1`), 400, "revision: -1 is negative"},
		{"negative revision in a create", "POST", "/v1/jobs", httpJob("a", `"revision": -5`), 400, "revision: -5 is negative"},
		{"timeout 0s", "POST", "/v1/jobs", httpJob("a", `"timeout": "0s"`), 400, "timeout: 0s is not a timeout"},
		{"timeout 1ns", "POST", "/v1/jobs", httpJob("a", `"timeout": "1ns"`), 400, "timeout: 1ns is shorter than the minimum of 1s"},
		{"max_attempts 0", "POST", "/v1/jobs", httpJob("a", `"retry": {"max_attempts": 0}`), 400, "retry.max_attempts: 0 attempts would never run the job"},
		{"right/ time zone", "POST", "/v1/jobs", httpJob("a", `"schedule": "@daily", "timezone": "right/UTC"`), 400, `timezone: unknown time zone "right/UTC"`},
		{"posixrules", "POST", "/v1/jobs", httpJob("a", `"schedule": "@daily", "timezone": "posixrules"`), 400, `timezone: unknown time zone "posixrules"`},
		{"Factory zone", "POST", "/v1/jobs", httpJob("a", `"schedule": "@daily", "timezone": "Factory"`), 400, `timezone: unknown time zone "Factory"`},
		{"doubled slash in a zone", "POST", "/v1/jobs", httpJob("a", `"schedule": "@daily", "timezone": "Europe//Berlin"`), 400, `timezone: unknown time zone "Europe//Berlin"`},
		{"ID with a hangul filler", "POST", "/v1/jobs", httpJob("existing\u3164", ""), 400, "id: invisible character U+3164"},
		{"ID with a braille blank", "POST", "/v1/jobs", httpJob("existing\u2800", ""), 400, "id: invisible character U+2800"},
		{"ID with a variation selector", "POST", "/v1/jobs", httpJob("existing\ufe0f", ""), 400, "id: variation selector U+FE0F"},
		{"ID of a lone combining mark", "POST", "/v1/jobs", httpJob("\u0301", ""), 400, "id: combining mark U+0301 at the start"},
		{"ID in fullwidth latin", "POST", "/v1/jobs", httpJob("\uff45\uff58\uff49\uff53\uff54\uff49\uff4e\uff47", ""), 400, "id: \"ｅｘｉｓｔｉｎｇ\" holds compatibility characters"},
		{"ID in mathematical bold", "POST", "/v1/jobs", httpJob("\U0001d41e\U0001d431\U0001d422\U0001d42c\U0001d42d", ""), 400, "id:"},
		{"URL port 0", "POST", "/v1/jobs", `{"id": "a", "executor": {"type": "http", "url": "http://127.0.0.1:0/hook"}}`, 400, "executor.url: \"http://127.0.0.1:0/hook\": port 0 is out of range"},
		{"URL port 99999", "POST", "/v1/jobs", `{"id": "a", "executor": {"type": "http", "url": "http://127.0.0.1:99999/hook"}}`, 400, "executor.url:"},
		{"notify URL port 0", "POST", "/v1/jobs", httpJob("a", `"notify": [{"on": ["dead"], "url": "http://h:0/"}]`), 400, "notify[0].url:"},
		{"headers differing in case", "POST", "/v1/jobs", `{"id": "a", "executor": {"type": "http", "url": "http://h/", "headers": {"X-A": "1", "x-a": "2"}}}`, 400, `executor.headers: duplicate key "x-a"`},
		{"stale revision", "PUT", jobPath("existing"), httpJob("existing", `"paused": true, "revision": 1`), 409, `job "existing": stale revision: the document names revision 1, but the job is at revision`},
		{"body ID differs from path ID", "PUT", jobPath("a"), httpJob("b", ""), 400, "id:"},
		{"body ID differs from existing path ID", "PUT", jobPath("existing"), httpJob("other", `"paused": true`), 400, "id:"},
		{"invalid replacement", "PUT", jobPath("existing"), httpJob("existing", `"schedule": "0 0 30 2 *"`), 400, "schedule:"},
		{"create over existing", "POST", "/v1/jobs", httpJob("existing", `"paused": true`), 409, `job "existing": already exists`},
		{"limit zero", "GET", "/v1/jobs?limit=0", "", 400, "limit:"},
		{"limit too large", "GET", "/v1/jobs?limit=1001", "", 400, "limit:"},
		{"limit not a number", "GET", "/v1/jobs?limit=ten", "", 400, "limit:"},
		{"runs limit negative", "GET", jobPath("existing", "runs") + "?limit=-1", "", 400, "limit:"},
		{"method not allowed", "PATCH", jobPath("existing"), httpJob("existing", ""), 405, "method PATCH not allowed"},
		{"unknown job endpoint", "POST", jobPath("existing", "explode"), "", 404, "no such endpoint"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := e.keys()
			var body []byte
			if tt.body != "" {
				body = []byte(tt.body)
			}
			code, data := e.do(tt.method, tt.path, body)
			if code != tt.wantCode {
				t.Fatalf("got status %d, want %d; body %s", code, tt.wantCode, data)
			}
			if msg := errorMessage(t, data); !strings.HasPrefix(msg, tt.wantMsg) {
				t.Errorf("got message %q, want it to start with %q", msg, tt.wantMsg)
			}
			if len(data) > 1024 {
				t.Errorf("got a reply of %d bytes, want an error message of at most 1 KiB", len(data))
			}
			if after := e.keys(); after != before {
				t.Errorf("got %d keys after the rejected request, want %d", after, before)
			}
			var list struct{ Jobs []api.Job }
			e.doJSON("GET", "/v1/jobs", "", http.StatusOK, &list)
			if len(list.Jobs) != 1 || list.Jobs[0].ID != "existing" {
				t.Errorf("got jobs %v after the rejected request, want only \"existing\"", jobIDs(list.Jobs))
			}
			var got api.Job
			e.doJSON("GET", jobPath("existing"), "", http.StatusOK, &got)
			if got.Revision != existing.Revision || got.Paused {
				t.Errorf("job \"existing\" changed: got revision %d paused %v, want revision %d not paused", got.Revision, got.Paused, existing.Revision)
			}
		})
	}
}

// manyHeaders returns n distinct JSON members "X-Hi": "v".
func manyHeaders(n int) string {
	parts := make([]string, n)
	for i := range parts {
		parts[i] = fmt.Sprintf(`"X-H%d": "v"`, i)
	}
	return strings.Join(parts, ", ")
}

func jobIDs(jobs []api.Job) []string {
	ids := make([]string, len(jobs))
	for i, j := range jobs {
		ids[i] = j.ID
	}
	return ids
}

func TestJobsCreateGetReplaceDelete(t *testing.T) {
	e := newJobsEnv(t)
	var created api.Job
	e.doJSON("POST", "/v1/jobs", `{
		"id": "nightly-report",
		"schedule": "0 2 * * *",
		"timezone": "Europe/Berlin",
		"executor": {"type": "http", "url": "http://127.0.0.1:9000/hook"},
		"payload": {"any": "json"},
		"retry": {"max_attempts": 3},
		"timeout": "5m"
	}`, http.StatusCreated, &created)
	if got, want := created.Partition, e.store.Partition("nightly-report"); got != want {
		t.Errorf("got partition %d, want %d", got, want)
	}
	if created.CreatedAt.IsZero() || created.Revision == 0 {
		t.Errorf("got created_at %v revision %d, want both set", created.CreatedAt, created.Revision)
	}
	if created.Executor.Method != "POST" || created.MisfirePolicy != api.MisfireRunOnce || created.Timeout != api.Duration(5*time.Minute) {
		t.Errorf("got method %q misfire %q timeout %v, want defaults filled and timeout kept", created.Executor.Method, created.MisfirePolicy, created.Timeout)
	}

	var got api.Job
	e.doJSON("GET", jobPath("nightly-report"), "", http.StatusOK, &got)
	assertSameJob(t, got, created)

	// A GET document can be sent back with PUT: server-set fields are
	// accepted and overwritten.
	doc, _ := json.Marshal(got)
	var replaced api.Job
	e.doJSON("PUT", jobPath("nightly-report"), string(doc), http.StatusOK, &replaced)
	if !replaced.CreatedAt.Equal(created.CreatedAt) || !replaced.UpdatedAt.After(created.UpdatedAt) || replaced.Revision <= created.Revision {
		t.Errorf("replace: got created %v updated %v revision %d; want created kept, updated and revision later than %v, %d",
			replaced.CreatedAt, replaced.UpdatedAt, replaced.Revision, created.UpdatedAt, created.Revision)
	}

	// PUT of a new ID without "id" in the body creates it under the path's ID.
	var put api.Job
	e.doJSON("PUT", jobPath("backup"), `{"schedule": "@every 30s", "executor": {"type": "shell", "command": ["/srv/backup.sh"]}}`, http.StatusCreated, &put)
	if put.ID != "backup" || put.Partition != e.store.Partition("backup") {
		t.Errorf("got id %q partition %d, want \"backup\" partition %d", put.ID, put.Partition, e.store.Partition("backup"))
	}

	e.doJSON("DELETE", jobPath("nightly-report"), "", http.StatusNoContent, nil)
	for _, req := range []struct{ method, path string }{
		{"GET", jobPath("nightly-report")},
		{"DELETE", jobPath("nightly-report")},
		{"POST", jobPath("nightly-report", "pause")},
		{"POST", jobPath("nightly-report", "resume")},
		{"POST", jobPath("nightly-report", "trigger")},
		{"GET", jobPath("nightly-report", "runs")},
	} {
		code, data := e.do(req.method, req.path, nil)
		if code != http.StatusNotFound {
			t.Errorf("%s %s after delete: got status %d, want 404", req.method, req.path, code)
			continue
		}
		if got, want := errorMessage(t, data), `job "nightly-report" not found`; got != want {
			t.Errorf("%s %s: got message %q, want %q", req.method, req.path, got, want)
		}
	}
}

// assertSameJob compares two job documents as JSON.
func assertSameJob(t *testing.T, got, want api.Job) {
	t.Helper()
	got.Status, want.Status = "", "" // read with the state, which write replies do not read
	g, _ := json.Marshal(got)
	w, _ := json.Marshal(want)
	if !bytes.Equal(g, w) {
		t.Errorf("got job\n%s\nwant\n%s", g, w)
	}
}

func TestJobsPauseResume(t *testing.T) {
	e := newJobsEnv(t)
	e.doJSON("POST", "/v1/jobs", httpJob("j", `"schedule": "@hourly"`), http.StatusCreated, nil)
	var j api.Job
	e.doJSON("POST", jobPath("j", "pause"), "", http.StatusOK, &j)
	if !j.Paused {
		t.Errorf("pause: got paused false")
	}
	e.doJSON("GET", jobPath("j"), "", http.StatusOK, &j)
	if !j.Paused {
		t.Errorf("GET after pause: got paused false")
	}
	rev := j.Revision
	e.doJSON("POST", jobPath("j", "pause"), "", http.StatusOK, &j) // idempotent
	if !j.Paused || j.Revision != rev {
		t.Errorf("pause again: got paused %v revision %d, want true and unchanged %d", j.Paused, j.Revision, rev)
	}
	var list api.JobList
	e.doJSON("GET", "/v1/jobs", "", http.StatusOK, &list)
	if len(list.Jobs) != 1 || !list.Jobs[0].Paused || list.Jobs[0].Revision != rev {
		t.Errorf("list after pause: %+v, want the job paused at revision %d", list.Jobs, rev)
	}
	e.doJSON("POST", jobPath("j", "resume"), "", http.StatusOK, &j)
	if j.Paused || j.Revision <= rev {
		t.Errorf("resume: got paused %v revision %d, want false after %d", j.Paused, j.Revision, rev)
	}
	e.doJSON("GET", "/v1/jobs", "", http.StatusOK, &list)
	if len(list.Jobs) != 1 || list.Jobs[0].Paused {
		t.Errorf("list after resume: %+v, want the job not paused", list.Jobs)
	}
}

func TestJobsTrigger(t *testing.T) {
	e := newJobsEnv(t)
	e.doJSON("POST", "/v1/jobs", httpJob("report/daily", ""), http.StatusCreated, nil)
	var tr struct {
		RunID string `json:"run_id"`
	}
	e.doJSON("POST", jobPath("report/daily", "trigger"), "", http.StatusAccepted, &tr)
	id, at, err := store.ParseRunID(tr.RunID)
	if err != nil {
		t.Fatalf("run ID %q: %v", tr.RunID, err)
	}
	if id != "report/daily" || at.IsZero() {
		t.Errorf("run ID %q: got job %q at %v, want \"report/daily\" at a time", tr.RunID, id, at)
	}
	resp, err := e.client.Get(context.Background(), e.store.Keys().TriggerPrefix(e.store.Partition(id), id), clientv3.WithPrefix(), clientv3.WithCountOnly())
	if err != nil {
		t.Fatal(err)
	}
	if resp.Count != 1 {
		t.Errorf("got %d trigger requests stored, want 1", resp.Count)
	}
}

// putRun stores a run document as the partition's owner would.
func putRun(t *testing.T, e *jobsEnv, id string, at time.Time, status api.RunStatus, attempts ...api.Attempt) api.Run {
	t.Helper()
	p := e.store.Partition(id)
	r := api.Run{
		ID: store.RunID(id, at), JobID: id, Partition: p, ScheduledAt: at, FiredAt: at.Add(3 * time.Millisecond),
		Status: status, Attempts: attempts, Owner: "orchestrator-1", Epoch: 7,
	}
	if r.Attempts == nil {
		r.Attempts = []api.Attempt{}
	}
	val, _ := json.Marshal(r)
	if _, err := e.client.Put(context.Background(), e.store.Keys().Run(p, id, at), string(val)); err != nil {
		t.Fatal(err)
	}
	return r
}

func TestJobsRuns(t *testing.T) {
	e := newJobsEnv(t)
	const id = "a/b c"
	e.doJSON("PUT", jobPath(id), httpJob(id, `"schedule": "@hourly"`), http.StatusCreated, nil)

	var rl struct {
		Runs []api.Run `json:"runs"`
	}
	code, data := e.do("GET", jobPath(id, "runs"), nil)
	if code != http.StatusOK || strings.Join(strings.Fields(string(data)), "") != `{"runs":[]}` {
		t.Fatalf("runs of a job without runs: got %d %s, want 200 {\"runs\": []}", code, data)
	}
	code, data = e.do("GET", jobPath("no such job", "runs"), nil)
	if code != http.StatusNotFound {
		t.Fatalf("runs of a missing job: got %d %s, want 404", code, data)
	}

	t0 := time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC)
	old := putRun(t, e, id, t0, api.RunSucceeded, api.Attempt{Attempt: 1, Worker: "w1", StartedAt: t0, FinishedAt: t0.Add(time.Second)})
	newer := putRun(t, e, id, t0.Add(time.Hour), api.RunFailed,
		api.Attempt{Attempt: 1, Worker: "w1", StartedAt: t0.Add(time.Hour), FinishedAt: t0.Add(time.Hour + time.Second), Error: "HTTP 500"})
	putRun(t, e, "a/b", t0, api.RunSucceeded) // a job whose ID is a prefix of the other's

	e.doJSON("GET", jobPath(id, "runs"), "", http.StatusOK, &rl)
	if got := runIDs(rl.Runs); !slices.Equal(got, []string{newer.ID, old.ID}) {
		t.Errorf("got runs %q, want newest first %q", got, []string{newer.ID, old.ID})
	}
	e.doJSON("GET", jobPath(id, "runs")+"?limit=1", "", http.StatusOK, &rl)
	if got := runIDs(rl.Runs); !slices.Equal(got, []string{newer.ID}) {
		t.Errorf("limit=1: got runs %q, want %q", got, []string{newer.ID})
	}

	var run api.Run
	e.doJSON("GET", "/v1/runs/"+url.PathEscape(newer.ID), "", http.StatusOK, &run)
	if run.ID != newer.ID || run.JobID != id || run.Status != api.RunFailed || len(run.Attempts) != 1 || run.Attempts[0].Error != "HTTP 500" {
		t.Errorf("got run %+v, want %+v", run, newer)
	}
	for _, runID := range []string{
		store.RunID(id, t0.Add(2*time.Hour)), // well-formed, not stored; malformed ones get 400 (TestJobsAPIErrors)
	} {
		code, data := e.do("GET", "/v1/runs/"+url.PathEscape(runID), nil)
		if code != http.StatusNotFound {
			t.Errorf("GET run %q: got %d %s, want 404", runID, code, data)
		} else if got, want := errorMessage(t, data), fmt.Sprintf("run %q not found", runID); got != want {
			t.Errorf("GET run %q: got message %q, want %q", runID, got, want)
		}
	}

	// A deleted job's runs stay readable until its owner removes them.
	e.doJSON("DELETE", jobPath(id), "", http.StatusNoContent, nil)
	e.doJSON("GET", jobPath(id, "runs"), "", http.StatusOK, &rl)
	if len(rl.Runs) != 2 {
		t.Errorf("runs of a deleted job: got %d, want 2", len(rl.Runs))
	}
}

func runIDs(runs []api.Run) []string {
	ids := make([]string, len(runs))
	for i, r := range runs {
		ids[i] = r.ID
	}
	return ids
}

func TestJobsListPages(t *testing.T) {
	e := newJobsEnv(t)
	var want []string
	for i := range 7 {
		id := fmt.Sprintf("job-%d", i)
		want = append(want, id)
		e.doJSON("POST", "/v1/jobs", httpJob(id, ""), http.StatusCreated, nil)
	}
	var got []string
	cursor, pages := "", 0
	for {
		var page struct {
			Jobs       []api.Job `json:"jobs"`
			NextCursor *string   `json:"next_cursor"`
		}
		e.doJSON("GET", "/v1/jobs?limit=3&cursor="+url.QueryEscape(cursor), "", http.StatusOK, &page)
		pages++
		if len(page.Jobs) > 3 {
			t.Fatalf("page %d: got %d jobs, want at most 3", pages, len(page.Jobs))
		}
		if page.NextCursor == nil {
			t.Fatalf("page %d: no next_cursor field", pages)
		}
		got = append(got, jobIDs(page.Jobs)...)
		if *page.NextCursor == "" {
			break
		}
		cursor = *page.NextCursor
		if pages > 10 {
			t.Fatal("pagination does not end")
		}
	}
	slices.Sort(got)
	if !slices.Equal(got, want) {
		t.Errorf("got jobs %q over %d pages, want %q", got, pages, want)
	}
	if pages != 3 {
		t.Errorf("got %d pages of 3 for 7 jobs, want 3", pages)
	}

	var all struct {
		Jobs []api.Job `json:"jobs"`
	}
	e.doJSON("GET", "/v1/jobs", "", http.StatusOK, &all)
	if len(all.Jobs) != 7 {
		t.Errorf("default limit: got %d jobs, want 7", len(all.Jobs))
	}

	empty := newJobsEnv(t)
	code, data := empty.do("GET", "/v1/jobs", nil)
	if code != http.StatusOK || strings.Join(strings.Fields(string(data)), "") != `{"jobs":[],"next_cursor":""}` {
		t.Errorf("empty list: got %d %s, want 200 {\"jobs\": [], \"next_cursor\": \"\"}", code, data)
	}
}

// TestJobIDsRoundTrip addresses jobs whose IDs need escaping in a URL path
// through every endpoint.
func TestJobIDsRoundTrip(t *testing.T) {
	e := newJobsEnv(t)
	ids := []string{"a b", "a/b", "100%", "ünïcødé", "x?y#z", "a+b", "a/b/runs", "%2F", "trailing/", "/leading", "a//b", "..a", "日本語 ジョブ", "semi;colon&amp=1"}
	for _, id := range ids {
		t.Run(id, func(t *testing.T) {
			var j api.Job
			e.doJSON("PUT", jobPath(id), httpJob(id, ""), http.StatusCreated, &j)
			if j.ID != id {
				t.Fatalf("PUT: got id %q, want %q", j.ID, id)
			}
			e.doJSON("GET", jobPath(id), "", http.StatusOK, &j)
			if j.ID != id || j.Partition != e.store.Partition(id) {
				t.Errorf("GET: got id %q partition %d, want %q partition %d", j.ID, j.Partition, id, e.store.Partition(id))
			}
			e.doJSON("PUT", jobPath(id), `{"executor": {"type": "handler.x"}}`, http.StatusOK, &j)
			if j.ID != id || j.Executor.Type != "handler.x" {
				t.Errorf("PUT without id: got id %q executor %q, want %q handler.x", j.ID, j.Executor.Type, id)
			}
			e.doJSON("POST", jobPath(id, "pause"), "", http.StatusOK, &j)
			if j.ID != id || !j.Paused {
				t.Errorf("pause: got id %q paused %v", j.ID, j.Paused)
			}
			e.doJSON("POST", jobPath(id, "resume"), "", http.StatusOK, &j)
			var tr struct {
				RunID string `json:"run_id"`
			}
			e.doJSON("POST", jobPath(id, "trigger"), "", http.StatusAccepted, &tr)
			if got, _, err := store.ParseRunID(tr.RunID); err != nil || got != id {
				t.Errorf("trigger: run ID %q names job %q (%v), want %q", tr.RunID, got, err, id)
			}
			at := time.Date(2026, 5, 1, 0, 0, 0, 0, time.UTC)
			run := putRun(t, e, id, at, api.RunSucceeded)
			var rl struct {
				Runs []api.Run `json:"runs"`
			}
			e.doJSON("GET", jobPath(id, "runs"), "", http.StatusOK, &rl)
			if len(rl.Runs) != 1 || rl.Runs[0].JobID != id {
				t.Errorf("runs: got %+v, want one run of %q", rl.Runs, id)
			}
			var r api.Run
			e.doJSON("GET", "/v1/runs/"+url.PathEscape(run.ID), "", http.StatusOK, &r)
			if r.JobID != id {
				t.Errorf("GET run %q: got job %q, want %q", run.ID, r.JobID, id)
			}
			e.doJSON("DELETE", jobPath(id), "", http.StatusNoContent, nil)
			code, _ := e.do("GET", jobPath(id), nil)
			if code != http.StatusNotFound {
				t.Errorf("GET after DELETE: got %d, want 404", code)
			}
		})
	}

	// POST takes the ID from the body; the same job is then found by path,
	// and listed with its ID intact.
	for _, id := range ids {
		e.doJSON("POST", "/v1/jobs", httpJob(id, ""), http.StatusCreated, nil)
	}
	var list struct {
		Jobs []api.Job `json:"jobs"`
	}
	e.doJSON("GET", "/v1/jobs?limit=1000", "", http.StatusOK, &list)
	got := jobIDs(list.Jobs)
	slices.Sort(got)
	want := slices.Sorted(slices.Values(ids))
	if !slices.Equal(got, want) {
		t.Errorf("list: got %q, want %q", got, want)
	}
	// An ID with '/' sent unescaped is a different path, not the job.
	code, _ := e.do("GET", "/v1/jobs/a/b", nil)
	if code != http.StatusNotFound {
		t.Errorf("GET /v1/jobs/a/b: got %d, want 404", code)
	}
}

// failingStore is a JobStore whose every call fails with err.
type failingStore struct{ err error }

func (f failingStore) Create(context.Context, api.Job) (api.Job, error) {
	return api.Job{}, f.err
}
func (f failingStore) Put(context.Context, api.Job) (api.Job, bool, error) {
	return api.Job{}, false, f.err
}
func (f failingStore) WriteBatch(context.Context, []store.BatchItem, store.BatchMode) ([]store.BatchResult, error) {
	return nil, f.err
}
func (f failingStore) Get(context.Context, string) (api.Job, error) { return api.Job{}, f.err }
func (f failingStore) ListPrefix(context.Context, string, string, int) ([]api.Job, string, error) {
	return nil, "", f.err
}
func (f failingStore) Delete(context.Context, string) error { return f.err }
func (f failingStore) SetPaused(context.Context, string, bool) (api.Job, error) {
	return api.Job{}, f.err
}
func (f failingStore) Trigger(context.Context, string) (string, error)      { return "", f.err }
func (f failingStore) Runs(context.Context, string, int) ([]api.Run, error) { return nil, f.err }
func (f failingStore) GetRun(context.Context, string) (api.Run, error)      { return api.Run{}, f.err }
func (f failingStore) ListPrefixWhere(context.Context, string, string, int, int, func(api.Job) bool) ([]api.Job, string, error) {
	return nil, "", f.err
}
func (f failingStore) ListFailing(context.Context, store.FailingQuery) ([]api.FailingRun, string, error) {
	return nil, "", f.err
}
func (f failingStore) GetBackfill(context.Context, string) (store.Backfill, int64, error) {
	return store.Backfill{}, 0, f.err
}
func (f failingStore) PutBackfill(context.Context, string, store.Backfill, int64) (int64, error) {
	return 0, f.err
}
func (f failingStore) DeleteBackfill(context.Context, string) error { return f.err }
func (f failingStore) RunTimes(context.Context, string, time.Time, time.Time) (map[int64]bool, error) {
	return nil, f.err
}
func (f failingStore) RequestCancel(context.Context, string, string) (int64, error) { return 0, f.err }
func (f failingStore) AwaitCancel(context.Context, string) (api.Run, bool, error) {
	return api.Run{}, false, f.err
}
func (f failingStore) RequestRetry(context.Context, string, string, string) (int64, error) {
	return 0, f.err
}
func (f failingStore) AwaitRetry(context.Context, string) (api.Run, bool, error) {
	return api.Run{}, false, f.err
}

func TestJobsErrorStatus(t *testing.T) {
	tests := []struct {
		name     string
		err      error
		wantCode int
		wantMsg  string
	}{
		{"etcd full", store.Classify(rpctypes.ErrGRPCNoSpace), http.StatusInsufficientStorage, "store full"},
		{"above the high-water mark", fmt.Errorf("%w: 1.7 GiB of a 2.0 GiB quota", store.ErrHighWater), http.StatusInsufficientStorage, "store nearly full: etcd database above its high-water mark: 1.7 GiB"},
		{"etcd request too large", store.Classify(rpctypes.ErrGRPCRequestTooLarge), http.StatusRequestEntityTooLarge, "invalid job: document too large: etcd refused"},
		{"no leader", store.Classify(rpctypes.ErrGRPCNoLeader), http.StatusServiceUnavailable, "store unavailable"},
		{"deadline", store.Classify(context.DeadlineExceeded), http.StatusServiceUnavailable, "store unavailable"},
		{"cancelled (the member stopping)", store.Classify(fmt.Errorf("put: %w", context.Canceled)), http.StatusServiceUnavailable, "store unavailable"},
		{"cancelled, as gRPC", store.Classify(status.Error(codes.Canceled, "context canceled")), http.StatusServiceUnavailable, "store unavailable"},
		{"cancelled before etcd was asked", fmt.Errorf("reading job: %w", context.Canceled), http.StatusServiceUnavailable, "store unavailable"},
		// What etcd's client returns (rpctypes.EtcdError, no gRPC status)
		// while its cluster elects a leader, stops or is overloaded.
		{"leader changed", store.Classify(rpctypes.ErrLeaderChanged), http.StatusServiceUnavailable, "store unavailable"},
		{"timed out after a leader failure", store.Classify(rpctypes.ErrTimeoutDueToLeaderFail), http.StatusServiceUnavailable, "store unavailable"},
		{"timed out, connection lost", store.Classify(rpctypes.ErrTimeoutDueToConnectionLost), http.StatusServiceUnavailable, "store unavailable"},
		{"server stopped", store.Classify(rpctypes.ErrStopped), http.StatusServiceUnavailable, "store unavailable"},
		{"unhealthy cluster", store.Classify(rpctypes.ErrUnhealthy), http.StatusServiceUnavailable, "store unavailable"},
		{"too many requests", store.Classify(rpctypes.ErrTooManyRequests), http.StatusServiceUnavailable, "store unavailable"},
		{"too many requests, as gRPC", store.Classify(rpctypes.ErrGRPCRequestTooManyRequests), http.StatusServiceUnavailable, "store unavailable"},
		{"no leader, as the client returns it", store.Classify(rpctypes.ErrNoLeader), http.StatusServiceUnavailable, "store unavailable"},
		{"etcd full, as the client returns it", store.Classify(rpctypes.ErrNoSpace), http.StatusInsufficientStorage, "store full"},
		{"request too large, as the client returns it", store.Classify(rpctypes.ErrRequestTooLarge), http.StatusRequestEntityTooLarge, "invalid job: document too large: etcd refused"},
		{"permission denied", store.Classify(rpctypes.ErrPermissionDenied), http.StatusInternalServerError, "internal error (logged by the server)"},
		{"conflict", store.ErrConflict, http.StatusConflict, "concurrent update conflict"},
		{"unknown", errors.New("disk on fire"), http.StatusInternalServerError, "internal error (logged by the server)"},
		{"grpc resource exhausted", store.Classify(status.Error(codes.ResourceExhausted, "grpc: received message larger than max (1048600 vs. 1048576)")),
			http.StatusInternalServerError, "internal error (logged by the server)"},
		{"stale revision", fmt.Errorf("job %q: %w", "j", api.ErrStaleRevision), http.StatusConflict, `job "j": stale revision`},
	}
	requests := []struct{ method, path, body string }{
		{"POST", "/v1/jobs", httpJob("j", "")},
		{"PUT", jobPath("j"), httpJob("j", "")},
		{"GET", "/v1/jobs", ""},
		{"GET", jobPath("j"), ""},
		{"DELETE", jobPath("j"), ""},
		{"POST", jobPath("j", "pause"), ""},
		{"POST", jobPath("j", "resume"), ""},
		{"POST", jobPath("j", "trigger"), ""},
		{"GET", jobPath("j", "runs"), ""},
		{"GET", "/v1/runs/" + url.PathEscape(store.RunID("j", time.Now())), ""},
		{"GET", "/v1/runs", ""},
		{"GET", "/v1/jobs?paused=true", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnvWith(t, nil, "", nil, failingStore{tt.err}, nil)
			for _, req := range requests {
				code, data := e.do(req.method, req.path, []byte(req.body))
				if code != tt.wantCode {
					t.Errorf("%s %s: got status %d, want %d; body %s", req.method, req.path, code, tt.wantCode, data)
					continue
				}
				msg := errorMessage(t, data)
				if !strings.HasPrefix(msg, tt.wantMsg) {
					t.Errorf("%s %s: got message %q, want it to start with %q", req.method, req.path, msg, tt.wantMsg)
				}
				for _, leak := range []string{"rpc error", "etcdserver", "grpc", "ResourceExhausted"} {
					if strings.Contains(msg, leak) {
						t.Errorf("%s %s: message %q carries etcd's or gRPC's text (%q)", req.method, req.path, msg, leak)
					}
				}
			}
		})
	}
}

func TestJobsUnavailableBeforeStart(t *testing.T) {
	e := newEnvWith(t, nil, "", nil, nil, nil)
	for _, path := range []string{"/v1/jobs", jobPath("j"), jobPath("j", "runs"), "/v1/runs/x@y"} {
		code, data := e.do("GET", path, nil)
		if code != http.StatusServiceUnavailable {
			t.Errorf("GET %s: got %d %s, want 503", path, code, data)
			continue
		}
		if got, want := errorMessage(t, data), "jobs are not available on this member yet: it has not joined the cluster yet"; got != want {
			t.Errorf("GET %s: message %q, want %q", path, got, want)
		}
	}
	code, data := e.do("POST", "/v1/jobs", []byte(httpJob("j", "")))
	if code != http.StatusServiceUnavailable {
		t.Errorf("POST /v1/jobs: got %d %s, want 503", code, data)
	}
}

// TestJobsRevision checks that a document naming the revision it was read
// at replaces only that revision: two people editing the same job cannot
// lose one edit silently.
func TestJobsRevision(t *testing.T) {
	e := newJobsEnv(t)
	var read api.Job
	e.doJSON("POST", "/v1/jobs", httpJob("shared", `"schedule": "@hourly"`), http.StatusCreated, &read)

	// Alice and Bob both read revision r; Alice applies her edit first.
	alice, bob := read, read
	alice.Schedule = "@daily"
	bob.Paused = true
	aliceDoc, _ := json.Marshal(alice)
	var stored api.Job
	e.doJSON("PUT", jobPath("shared"), string(aliceDoc), http.StatusOK, &stored)
	if stored.Schedule != "@daily" || stored.Revision <= read.Revision {
		t.Fatalf("Alice's edit: got schedule %q revision %d, want @daily after revision %d", stored.Schedule, stored.Revision, read.Revision)
	}

	bobDoc, _ := json.Marshal(bob)
	code, data := e.do("PUT", jobPath("shared"), bobDoc)
	if code != http.StatusConflict {
		t.Fatalf("Bob's edit of a stale revision: got %d %s, want 409", code, data)
	}
	want := fmt.Sprintf(`job "shared": stale revision: the document names revision %d, but the job is at revision %d`, read.Revision, stored.Revision)
	if msg := errorMessage(t, data); !strings.HasPrefix(msg, want) {
		t.Errorf("Bob's edit: got message %q, want it to start with %q", msg, want)
	}
	var now api.Job
	e.doJSON("GET", jobPath("shared"), "", http.StatusOK, &now)
	if now.Schedule != "@daily" || now.Paused || now.Revision != stored.Revision {
		t.Errorf("after the refused edit: got schedule %q paused %v revision %d, want Alice's job unchanged at %d", now.Schedule, now.Paused, now.Revision, stored.Revision)
	}

	// Bob reads again and applies his edit on the current revision.
	now.Paused = true
	doc, _ := json.Marshal(now)
	e.doJSON("PUT", jobPath("shared"), string(doc), http.StatusOK, &stored)
	if stored.Schedule != "@daily" || !stored.Paused {
		t.Errorf("Bob's edit on the current revision: got schedule %q paused %v, want both edits", stored.Schedule, stored.Paused)
	}

	// A document without a revision replaces whatever is stored.
	e.doJSON("PUT", jobPath("shared"), httpJob("shared", `"schedule": "@weekly"`), http.StatusOK, &stored)
	if stored.Schedule != "@weekly" {
		t.Errorf("unconditional replace: got schedule %q, want @weekly", stored.Schedule)
	}

	// A revision of a job deleted since is refused, not recreated.
	e.doJSON("DELETE", jobPath("shared"), "", http.StatusNoContent, nil)
	code, data = e.do("PUT", jobPath("shared"), doc)
	if code != http.StatusConflict || !strings.Contains(errorMessage(t, data), "the job no longer exists") {
		t.Errorf("PUT of a deleted job's revision: got %d %s, want 409 saying it no longer exists", code, data)
	}
	if code, _ := e.do("GET", jobPath("shared"), nil); code != http.StatusNotFound {
		t.Errorf("GET after the refused PUT: got %d, want 404", code)
	}
}

// unencodableStore serves one job whose payload is not JSON, as a job
// stored before payloads were checked could be.
type unencodableStore struct{ failingStore }

func (unencodableStore) Get(context.Context, string) (api.Job, error) {
	return api.Job{ID: "broken", Payload: json.RawMessage(`{"unterminated": [`)}, nil
}

func (unencodableStore) ListPrefix(context.Context, string, string, int) ([]api.Job, string, error) {
	return []api.Job{{ID: "broken", Payload: json.RawMessage(`{"unterminated": [`)}}, "", nil
}

// TestJobsReplyEncodingFails checks that a reply that cannot be encoded is
// a 500 with a JSON error, never a 200 with an empty or cut body.
func TestJobsReplyEncodingFails(t *testing.T) {
	core, logs := observer.New(zapcore.DebugLevel)
	h := admin.Handler(admintest.Member{Jobs: unencodableStore{}, Auth: testAuth}, admin.Config{
		Gatherer: prometheus.NewRegistry(),
		Logger:   zap.New(core),
	})
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	e := &jobsEnv{t: t, srv: srv}
	for _, path := range []string{jobPath("broken"), "/v1/jobs"} {
		code, data := e.do("GET", path, nil)
		if code != http.StatusInternalServerError {
			t.Errorf("GET %s: got %d %s, want 500", path, code, data)
			continue
		}
		if msg := errorMessage(t, data); !strings.HasPrefix(msg, "internal error") {
			t.Errorf("GET %s: got message %q, want an internal error", path, msg)
		}
	}
	if n := logs.FilterMessage("job reply failed").Len(); n != 2 {
		t.Errorf("got %d \"job reply failed\" log lines, want 2", n)
	}
}

// TestJobsLargeReplyNotIndented checks that indentation cannot multiply the
// size of a reply: a payload nested as deep as allowed, with many
// elements, comes back at most a few times its stored size.
func TestJobsLargeReplyNotIndented(t *testing.T) {
	e := newJobsEnv(t)
	deep := strings.Repeat("[", api.MaxJSONDepth-1) + strings.TrimSuffix(strings.Repeat("0,", 100000), ",") + strings.Repeat("]", api.MaxJSONDepth-1)
	e.doJSON("PUT", jobPath("deep"), httpJob("deep", `"payload": `+deep), http.StatusCreated, nil)
	code, data := e.do("GET", jobPath("deep"), nil)
	if code != http.StatusOK {
		t.Fatalf("GET: got %d", code)
	}
	if limit := 4*len(deep) + 4096; len(data) > limit {
		t.Errorf("GET of a %d-byte payload: got a %d-byte reply, want at most %d", len(deep), len(data), limit)
	}
	var j api.Job
	if err := json.Unmarshal(data, &j); err != nil || len(j.Payload) != len(deep) {
		t.Errorf("GET: got payload of %d bytes (%v), want %d", len(j.Payload), err, len(deep))
	}
	code, data = e.do("GET", jobPath("deep"), nil)
	if code != http.StatusOK || !json.Valid(data) {
		t.Errorf("second GET: got %d, valid JSON %v", code, json.Valid(data))
	}
}

// brokenBody is a request body whose client goes away after a few bytes.
type brokenBody struct{ sent bool }

func (b *brokenBody) Read(p []byte) (int, error) {
	if b.sent {
		return 0, io.ErrUnexpectedEOF
	}
	b.sent = true
	return copy(p, `{"id": "half", "exec`), nil
}

func (b *brokenBody) Close() error { return nil }

// TestJobsClientGoneMidBody checks that a body the client stops sending is
// the client's error: 400, logged at debug level only, nothing stored.
func TestJobsClientGoneMidBody(t *testing.T) {
	core, logs := observer.New(zapcore.DebugLevel)
	e := newJobsEnv(t)
	h := admin.Handler(admintest.Member{Jobs: e.store, Auth: testAuth}, admin.Config{
		Gatherer: prometheus.NewRegistry(),
		Logger:   zap.New(core),
	})
	for _, req := range []struct{ method, path string }{{"POST", "/v1/jobs"}, {"PUT", jobPath("half")}} {
		r := asAdmin(httptest.NewRequest(req.method, req.path, &brokenBody{}))
		r.Header.Set("Content-Type", "application/json")
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		if w.Code != http.StatusBadRequest {
			t.Errorf("%s %s with a body cut short: got %d %s, want 400", req.method, req.path, w.Code, w.Body)
			continue
		}
		if msg := errorMessage(t, w.Body.Bytes()); msg != "the request body was not received to its end" {
			t.Errorf("%s %s: got message %q", req.method, req.path, msg)
		}
	}
	for _, entry := range logs.All() {
		// The audit line of each refused write is the one line above debug.
		if entry.Level > zapcore.DebugLevel && entry.LoggerName != "audit" {
			t.Errorf("got a %s log line %q, want debug at most", entry.Level, entry.Message)
		}
	}
	if logs.FilterMessage("job request body not read to its end").Len() != 2 {
		t.Errorf("got logs %v, want two debug lines about the body", logs.All())
	}
	if n := e.keys(); n != 0 {
		t.Errorf("got %d keys stored, want none", n)
	}
}
