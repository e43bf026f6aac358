package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jobfleet/jobfleet/api"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap/zaptest"

	"github.com/jobfleet/jobfleet/admin"
	"github.com/jobfleet/jobfleet/auth"
	"github.com/jobfleet/jobfleet/internal/testkit/admintest"
	"github.com/jobfleet/jobfleet/internal/testkit/authtest"
	"github.com/jobfleet/jobfleet/internal/testkit/etcdtest"
	"github.com/jobfleet/jobfleet/store"
)

// cliEnv is the HTTP API over a real etcd store in a fresh namespace,
// served in process, for running job commands against.
type cliEnv struct {
	t      *testing.T
	url    string
	store  *store.Etcd
	client *clientv3.Client
	ns     string
	cache  *auth.Cache
	token  string // an admin's
}

func newCLIEnv(t *testing.T) *cliEnv {
	t.Helper()
	client := etcd.Client(t)
	ns := etcdtest.Namespace(t)
	s := store.NewEtcd(client, ns, 16, api.DefaultLimits(), nil)
	cache := authtest.RunCache(t, client, auth.CacheConfig{Namespace: ns})
	c := &cliEnv{t: t, store: s, client: client, ns: ns, cache: cache}
	c.token = c.credential(api.CreateRequest{Role: api.RoleAdmin}).Secret
	h := admin.Handler(admintest.Member{Jobs: s, Auth: cache}, admin.Config{
		Gatherer: prometheus.NewRegistry(),
		Logger:   zaptest.NewLogger(t),
		Tokens:   auth.NewStore(client, ns, nil),
		Limits:   admin.Limits{Rate: -1},
	})
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	c.url = srv.URL
	return c
}

// credential stores a credential and waits until the API knows it.
func (c *cliEnv) credential(req api.CreateRequest) api.Created {
	c.t.Helper()
	cr, rev := authtest.Create(c.t, c.client, c.ns, req)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := c.cache.WaitRevision(ctx, rev); err != nil {
		c.t.Fatal(err)
	}
	return cr
}

// run runs `jobfleet job --server URL --token TOKEN args...` with stdin and
// returns its standard output.
func (c *cliEnv) run(stdin string, args ...string) (string, error) {
	c.t.Helper()
	return c.runCmd(stdin, append([]string{"job", "--server", c.url, "--token", c.token}, args...)...)
}

// runCmd runs `jobfleet args...` in process with stdin and returns its
// standard output.
func (c *cliEnv) runCmd(stdin string, args ...string) (string, error) {
	c.t.Helper()
	root := newRootCmd()
	var out, errOut bytes.Buffer
	root.SetArgs(args)
	root.SetIn(strings.NewReader(stdin))
	root.SetOut(&out)
	root.SetErr(&errOut)
	err := root.ExecuteContext(context.Background())
	return out.String(), err
}

// mustRun is run that fails the test on an error.
func (c *cliEnv) mustRun(args ...string) string {
	c.t.Helper()
	out, err := c.run("", args...)
	if err != nil {
		c.t.Fatalf("jobfleet job %q: %v\n%s", args, err, out)
	}
	return out
}

// mustFail runs a command that must fail with an error containing each of
// wants.
func (c *cliEnv) mustFail(args []string, wants ...string) {
	c.t.Helper()
	out, err := c.run("", args...)
	if err == nil {
		c.t.Fatalf("jobfleet job %q: got success, want an error\n%s", args, out)
	}
	for _, w := range wants {
		if !strings.Contains(err.Error(), w) {
			c.t.Errorf("jobfleet job %q: got error %q, want it to contain %q", args, err, w)
		}
	}
}

func (c *cliEnv) get(id string) (api.Job, error) {
	c.t.Helper()
	return c.store.Get(context.Background(), id)
}

func (c *cliEnv) ids() []string {
	c.t.Helper()
	jobs, _, err := c.store.List(context.Background(), "", 1000)
	if err != nil {
		c.t.Fatal(err)
	}
	var ids []string
	for _, j := range jobs {
		ids = append(ids, j.ID)
	}
	slices.Sort(ids)
	return ids
}

