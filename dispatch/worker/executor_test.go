package worker_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/jonboulle/clockwork"

	"github.com/jobfleet/jobfleet/api"
	"github.com/jobfleet/jobfleet/dispatch/worker"
)

// received is one request seen by a test receiver.
type received struct {
	method, path string
	header       http.Header
	body         string
}

// newReceiver starts an HTTP receiver that records each request and
// answers it with status and body.
func newReceiver(t *testing.T, status int, body string) (*httptest.Server, <-chan received) {
	t.Helper()
	ch := make(chan received, 10)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		ch <- received{method: r.Method, path: r.URL.Path, header: r.Header.Clone(), body: string(b)}
		w.WriteHeader(status)
		io.WriteString(w, body)
	}))
	t.Cleanup(srv.Close)
	return srv, ch
}

func TestHTTPExecutor(t *testing.T) {
	tests := []struct {
		name        string
		method      string // executor method; "" for the default
		headers     map[string]string
		body        string // executor body
		payload     string
		scheduledAt time.Time
		status      int
		respBody    string

		wantMethod, wantBody, wantScheduledAt string
		wantErr                               string // "" for success
	}{
		{
			name: "payload is the body", method: "POST", headers: map[string]string{"X-Tenant": "acme"},
			payload: `{"invoice":42}`, scheduledAt: time.Date(2026, 12, 1, 2, 0, 0, 0, time.UTC),
			status: 200, respBody: "ok",
			wantMethod: "POST", wantBody: `{"invoice":42}`, wantScheduledAt: "2026-12-01T02:00:00.000Z",
		},
		{
			name: "executor body wins, default method, UTC milliseconds", body: `{"fixed":true}`, payload: `{"ignored":1}`,
			scheduledAt: time.Date(2026, 12, 1, 3, 0, 0, 123456789, time.FixedZone("CET", 3600)),
			status:      204,
			wantMethod:  "POST", wantBody: `{"fixed":true}`, wantScheduledAt: "2026-12-01T02:00:00.123Z",
		},
		{
			name: "PUT without payload", method: "PUT", scheduledAt: time.Date(2026, 1, 2, 3, 4, 5, 6e6, time.UTC),
			status: 201, respBody: "created",
			wantMethod: "PUT", wantBody: "", wantScheduledAt: "2026-01-02T03:04:05.006Z",
		},
		{
			name: "non-2xx is a failure", method: "POST", payload: `{}`, scheduledAt: time.Date(2026, 12, 1, 2, 0, 0, 0, time.UTC),
			status: 500, respBody: "boom",
			wantMethod: "POST", wantBody: `{}`, wantScheduledAt: "2026-12-01T02:00:00.000Z", wantErr: "status 500 Internal Server Error",
		},
		{
			name: "redirect status is a failure", method: "POST", scheduledAt: time.Date(2026, 12, 1, 2, 0, 0, 0, time.UTC),
			status:     304,
			wantMethod: "POST", wantScheduledAt: "2026-12-01T02:00:00.000Z", wantErr: "status 304",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFakeOrch(t, "a", nil)
			recvSrv, reqs := newReceiver(t, tt.status, tt.respBody)
			startWorker(t, worker.Config{Orchestrators: worker.StaticOrchestrators(f.URL())}, nil)
			ex := api.Executor{Type: "http", URL: recvSrv.URL + "/hook", Method: tt.method}
			for k, v := range tt.headers {
				if ex.Headers == nil {
					ex.Headers = map[string]api.HeaderValue{}
				}
				ex.Headers[k] = api.Literal(v)
			}
			if tt.body != "" {
				ex.Body = json.RawMessage(tt.body)
			}
			a := f.assignment("run-1", ex, tt.payload)
			a.JobID = "reports/nightly ü" // percent-encoded in the header, as in run IDs
			a.Attempt = 3
			a.ScheduledAt = tt.scheduledAt
			f.enqueue(a)

			got := recv(t, reqs, "the request")
			if got.method != tt.wantMethod || got.path != "/hook" || got.body != tt.wantBody {
				t.Errorf("request %s %s body %q, want %s /hook body %q", got.method, got.path, got.body, tt.wantMethod, tt.wantBody)
			}
			wantHeaders := map[string]string{
				"Jobfleet-Job-Id":       "reports%2Fnightly%20%C3%BC",
				"Jobfleet-Run-Id":       "run-1",
				"Jobfleet-Scheduled-At": tt.wantScheduledAt,
				"Jobfleet-Attempt":      "3",
			}
			for k, v := range tt.headers {
				wantHeaders[k] = v
			}
			if tt.wantBody != "" {
				wantHeaders["Content-Type"] = "application/json"
			}
			for k, v := range wantHeaders {
				if got := got.header.Values(k); !slices.Equal(got, []string{v}) {
					t.Errorf("header %s = %q, want [%q]", k, got, v)
				}
			}

			c := f.waitComplete(t, "run-1")
			if tt.wantErr == "" {
				if !c.Success || c.Error != "" {
					t.Errorf("completion success=%v error=%q, want success", c.Success, c.Error)
				}
			} else if c.Success || !strings.Contains(c.Error, tt.wantErr) {
				t.Errorf("completion success=%v error=%q, want failure containing %q", c.Success, c.Error, tt.wantErr)
			}
			if c.Output != tt.respBody {
				t.Errorf("output %q, want the response body %q", c.Output, tt.respBody)
			}
		})
	}
}

