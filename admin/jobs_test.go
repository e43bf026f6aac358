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
	"go.uber.org/zap/zaptest"

	"github.com/jobfleet/jobfleet/admin"
	"github.com/jobfleet/jobfleet/internal/etcdtest"
	"github.com/jobfleet/jobfleet/internal/orchestrator"
	"github.com/jobfleet/jobfleet/membership"
	"github.com/jobfleet/jobfleet/store"
)

// etcd is the embedded etcd the job tests share, each in its own namespace.
var etcd *etcdtest.Server

func TestMain(m *testing.M) { os.Exit(etcdtest.Main(m, &etcd)) }

// testPartitions is P of the tests' stores.
const testPartitions = 16

// idleMember is an admin.Member for tests of the job endpoints, which do
// not use it.
type idleMember struct{}

func (idleMember) Members() membership.View { return membership.View{} }
func (idleMember) Partitions() (orchestrator.PartitionTable, error) {
	return orchestrator.PartitionTable{}, orchestrator.ErrNotStarted
}
func (idleMember) Ready() (bool, string)       { return true, "" }
func (idleMember) Healthy(time.Duration) error { return nil }
func (idleMember) Drain()                      {}

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
	client := etcd.Client(t)
	ns := etcdtest.Namespace(t)
	s := store.NewEtcd(client, ns, testPartitions, store.DefaultLimits(), nil)
	return newEnvWith(t, client, ns, s, func() (admin.JobStore, error) { return s, nil })
}

func newEnvWith(t *testing.T, client *clientv3.Client, ns string, s *store.Etcd, jobs admin.JobsFunc) *jobsEnv {
	t.Helper()
	h := admin.Handler(idleMember{}, admin.Config{
		Gatherer: prometheus.NewRegistry(),
		Logger:   zaptest.NewLogger(t),
		Jobs:     jobs,
	})
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return &jobsEnv{t: t, client: client, ns: ns, store: s, srv: srv}
}

// do sends a request with an escaped path (and query) and returns the
// status and body.
func (e *jobsEnv) do(method, path string, body []byte) (int, []byte) {
	e.t.Helper()
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequest(method, e.srv.URL+path, rd)
	if err != nil {
		e.t.Fatalf("%s %s: %v", method, path, err)
	}
	resp, err := e.srv.Client().Do(req)
	if err != nil {
		e.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		e.t.Fatalf("%s %s: read reply: %v", method, path, err)
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
	var existing store.Job
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
		{"field given twice", "POST", "/v1/jobs", `{"id": "a", "id": "b", "executor": {"type": "http", "url": "http://h/"}}`, 400, "id: given more than once"},
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
		{"malformed JSON", "POST", "/v1/jobs", `{"id": "a", "executor": `, 400, "invalid job"},
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
			if after := e.keys(); after != before {
				t.Errorf("got %d keys after the rejected request, want %d", after, before)
			}
			var list struct{ Jobs []store.Job }
			e.doJSON("GET", "/v1/jobs", "", http.StatusOK, &list)
			if len(list.Jobs) != 1 || list.Jobs[0].ID != "existing" {
				t.Errorf("got jobs %v after the rejected request, want only \"existing\"", jobIDs(list.Jobs))
			}
			var got store.Job
			e.doJSON("GET", jobPath("existing"), "", http.StatusOK, &got)
			if got.Revision != existing.Revision || got.Paused {
				t.Errorf("job \"existing\" changed: got revision %d paused %v, want revision %d not paused", got.Revision, got.Paused, existing.Revision)
			}
		})
	}
}

func jobIDs(jobs []store.Job) []string {
	ids := make([]string, len(jobs))
	for i, j := range jobs {
		ids[i] = j.ID
	}
	return ids
}