func writeFile(t *testing.T, name, content string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestJobCreateCommand(t *testing.T) {
	c := newCLIEnv(t)

	file := writeFile(t, "nightly.json", `{
		"id": "nightly-report",
		"schedule": "0 2 * * *",
		"timezone": "Europe/Berlin",
		"executor": {"type": "http", "url": "http://127.0.0.1:9000/hook"},
		"payload": {"any": "json"}
	}`)
	out := c.mustRun("create", "-f", file)
	if !strings.HasPrefix(out, `created job "nightly-report" (partition `) {
		t.Errorf("create -f: got output %q", out)
	}

	if out := c.mustRun("get", "nightly-report"); !strings.Contains(out, `{"any":"json"}`) || !strings.Contains(out, "0 2 * * * (Europe/Berlin)") {
		t.Errorf("get: got\n%s\nwant the payload and schedule", out)
	}

	out, err := c.run(`{"id": "from-stdin", "executor": {"type": "shell", "command": ["true"]}}`, "create", "-f", "-", "-o", "json")
	if err != nil {
		t.Fatalf("create -f -: %v", err)
	}
	var j api.Job
	if err := json.Unmarshal([]byte(out), &j); err != nil || j.ID != "from-stdin" || j.Revision == 0 {
		t.Errorf("create -f - -o json: got %q (%v), want the stored job", out, err)
	}

	c.mustRun("create", "--id", "ping", "--schedule", "*/5 * * * *", "--http-url", "http://127.0.0.1:9000/ping",
		"--method", "put", "--header", "X-Team: ops", "--payload", `{"x": 1}`,
		"--max-attempts", "3", "--backoff", "2s", "--job-timeout", "5m", "--misfire-policy", "skip")
	j, err = c.get("ping")
	if err != nil {
		t.Fatal(err)
	}
	if j.Executor.Type != "http" || j.Executor.Method != "PUT" || j.Executor.Headers["X-Team"] != api.Literal("ops") ||
		string(j.Payload) != `{"x":1}` || j.Retry.MaxAttempts != 3 || j.Retry.InitialBackoff != api.Duration(2*time.Second) ||
		j.Timeout != api.Duration(5*time.Minute) || j.MisfirePolicy != api.MisfireSkip || j.Schedule != "*/5 * * * *" {
		t.Errorf("create with http flags: got %+v", j)
	}

	c.mustRun("create", "--id", "backup/nightly 100%", "--schedule", "0 2 * * *", "--timezone", "Europe/Berlin", "--shell", "/srv/backup.sh --full", "--paused")
	j, err = c.get("backup/nightly 100%")
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"/bin/sh", "-c", "/srv/backup.sh --full"}; j.Executor.Type != "shell" || !slices.Equal(j.Executor.Command, want) || j.Timezone != "Europe/Berlin" || !j.Paused {
		t.Errorf("create with --shell: got executor %+v timezone %q paused %v, want command %q", j.Executor, j.Timezone, j.Paused, want)
	}

	at := "2030-01-02T03:04:05Z"
	c.mustRun("create", "--id", "listing", "--command", "ls", "--command", "-l", "--run-at", at)
	j, err = c.get("listing")
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(j.Executor.Command, []string{"ls", "-l"}) || j.RunAt == nil || j.RunAt.Format(time.RFC3339) != at {
		t.Errorf("create with --command --run-at: got command %q run_at %v", j.Executor.Command, j.RunAt)
	}

	before := c.ids()
	c.mustFail([]string{"create", "--id", "never", "--schedule", "0 0 30 2 *", "--shell", "true"}, "400", "schedule:", "never fires")
	c.mustFail([]string{"create", "--id", "x", "--shell", "true", "--max-attempts", "-1"}, "--max-attempts -1: want at least 1")
	c.mustFail([]string{"create", "--id", "x", "--shell", "true", "--max-attempts", "100000"}, "400", "retry.max_attempts:")
	c.mustFail([]string{"create", "-f", writeFile(t, "bad.json", `{"id": "bad", "executor": {"type": "http", "url": "http://h/"}, "colour": 1}`)}, "400", "colour: unknown field")
	c.mustFail([]string{"create", "--id", "ping", "--http-url", "http://h/"}, "409", "already exists")
	c.mustFail([]string{"create", "--id", "x"}, "exactly one of --http-url, --shell, --command or --handler")
	c.mustFail([]string{"create", "--id", "x", "--shell", "true", "--http-url", "http://h/"}, "exactly one of")
	c.mustFail([]string{"create", "--id", "x", "--shell", "true", "--method", "GET"}, "--method apply only to --http-url")
	c.mustFail([]string{"create", "-f", file, "--id", "x"}, "do not combine it with --id")
	c.mustFail([]string{"create", "--id", "x", "--shell", "true", "--payload", "{nope"}, "--payload is not valid JSON")
	c.mustFail([]string{"create", "--id", "x", "--shell", "true", "--run-at", "tomorrow"}, "--run-at")
	c.mustFail([]string{"create", "-f", filepath.Join(t.TempDir(), "missing.json")}, "no such file")
	// A job saved with "get -o yaml" is refused with a word on what to use.
	c.mustFail([]string{"create", "-f", writeFile(t, "job.yaml", "id: from-yaml\nexecutor:\n  type: shell\n  command: [\"true\"]\n")}, "job.yaml: this looks like YAML; job documents are JSON (jobfleet job get ID -o json writes one)")
	c.mustFail([]string{"create", "--id", "x", "--shell", "true", "-o", "xml"}, "--output must be table, wide, json or yaml")
	if after := c.ids(); !slices.Equal(after, before) {
		t.Errorf("failed creates changed the jobs: got %q, want %q", after, before)
	}
}