// TestHTTPExecutorOutputHeadAndTail: a response body over the cap is
// reported as its head and its tail (where errors usually are), with a
// marker saying how much was cut, in valid UTF-8 within the cap.
func TestHTTPExecutorOutputHeadAndTail(t *testing.T) {
	f := newFakeOrch(t, "a", nil)
	big := "BEGIN " + strings.Repeat("é", api.MaxOutputBytes) + " error: the disk is full" // over twice the cap
	recvSrv, _ := newReceiver(t, 500, big)
	startWorker(t, worker.Config{Orchestrators: worker.StaticOrchestrators(f.URL())}, nil)
	f.enqueue(f.assignment("r1", api.Executor{Type: "http", URL: recvSrv.URL}, ""))
	c := f.waitComplete(t, "r1")
	if len(c.Output) > api.MaxOutputBytes || !utf8.ValidString(c.Output) {
		t.Errorf("output of %d bytes, valid UTF-8 %v; want at most %d of valid UTF-8", len(c.Output), utf8.ValidString(c.Output), api.MaxOutputBytes)
	}
	if !strings.HasPrefix(c.Output, "BEGIN éé") || !strings.HasSuffix(c.Output, "éé error: the disk is full") || !strings.Contains(c.Output, " bytes cut ...]") {
		t.Errorf("output %.20q … %.40q, want the body's head, a marker and its tail", c.Output, c.Output[max(0, len(c.Output)-40):])
	}
}

func TestHTTPExecutorTimeout(t *testing.T) {
	clock := clockwork.NewFakeClock()
	f := newFakeOrch(t, "a", clock)
	arrived := make(chan struct{})
	recvSrv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		close(arrived)
		<-r.Context().Done() // never answers
	}))
	t.Cleanup(recvSrv.Close)
	startWorker(t, worker.Config{Orchestrators: worker.StaticOrchestrators(f.URL()), Clock: clock}, nil)
	a := f.assignment("r1", api.Executor{Type: "http", URL: recvSrv.URL}, "")
	a.Timeout = api.Duration(5 * time.Second)
	f.enqueue(a)
	recv(t, arrived, "the request")
	clock.Advance(5 * time.Second) // the timeout was set before the request went out
	c := f.waitComplete(t, "r1")
	if c.Success || c.Error != "timed out after 5s" {
		t.Errorf("completion success=%v error=%q, want failure %q", c.Success, c.Error, "timed out after 5s")
	}
}

func requireShell(t *testing.T) {
	t.Helper()
	if _, err := exec.LookPath("sh"); err != nil {
		t.Skip("no sh:", err)
	}
}