func TestJobsCreateGetReplaceDelete(t *testing.T) {
	e := newJobsEnv(t)
	var created store.Job
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
	if created.Executor.Method != "POST" || created.MisfirePolicy != store.MisfireRunOnce || created.Timeout != store.Duration(5*time.Minute) {
		t.Errorf("got method %q misfire %q timeout %v, want defaults filled and timeout kept", created.Executor.Method, created.MisfirePolicy, created.Timeout)
	}

	var got store.Job
	e.doJSON("GET", jobPath("nightly-report"), "", http.StatusOK, &got)
	assertSameJob(t, got, created)

	// A GET document can be sent back with PUT: server-set fields are
	// accepted and overwritten.
	doc, _ := json.Marshal(got)
	var replaced store.Job
	e.doJSON("PUT", jobPath("nightly-report"), string(doc), http.StatusOK, &replaced)
	if !replaced.CreatedAt.Equal(created.CreatedAt) || !replaced.UpdatedAt.After(created.UpdatedAt) || replaced.Revision <= created.Revision {
		t.Errorf("replace: got created %v updated %v revision %d; want created kept, updated and revision later than %v, %d",
			replaced.CreatedAt, replaced.UpdatedAt, replaced.Revision, created.UpdatedAt, created.Revision)
	}

	// PUT of a new ID without "id" in the body creates it under the path's ID.
	var put store.Job
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
func assertSameJob(t *testing.T, got, want store.Job) {
	t.Helper()
	g, _ := json.Marshal(got)
	w, _ := json.Marshal(want)
	if !bytes.Equal(g, w) {
		t.Errorf("got job\n%s\nwant\n%s", g, w)
	}
}

func TestJobsPauseResume(t *testing.T) {
	e := newJobsEnv(t)
	e.doJSON("POST", "/v1/jobs", httpJob("j", `"schedule": "@hourly"`), http.StatusCreated, nil)
	var j store.Job
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
	e.doJSON("POST", jobPath("j", "resume"), "", http.StatusOK, &j)
	if j.Paused {
		t.Errorf("resume: got paused true")
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
func putRun(t *testing.T, e *jobsEnv, id string, at time.Time, status store.RunStatus, attempts ...store.Attempt) store.Run {
	t.Helper()
	p := e.store.Partition(id)
	r := store.Run{
		ID: store.RunID(id, at), JobID: id, Partition: p, ScheduledAt: at, FiredAt: at.Add(3 * time.Millisecond),
		Status: status, Attempts: attempts, Owner: "orchestrator-1", Epoch: 7,
	}
	if r.Attempts == nil {
		r.Attempts = []store.Attempt{}
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
		Runs []store.Run `json:"runs"`
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
	old := putRun(t, e, id, t0, store.RunSucceeded, store.Attempt{Attempt: 1, Worker: "w1", StartedAt: t0, FinishedAt: t0.Add(time.Second)})
	newer := putRun(t, e, id, t0.Add(time.Hour), store.RunFailed,
		store.Attempt{Attempt: 1, Worker: "w1", StartedAt: t0.Add(time.Hour), FinishedAt: t0.Add(time.Hour + time.Second), Error: "HTTP 500"})
	putRun(t, e, "a/b", t0, store.RunSucceeded) // a job whose ID is a prefix of the other's

	e.doJSON("GET", jobPath(id, "runs"), "", http.StatusOK, &rl)
	if got := runIDs(rl.Runs); !slices.Equal(got, []string{newer.ID, old.ID}) {
		t.Errorf("got runs %q, want newest first %q", got, []string{newer.ID, old.ID})
	}
	e.doJSON("GET", jobPath(id, "runs")+"?limit=1", "", http.StatusOK, &rl)
	if got := runIDs(rl.Runs); !slices.Equal(got, []string{newer.ID}) {
		t.Errorf("limit=1: got runs %q, want %q", got, []string{newer.ID})
	}

	var run store.Run
	e.doJSON("GET", "/v1/runs/"+url.PathEscape(newer.ID), "", http.StatusOK, &run)
	if run.ID != newer.ID || run.JobID != id || run.Status != store.RunFailed || len(run.Attempts) != 1 || run.Attempts[0].Error != "HTTP 500" {
		t.Errorf("got run %+v, want %+v", run, newer)
	}
	for _, runID := range []string{
		store.RunID(id, t0.Add(2*time.Hour)), // well-formed, not stored
		"no-at-sign",
		"x@not-a-time",
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

func runIDs(runs []store.Run) []string {
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
			Jobs       []store.Job `json:"jobs"`
			NextCursor *string     `json:"next_cursor"`
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
		Jobs []store.Job `json:"jobs"`
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
			var j store.Job
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
			run := putRun(t, e, id, at, store.RunSucceeded)
			var rl struct {
				Runs []store.Run `json:"runs"`
			}
			e.doJSON("GET", jobPath(id, "runs"), "", http.StatusOK, &rl)
			if len(rl.Runs) != 1 || rl.Runs[0].JobID != id {
				t.Errorf("runs: got %+v, want one run of %q", rl.Runs, id)
			}
			var r store.Run
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
		Jobs []store.Job `json:"jobs"`
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

func (f failingStore) Create(context.Context, store.Job) (store.Job, error) {
	return store.Job{}, f.err
}
func (f failingStore) Put(context.Context, store.Job) (store.Job, bool, error) {
	return store.Job{}, false, f.err
}
func (f failingStore) Get(context.Context, string) (store.Job, error) { return store.Job{}, f.err }
func (f failingStore) List(context.Context, string, int) ([]store.Job, string, error) {
	return nil, "", f.err
}
func (f failingStore) Delete(context.Context, string) error { return f.err }
func (f failingStore) SetPaused(context.Context, string, bool) (store.Job, error) {
	return store.Job{}, f.err
}
func (f failingStore) Trigger(context.Context, string) (string, error)        { return "", f.err }
func (f failingStore) Runs(context.Context, string, int) ([]store.Run, error) { return nil, f.err }
func (f failingStore) GetRun(context.Context, string) (store.Run, error)      { return store.Run{}, f.err }

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
		{"conflict", store.ErrConflict, http.StatusConflict, "concurrent update conflict"},
		{"unknown", errors.New("disk on fire"), http.StatusInternalServerError, "disk on fire"},
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
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnvWith(t, nil, "", nil, func() (admin.JobStore, error) { return failingStore{tt.err}, nil })
			for _, req := range requests {
				code, data := e.do(req.method, req.path, []byte(req.body))
				if code != tt.wantCode {
					t.Errorf("%s %s: got status %d, want %d; body %s", req.method, req.path, code, tt.wantCode, data)
					continue
				}
				if msg := errorMessage(t, data); !strings.HasPrefix(msg, tt.wantMsg) {
					t.Errorf("%s %s: got message %q, want it to start with %q", req.method, req.path, msg, tt.wantMsg)
				}
			}
		})
	}
}

func TestJobsUnavailableBeforeStart(t *testing.T) {
	notStarted := func() (admin.JobStore, error) { return nil, orchestrator.ErrNotStarted }
	for name, jobs := range map[string]admin.JobsFunc{"not started": notStarted, "not configured": nil} {
		t.Run(name, func(t *testing.T) {
			e := newEnvWith(t, nil, "", nil, jobs)
			for _, path := range []string{"/v1/jobs", jobPath("j"), jobPath("j", "runs"), "/v1/runs/x@y"} {
				code, data := e.do("GET", path, nil)
				if code != http.StatusServiceUnavailable {
					t.Errorf("GET %s: got %d %s, want 503", path, code, data)
					continue
				}
				errorMessage(t, data)
			}
			code, data := e.do("POST", "/v1/jobs", []byte(httpJob("j", "")))
			if code != http.StatusServiceUnavailable {
				t.Errorf("POST /v1/jobs: got %d %s, want 503", code, data)
			}
		})
	}
}