func TestJobCommands(t *testing.T) {
	c := newCLIEnv(t)
	const id = "reports/daily ü?#+%"
	c.mustRun("create", "--id", id, "--schedule", "0 6 * * *", "--http-url", "http://127.0.0.1:9000/hook", "--method", "GET")
	for i := range 4 {
		c.mustRun("create", "--id", "job-"+string(rune('a'+i)), "--shell", "true", "--schedule", "@hourly")
	}

	out := c.mustRun("get", id)
	for _, want := range []string{id, "0 6 * * *", "http GET http://127.0.0.1:9000/hook", "PARTITION", "run_once"} {
		if !strings.Contains(out, want) {
			t.Errorf("get: output lacks %q:\n%s", want, out)
		}
	}
	var j api.Job
	if err := json.Unmarshal([]byte(c.mustRun("get", id, "-o", "json")), &j); err != nil || j.ID != id {
		t.Errorf("get -o json: got id %q (%v), want %q", j.ID, err, id)
	}
	c.mustFail([]string{"get", "nope"}, "404", `job "nope" not found`)

	// ls follows the cursor over several pages, and sorts by ID across them.
	out = c.mustRun("ls", "--chunk-size", "2")
	if !strings.HasPrefix(out, "ID ") || strings.Count(out, "\n") != 6 {
		t.Errorf("ls: got\n%s\nwant a header and 5 rows", out)
	}
	var order []string
	for _, line := range strings.Split(strings.TrimSpace(out), "\n")[1:] {
		order = append(order, strings.Fields(line)[0])
	}
	if want := []string{"job-a", "job-b", "job-c", "job-d", "reports/daily"}; !slices.Equal(order, want) {
		t.Errorf("ls: got rows %q, want sorted by ID %q", order, want)
	}
	for _, want := range []string{id, "job-a", "job-d", "shell /bin/sh -c true"} {
		if !strings.Contains(out, want) {
			t.Errorf("ls: output lacks %q:\n%s", want, out)
		}
	}
	var page struct {
		Jobs       []api.Job `json:"jobs"`
		NextCursor string    `json:"next_cursor"`
	}
	if err := json.Unmarshal([]byte(c.mustRun("ls", "-o", "json", "--chunk-size", "2")), &page); err != nil || len(page.Jobs) != 5 || page.NextCursor != "" {
		t.Errorf("ls -o json: got %d jobs, cursor %q (%v); want 5 and none", len(page.Jobs), page.NextCursor, err)
	}
	if err := json.Unmarshal([]byte(c.mustRun("ls", "-o", "json", "--limit", "3", "--chunk-size", "2")), &page); err != nil || len(page.Jobs) != 3 || page.NextCursor == "" {
		t.Fatalf("ls --limit 3: got %d jobs, cursor %q (%v); want 3 and a cursor", len(page.Jobs), page.NextCursor, err)
	}
	first, cursor := page.Jobs, page.NextCursor
	page.Jobs = nil
	if err := json.Unmarshal([]byte(c.mustRun("ls", "-o", "json", "--cursor", cursor)), &page); err != nil || len(page.Jobs) != 2 {
		t.Errorf("ls --cursor: got %d jobs (%v), want the other 2", len(page.Jobs), err)
	}
	seen := map[string]bool{}
	for _, j := range append(first, page.Jobs...) {
		seen[j.ID] = true
	}
	if len(seen) != 5 {
		t.Errorf("ls --limit then --cursor: got %d distinct jobs, want 5", len(seen))
	}

	out = c.mustRun("pause", id)
	if want := `paused job "` + id + `"`; !strings.Contains(out, want) {
		t.Errorf("pause: got %q, want %q", out, want)
	}
	if j, _ := c.get(id); !j.Paused {
		t.Errorf("after pause: job not paused")
	}
	// ls --paused lists only it, --paused=false the others.
	c.mustRun("pause", "job-b")
	for flag, want := range map[string]string{"--paused": "job-b reports/daily", "--paused=false": "job-a job-c job-d"} {
		out := c.mustRun("ls", flag, "--chunk-size", "1")
		var rows []string
		for _, line := range strings.Split(strings.TrimSpace(out), "\n")[1:] {
			rows = append(rows, strings.Fields(line)[0])
		}
		if strings.Join(rows, " ") != want {
			t.Errorf("ls %s: rows %q, want %s\n%s", flag, rows, want, out)
		}
	}
	c.mustRun("resume", "job-b")
	c.mustRun("resume", id)
	if j, _ := c.get(id); j.Paused {
		t.Errorf("after resume: job paused")
	}

	out = c.mustRun("trigger", id)
	m := regexp.MustCompile(`run (\S+)`).FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("trigger: got %q, want a run ID", out)
	}
	if got, _, err := store.ParseRunID(m[1]); err != nil || got != id {
		t.Errorf("trigger: run ID %q names %q (%v), want %q", m[1], got, err, id)
	}

	out = c.mustRun("runs", id)
	if strings.TrimSpace(out) != "RUN ID  STATUS  SCHEDULED  ITEMS  ATTEMPTS  WORKER  DURATION  REASON  LAST ERROR" {
		t.Errorf("runs of a job without runs: got %q, want the header only", out)
	}
	putCLIRun(t, c, id, time.Date(2026, 3, 1, 6, 0, 0, 0, time.UTC), api.RunSucceeded, "")
	putCLIRun(t, c, id, time.Date(2026, 3, 2, 6, 0, 0, 0, time.UTC), api.RunDead, "HTTP 503:\nservice unavailable")
	out = c.mustRun("runs", id)
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 3 || !strings.Contains(lines[1], "2026-03-02T06:00:00Z") || !strings.Contains(lines[1], "dead") ||
		!strings.Contains(lines[1], "HTTP 503: service unavailable") || !strings.Contains(lines[2], "succeeded") {
		t.Errorf("runs: got\n%s\nwant the dead run, then the succeeded one", out)
	}
	var rl struct {
		Runs []api.Run `json:"runs"`
	}
	if err := json.Unmarshal([]byte(c.mustRun("runs", id, "--limit", "1", "-o", "json")), &rl); err != nil || len(rl.Runs) != 1 || rl.Runs[0].Status != api.RunDead {
		t.Errorf("runs --limit 1 -o json: got %+v (%v), want the dead run", rl.Runs, err)
	}
	// What workers report is printed escaped: an ESC in an error or a
	// worker ID (from an older worker, or a hostile one) cannot drive the
	// reader's terminal.
	putCLIRun(t, c, id, time.Date(2026, 3, 3, 6, 0, 0, 0, time.UTC), api.RunDead, "boom \x1b]0;pwned\x07\x1b[2J\u202edone")
	out = c.mustRun("runs", id, "--limit", "1")
	if strings.ContainsAny(out, "\x1b\x07\u202e") || !strings.Contains(out, `boom \x1b]0;pwned\x07\x1b[2J\u202edone`) {
		t.Errorf("runs with control characters in the error: got %q, want them escaped", out)
	}
	c.mustFail([]string{"runs", "nope"}, "404")
	c.mustFail([]string{"runs", id, "--limit", "0"}, "--limit must be 1 to 1000, got 0")

	out = c.mustRun("rm", id, "job-a")
	if !strings.Contains(out, `deleted job "`+id+`"`) || !strings.Contains(out, `deleted job "job-a"`) {
		t.Errorf("rm: got %q", out)
	}
	if _, err := c.get(id); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("after rm: got %v, want not found", err)
	}
	c.mustFail([]string{"rm", id}, "404", "not found")

	// -o json is JSON for rm too, failures included.
	out, err := c.run("", "rm", "job-b", "nope", "-o", "json")
	var rm struct {
		Results []struct{ ID, Result, Error string }
	}
	if err == nil || json.Unmarshal([]byte(out), &rm) != nil || len(rm.Results) != 2 ||
		rm.Results[0].ID != "job-b" || rm.Results[0].Result != "deleted" || rm.Results[1].Result != "failed" || !strings.Contains(rm.Results[1].Error, "404") {
		t.Errorf("rm -o json: got %q, %v; want a JSON document with job-b deleted and nope failed, and an error", out, err)
	}
}