func TestShellExecutor(t *testing.T) {
	requireShell(t)
	t.Setenv("TEST_INHERITED", "from-worker")
	tests := []struct {
		name       string
		command    []string
		payload    string
		wantOutput string
		wantErr    string
	}{
		{
			name:       "env vars, stdin payload, allowed variable",
			command:    []string{"sh", "-c", `printf '%s|%s|%s|%s|%s|' "$JOBFLEET_JOB_ID" "$JOBFLEET_RUN_ID" "$JOBFLEET_SCHEDULED_AT" "$JOBFLEET_ATTEMPT" "$TEST_INHERITED"; cat; echo " to stderr" >&2`},
			payload:    `{"x":1}`,
			wantOutput: `job-r1|r1|2026-12-01T02:00:00.000Z|1|from-worker|{"x":1} to stderr` + "\n",
		},
		{
			name:       "exit status is a failure, output kept",
			command:    []string{"sh", "-c", "echo partial; exit 3"},
			wantOutput: "partial\n",
			wantErr:    "exit status 3",
		},
		{
			name:       "argv is not interpolated",
			command:    []string{"printf", "%s|%s", "$HOME", "a b; rm -rf /"},
			wantOutput: "$HOME|a b; rm -rf /",
		},
		{
			name:    "missing program",
			command: []string{"/nonexistent/jobfleet-test-program"},
			wantErr: "no such file or directory",
		},
		{
			name:       "killed by a signal",
			command:    []string{"sh", "-c", "echo before; kill -TERM $$"},
			wantOutput: "before\n",
			wantErr:    "signal: terminated",
		},
		{
			name:       "signals to the group reach the command, not its guard",
			command:    []string{"sh", "-c", `trap 'echo got HUP' HUP; trap 'echo got QUIT' QUIT; kill -HUP 0; kill -QUIT 0; echo done`},
			wantOutput: "got HUP\ngot QUIT\ndone\n",
		},
		{
			name:    "program not executable",
			command: []string{"/etc/passwd"},
			wantErr: `start "/etc/passwd": fork/exec /etc/passwd: permission denied`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFakeOrch(t, "a", nil)
			startWorker(t, worker.Config{Orchestrators: worker.StaticOrchestrators(f.URL()), AllowShell: true, ShellEnv: []string{"TEST_INHERITED"}}, nil)
			f.enqueue(f.assignment("r1", api.Executor{Type: "shell", Command: tt.command}, tt.payload))
			c := f.waitComplete(t, "r1")
			if tt.wantErr == "" && (!c.Success || c.Error != "") {
				t.Errorf("completion success=%v error=%q, want success", c.Success, c.Error)
			}
			if tt.wantErr != "" && (c.Success || !strings.Contains(c.Error, tt.wantErr)) {
				t.Errorf("completion success=%v error=%q, want failure containing %q", c.Success, c.Error, tt.wantErr)
			}
			if c.Output != tt.wantOutput {
				t.Errorf("output %q, want %q", c.Output, tt.wantOutput)
			}
		})
	}
}

func TestShellOutputCappedAndValidUTF8(t *testing.T) {
	requireShell(t)
	f := newFakeOrch(t, "a", nil)
	startWorker(t, worker.Config{Orchestrators: worker.StaticOrchestrators(f.URL()), AllowShell: true}, nil)
	// An invalid byte, a 3-byte rune straddling the cap, NUL bytes, then
	// the end of the output in colour.
	script := fmt.Sprintf(`printf '\377'; head -c %d /dev/zero | tr '\0' a; printf '€'; head -c 100000 /dev/zero; printf '\033[31mfailed\033[0m\n'`, api.MaxOutputBytes-2)
	f.enqueue(f.assignment("r1", api.Executor{Type: "shell", Command: []string{"sh", "-c", script}}, ""))
	c := f.waitComplete(t, "r1")
	if !c.Success {
		t.Fatalf("completion %q, want success", c.Error)
	}
	if len(c.Output) > api.MaxOutputBytes || !utf8.ValidString(c.Output) {
		t.Errorf("output of %d bytes, valid UTF-8 %v; want at most %d of valid UTF-8", len(c.Output), utf8.ValidString(c.Output), api.MaxOutputBytes)
	}
	wantEnd := strings.Repeat(`\x00`, 100) + `\x1b[31mfailed\x1b[0m` + "\n"
	if !strings.HasPrefix(c.Output, "\uFFFDaaaa") || !strings.HasSuffix(c.Output, wantEnd) || !strings.Contains(c.Output, " bytes cut ...]") {
		t.Errorf("output %.20q … %.60q, want U+FFFD and a's, a marker, escaped NULs and the escaped coloured end", c.Output, c.Output[max(0, len(c.Output)-60):])
	}
}