// TestEmptyReplyIsAnError checks that a 200 without a body, as a server
// failing after its status line sends, is reported, not shown as an empty
// list.
func TestEmptyReplyIsAnError(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusOK)
	}))
	t.Cleanup(srv.Close)
	c := &cliEnv{t: t, url: srv.URL}
	for _, args := range [][]string{{"ls"}, {"get", "x"}, {"runs", "x"}} {
		c.mustFail(args, "bad reply")
	}
}

// TestServerFlag checks that --server takes HOST:PORT as well as a URL,
// and names the flag when it is neither.
func TestServerFlag(t *testing.T) {
	c := newCLIEnv(t)
	c.mustRun("create", "--id", "x", "--shell", "true")
	hostPort := strings.TrimPrefix(c.url, "http://")
	for _, server := range []string{hostPort, "http://" + hostPort, "http://" + hostPort + "/", " " + hostPort} {
		root := newRootCmd()
		var out bytes.Buffer
		root.SetArgs([]string{"job", "--server", server, "--token", c.token, "ls"})
		root.SetOut(&out)
		if err := root.ExecuteContext(context.Background()); err != nil || !strings.Contains(out.String(), "x ") {
			t.Errorf("--server %q: got %q, %v; want the job listed", server, out.String(), err)
		}
	}
	for _, server := range []string{"ftp://" + hostPort, "http://", "http://user:pw@" + hostPort, "::bad"} {
		root := newRootCmd()
		root.SetArgs([]string{"job", "--server", server, "ls"})
		root.SetOut(io.Discard)
		if err := root.ExecuteContext(context.Background()); err == nil || !strings.Contains(err.Error(), "--server") {
			t.Errorf("--server %q: got %v, want an error naming --server", server, err)
		}
	}
}

// TestClusterDrainNeedsServer checks that drain never picks the default
// member: the member to stop must be named.
func TestClusterDrainNeedsServer(t *testing.T) {
	t.Setenv("JOBFLEET_SERVER", "") // restored after the test
	os.Unsetenv("JOBFLEET_SERVER")
	var drains atomic.Int32
	// Authentication is off: the test is about which member is named.
	srv := httptest.NewServer(admin.Handler(countingDrainMember{drains: &drains}, admin.Config{Gatherer: prometheus.NewRegistry(), Insecure: true}))
	t.Cleanup(srv.Close)
	run := func(env string, args ...string) (string, error) {
		if env != "" {
			t.Setenv("JOBFLEET_SERVER", env)
		}
		root := newRootCmd()
		var out bytes.Buffer
		root.SetArgs(append([]string{"cluster"}, args...))
		root.SetOut(&out)
		err := root.ExecuteContext(context.Background())
		return out.String(), err
	}
	if _, err := run("", "drain"); err == nil || !strings.Contains(err.Error(), "name it with --server") {
		t.Errorf("drain without --server: got %v, want a refusal", err)
	}
	if drains.Load() != 0 {
		t.Fatalf("drain without --server drained a member")
	}
	if out, err := run("", "drain", "--server", strings.TrimPrefix(srv.URL, "http://")); err != nil || !strings.Contains(out, "draining "+srv.URL) {
		t.Errorf("drain --server: got %q, %v", out, err)
	}
	if out, err := run(srv.URL, "drain", "-o", "json"); err != nil || !strings.Contains(out, `"status": "draining"`) {
		t.Errorf("drain with JOBFLEET_SERVER -o json: got %q, %v", out, err)
	}
	if got := drains.Load(); got != 2 {
		t.Errorf("got %d drains, want 2", got)
	}
}