// TestShellMinimalEnvironment: a shell command sees PATH, HOME, LANG, its
// run's JOBFLEET_* variables and the variables the worker allows, and
// nothing else of the worker's environment: not its settings, not its
// secrets.
func TestShellMinimalEnvironment(t *testing.T) {
	requireShell(t)
	t.Setenv("JOBFLEET_ETCD_PASSWORD", "etcd-hunter2")
	t.Setenv("JOBFLEET_TOKEN", "token-hunter2")
	t.Setenv("UNLISTED_SECRET", "unlisted-hunter2")
	t.Setenv("LISTED_VAR", "listed-value")
	t.Setenv("HOME", "/home/jobfleet-test")
	f := newFakeOrch(t, "a", nil)
	startWorker(t, worker.Config{Orchestrators: worker.StaticOrchestrators(f.URL()), AllowShell: true, ShellEnv: []string{"LISTED_VAR", "NOT_SET_ANYWHERE"}}, nil)
	a := f.assignment("r1", api.Executor{Type: "shell", Command: []string{"env"}}, "")
	a.JobID = "backup/nightly ü"
	f.enqueue(a)
	c := f.waitComplete(t, "r1")
	if !c.Success {
		t.Fatalf("completion %q, want success", c.Error)
	}
	got := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(c.Output), "\n") {
		k, v, _ := strings.Cut(line, "=")
		got[k] = v
	}
	want := map[string]string{
		"PATH":                  "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
		"HOME":                  "/home/jobfleet-test",
		"LISTED_VAR":            "listed-value",
		"JOBFLEET_JOB_ID":       "backup/nightly ü", // raw, not escaped
		"JOBFLEET_RUN_ID":       "r1",
		"JOBFLEET_SCHEDULED_AT": "2026-12-01T02:00:00.000Z",
		"JOBFLEET_ATTEMPT":      "1",
	}
	if lang, ok := os.LookupEnv("LANG"); ok {
		want["LANG"] = lang
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s=%q, want %q", k, got[k], v)
		}
	}
	for k := range got {
		if _, ok := want[k]; !ok && k != "PWD" && k != "SHLVL" && k != "_" {
			t.Errorf("unexpected variable %s in the command's environment", k)
		}
	}
	if strings.Contains(c.Output, "hunter2") {
		t.Errorf("a secret of the worker's environment reached the command:\n%s", c.Output)
	}
}

func TestShellEnvRefusesWorkerSettings(t *testing.T) {
	for _, names := range [][]string{{"JOBFLEET_TOKEN"}, {"jobfleet_etcd_password"}, {"OK", "1BAD"}, {""}} {
		_, err := worker.New(worker.Config{ID: "w", Orchestrators: worker.StaticOrchestrators("http://127.0.0.1:1"), ShellEnv: names})
		if !errors.Is(err, worker.ErrInvalidConfig) {
			t.Errorf("ShellEnv %q: New = %v, want ErrInvalidConfig", names, err)
		}
		_, err = worker.New(worker.Config{ID: "w", Orchestrators: worker.StaticOrchestrators("http://127.0.0.1:1"), SecretEnv: names})
		if !errors.Is(err, worker.ErrInvalidConfig) {
			t.Errorf("SecretEnv %q: New = %v, want ErrInvalidConfig", names, err)
		}
	}
}

func TestShellRefusedWithoutAllowShell(t *testing.T) {
	requireShell(t)
	f := newFakeOrch(t, "a", nil)
	dir := t.TempDir()
	marker := filepath.Join(dir, "ran")
	startWorker(t, worker.Config{Orchestrators: worker.StaticOrchestrators(f.URL())}, nil)
	f.enqueueForced(f.assignment("r1", api.Executor{Type: "shell", Command: []string{"touch", marker}}, ""))
	c := f.waitComplete(t, "r1")
	if c.Success || !strings.Contains(c.Error, "shell executor refused") {
		t.Errorf("completion success=%v error=%q, want a refusal", c.Success, c.Error)
	}
	if _, err := os.Stat(marker); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the command ran (stat: %v)", err)
	}
	polls, _, _, _ := f.snapshot()
	for _, p := range polls {
		if slices.Contains(p.Executors, "shell") {
			t.Errorf("poll advertised %q, want no shell", p.Executors)
		}
	}
}