// countingDrainMember is an admin.Member that counts drain requests.
type countingDrainMember struct {
	admintest.Member
	drains *atomic.Int32
}

func (m countingDrainMember) Drain() { m.drains.Add(1) }

// TestEtcdStartHint checks that a taken etcd address is blamed on the flag
// that sets it.
func TestEtcdStartHint(t *testing.T) {
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	free := func() string {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		return l.Addr().String()
	}
	taken := busy.Addr().String()
	if got := etcdStartHint(taken); !strings.Contains(got, "client address "+taken) || !strings.Contains(got, "--etcd-listen") {
		t.Errorf("client port taken: got hint %q, want --etcd-listen", got)
	}
	if got := etcdStartHint(free()); got != "" {
		t.Errorf("nothing taken: got hint %q, want none", got)
	}
}

// putCLIRun stores a run document as the partition's owner would.
func putCLIRun(t *testing.T, c *cliEnv, id string, at time.Time, status api.RunStatus, errText string) {
	t.Helper()
	p := c.store.Partition(id)
	r := api.Run{ID: store.RunID(id, at), JobID: id, Partition: p, ScheduledAt: at, FiredAt: at, Status: status,
		Attempts: []api.Attempt{{Attempt: 1, Worker: "w1", StartedAt: at, FinishedAt: at.Add(time.Second), Error: errText}}}
	val, _ := json.Marshal(r)
	if _, err := etcd.Client(t).Put(context.Background(), c.store.Keys().Run(p, id, at), string(val)); err != nil {
		t.Fatal(err)
	}
}

func TestJobApplyCommand(t *testing.T) {
	c := newCLIEnv(t)
	file := writeFile(t, "job.json", `{"id": "a/b", "schedule": "@hourly", "executor": {"type": "shell", "command": ["true"]}}`)
	out := c.mustRun("apply", "-f", file)
	if !strings.HasPrefix(out, `created job "a/b"`) {
		t.Errorf("first apply: got %q, want created", out)
	}
	created, err := c.get("a/b")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(file, []byte(`{"id": "a/b", "schedule": "@daily", "executor": {"type": "shell", "command": ["true"]}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	out = c.mustRun("apply", "-f", file)
	if !strings.HasPrefix(out, `replaced job "a/b"`) {
		t.Errorf("second apply: got %q, want replaced", out)
	}
	replaced, err := c.get("a/b")
	if err != nil {
		t.Fatal(err)
	}
	if replaced.Schedule != "@daily" || !replaced.CreatedAt.Equal(created.CreatedAt) {
		t.Errorf("after apply: got schedule %q created %v, want @daily created %v", replaced.Schedule, replaced.CreatedAt, created.CreatedAt)
	}
	out, err = c.run(`{"id": "stdin-job", "executor": {"type": "shell", "command": ["true"]}}`, "apply", "-f", "-")
	if err != nil || !strings.HasPrefix(out, `created job "stdin-job"`) {
		t.Errorf("apply -f -: got %q, %v", out, err)
	}
	c.mustFail([]string{"apply", "-f", writeFile(t, "noid.json", `{"executor": {"type": "shell", "command": ["true"]}}`)}, `has no "id"`)
	c.mustFail([]string{"apply", "-f", writeFile(t, "bad.json", `{"id": "a/b", "schedule": "0 0 30 2 *", "executor": {"type": "shell", "command": ["true"]}}`)}, "400", "schedule:")
	c.mustFail([]string{"apply"}, "-f FILE is required")
	if j, _ := c.get("a/b"); j.Schedule != "@daily" {
		t.Errorf("a rejected apply changed the job: schedule %q", j.Schedule)
	}

	// Two people edit the same job from `job get -o json`: the second
	// apply, of a stale revision, is refused instead of undoing the first.
	saved := c.mustRun("get", "a/b", "-o", "json")
	alice := writeFile(t, "alice.json", strings.Replace(saved, `"@daily"`, `"@weekly"`, 1))
	bob := writeFile(t, "bob.json", strings.Replace(saved, `"paused": false`, `"paused": true`, 1))
	c.mustRun("apply", "-f", alice)
	c.mustFail([]string{"apply", "-f", bob}, "409", "stale revision", `jobfleet job get "a/b" -o json`)
	if j, _ := c.get("a/b"); j.Schedule != "@weekly" || j.Paused {
		t.Errorf("after the refused apply: got schedule %q paused %v, want Alice's @weekly, not paused", j.Schedule, j.Paused)
	}
}

func TestEscapedTableCells(t *testing.T) {
	for _, tt := range []struct{ in, cell, text string }{
		{"plain é", "plain é", "plain é"},
		{"a\x1b[31mb", `a\x1b[31mb`, `a\x1b[31mb`},
		{"line\nnext\tcol", `line\x0anext\x09col`, "line\nnext\tcol"},
		{"c1\u009bx del\x7f", `c1\u009bx del\x7f`, `c1\u009bx del\x7f`},
		{"rtl\u202eevil\u2066", `rtl\u202eevil\u2066`, `rtl\u202eevil\u2066`},
		{"bad\xffbyte", `bad\xffbyte`, `bad\xffbyte`},
	} {
		if got := cell(tt.in); got != tt.cell {
			t.Errorf("cell(%q) = %q, want %q", tt.in, got, tt.cell)
		}
		if got := text(tt.in); got != tt.text {
			t.Errorf("text(%q) = %q, want %q", tt.in, got, tt.text)
		}
	}
	var b bytes.Buffer
	at := time.Date(2026, 3, 1, 6, 0, 0, 0, time.UTC)
	err := printRuns(&b, []api.Run{{ID: store.RunID("j", at), Status: api.RunDead, ScheduledAt: at, FiredAt: at,
		Attempts: []api.Attempt{{Attempt: 1, Worker: "evil\x1b[8m", Error: "failed\x1b[2K"}}}}, false, at)
	if err != nil {
		t.Fatal(err)
	}
	if out := b.String(); strings.Contains(out, "\x1b") || !strings.Contains(out, `evil\x1b[8m`) || !strings.Contains(out, `failed\x1b[2K`) {
		t.Errorf("printRuns: got %q, want the worker ID and the error escaped", out)
	}
}

// TestRequestTimeoutFlag: every command that talks to the API takes
// --request-timeout, refuses a negative one naming it, and refuses
// --timeout (once the request's limit, which a job-defining command's
// reader takes for the job's) naming both --request-timeout and
// --job-timeout, before it sends anything; the job's limit is
// --job-timeout alone.
func TestRequestTimeoutFlag(t *testing.T) {
	c := newCLIEnv(t)
	var walk func(cmd *cobra.Command)
	seen := 0
	walk = func(cmd *cobra.Command) {
		for _, sub := range cmd.Commands() {
			walk(sub)
		}
		if !cmd.Runnable() || cmd.Flag("request-timeout") == nil {
			return
		}
		seen++
		path := strings.Fields(cmd.CommandPath())[1:]
		t.Run(strings.Join(path, " "), func(t *testing.T) {
			for _, tc := range []struct {
				args  []string
				wants []string
			}{
				{[]string{"--timeout", "5m"}, []string{"--request-timeout", "--job-timeout"}},
				{[]string{"--timeout=-1s"}, []string{"--request-timeout", "--job-timeout"}},
				{[]string{"--request-timeout", "-1s"}, []string{`"-1s" for "--request-timeout"`}},
			} {
				args := append(append(slices.Clone(path), "--server", c.url, "--token", c.token), tc.args...)
				if path[0] == "job" && len(path) > 1 && path[1] == "create" {
					args = append(args, "--id", "refused", "--http-url", "http://127.0.0.1:9/")
				}
				out, err := c.runCmd("", args...)
				if err == nil {
					t.Errorf("jobfleet %q: got success, want an error\n%s", args, out)
					continue
				}
				for _, w := range tc.wants {
					if !strings.Contains(err.Error(), w) {
						t.Errorf("jobfleet %q: got %q, want it to name %s", args, err, w)
					}
				}
			}
		})
	}
	walk(newRootCmd())
	if seen < 10 {
		t.Fatalf("%d commands take --request-timeout, want every API command", seen)
	}
	if ids := c.ids(); len(ids) != 0 {
		t.Fatalf("refused commands created %q", ids)
	}
	c.mustRun("create", "--id", "limited", "--schedule", "@every 1h", "--http-url", "http://127.0.0.1:9/", "--request-timeout", "30s", "--job-timeout", "5m")
	if j, err := c.get("limited"); err != nil || j.Timeout != api.Duration(5*time.Minute) {
		t.Fatalf("create --request-timeout 30s --job-timeout 5m: got %+v, %v; want the job's timeout 5m", j, err)
	}
	c.mustRun("ls", "--request-timeout", "0") // 0: the default
}

// TestJobFlagsRefuseExplicitZeros: every number and duration flag of the
// commands that define jobs (job create, job import-crontab) refuses an
// explicit 0, as the API refuses a field given as 0, naming the flag and
// saying to leave it out for the default; none is turned into the default
// silently, and nothing is written. Each flag's help says so.
func TestJobFlagsRefuseExplicitZeros(t *testing.T) {
	c := newCLIEnv(t)
	crontab := writeFile(t, "crontab", "0 2 * * * /srv/backup.sh\n")
	for _, tc := range []struct {
		path []string
		with []string // what the command needs besides the flag
	}{
		{[]string{"job", "create"}, []string{"--id", "zero", "--http-url", "http://127.0.0.1:9/"}},
		{[]string{"job", "import-crontab"}, []string{crontab, "--apply"}},
	} {
		cmd, _, err := newRootCmd().Find(tc.path)
		if err != nil {
			t.Fatal(err)
		}
		checked := 0
		cmd.LocalFlags().VisitAll(func(f *pflag.Flag) {
			zero := map[string]string{"int": "0", "int64": "0", "duration": "0s"}[f.Value.Type()]
			if zero == "" {
				return
			}
			checked++
			t.Run(strings.Join(tc.path, " ")+" --"+f.Name, func(t *testing.T) {
				if !strings.Contains(f.Usage, "refused") {
					t.Errorf("help %q does not say that 0 is refused", f.Usage)
				}
				args := append(append(slices.Clone(tc.path), "--server", c.url, "--token", c.token), tc.with...)
				out, err := c.runCmd("", append(args, "--"+f.Name+"="+zero)...)
				if err == nil || !strings.Contains(err.Error(), "--"+f.Name) || !strings.Contains(err.Error(), "leave the flag out for the default") {
					t.Errorf("--%s=%s: got %v\n%s; want it refused naming the flag, saying to leave it out", f.Name, zero, err, out)
				}
			})
		})
		if checked == 0 {
			t.Errorf("%q: no number or duration flag found", tc.path)
		}
	}
	if ids := c.ids(); len(ids) != 0 {
		t.Fatalf("refused commands created %q", ids)
	}
}
