package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jobfleet/jobfleet/api"
	"github.com/jobfleet/jobfleet/internal/testkit/authtest"
	"github.com/jobfleet/jobfleet/internal/testkit/etcdtest"
	"github.com/jobfleet/jobfleet/internal/testkit/proctest"
)

// TestKilledWorkerProcessIsReplacedAtOnce: a `jobfleet worker` process
// holding an attempt is killed (SIGKILL); once its registration ends
// (revoked when its presence stream broke, at the latest expired after
// --worker-ttl, 6s by default), the orchestrator retries the run on
// another worker process, long before the run lease (30s) would have
// ended the attempt. The run document records why, and each attempt
// reached the receiver once.
func TestKilledWorkerProcessIsReplacedAtOnce(t *testing.T) {
	ns := etcdtest.Namespace(t)
	o := startOrchestrator(t, ns, "orch-w")
	if o.Exited() {
		t.Fatalf("orchestrator exited at start-up: %v", o.Cmd.ProcessState)
	}
	waitSettled(t, o, []string{"orch-w"}, 20*time.Second)

	hook := newAttemptHook(t)
	startWorker := func(id string) *proctest.Process { return startHTTPWorker(t, o, id) }
	doomed := startWorker("doomed")
	var ws api.WorkerList
	poll(t, 15*time.Second, "the worker registered", func() (bool, string) {
		code, err := getJSON(o.url+"/v1/cluster/workers", &ws)
		return err == nil && code == http.StatusOK && len(ws.Workers) == 1, fmt.Sprintf("GET /v1/cluster/workers: %d %v %+v", code, err, ws)
	})
	if w := ws.Workers[0]; w.ID != "doomed" || w.Concurrency != 1 || w.Orchestrator != "orch-w" || !strings.Contains(strings.Join(w.Executors, ","), "http") {
		t.Fatalf("registration %+v, want doomed, concurrency 1, held by orch-w, serving http", w)
	}

	job := api.Job{ID: "survives-its-worker", Executor: api.Executor{Type: "http", URL: hook.URL},
		Retry: api.RetryPolicy{MaxAttempts: 3, InitialBackoff: api.Duration(100 * time.Millisecond)}}
	createJob(t, o, job)
	runs := func() []api.Run { return jobRuns(o, job.ID) }
	poll(t, 15*time.Second, "attempt 1 running on the doomed worker", func() (bool, string) {
		rs := runs()
		return len(rs) == 1 && rs[0].Status == api.RunRunning && rs[0].Attempts[0].Worker == "doomed", fmt.Sprintf("runs %+v", rs)
	})
	// The run says running once the attempt is granted, before the worker
	// has called the hook: kill it only once the call arrived, or attempt 1
	// would never reach the hook.
	poll(t, 15*time.Second, "attempt 1 reached the hook", func() (bool, string) {
		attempts := hook.executions()
		return attempts["1"] == 1, fmt.Sprintf("executions by attempt %v", attempts)
	})

	killedAt := time.Now()
	doomed.Signal(t, syscall.SIGKILL)
	doomed.Wait(t, 5*time.Second)
	startWorker("rescuer")
	var run api.Run
	poll(t, 25*time.Second, "the run succeeded on another worker", func() (bool, string) {
		rs := runs()
		if len(rs) == 1 {
			run = rs[0]
		}
		return run.Status == api.RunSucceeded, fmt.Sprintf("run %+v", run)
	})
	t.Logf("run retried and succeeded %v after its worker was killed (presence grace 500ms, worker TTL 6s, run lease 30s)", time.Since(killedAt).Round(time.Millisecond))
	if len(run.Attempts) != 2 || run.Attempts[1].Worker != "rescuer" || !strings.Contains(run.Attempts[0].Error, `worker "doomed" lost: its registration expired`) {
		t.Fatalf("attempts %+v, want attempt 1 lost with the doomed worker's registration, attempt 2 by the rescuer", run.Attempts)
	}
	if lost := run.Attempts[0].FinishedAt.Sub(run.Attempts[0].StartedAt); lost >= 20*time.Second {
		t.Errorf("attempt 1 ended %v after it started, want well within the 30s run lease", lost)
	}
	if attempts := hook.executions(); attempts["1"] != 1 || attempts["2"] != 1 || len(attempts) != 2 {
		t.Fatalf("executions by attempt %v, want attempt 1 and attempt 2 once each", attempts)
	}
}

// TestWorkerProcessWithoutCredentialExits: `jobfleet worker` started
// without a credential against a fleet that requires one says so at once
// in an error line naming the orchestrator and the flags that fix it,
// and exits non-zero after the start grace instead of retrying forever.
func TestWorkerProcessWithoutCredentialExits(t *testing.T) {
	ns := etcdtest.Namespace(t)
	o := startOrchestrator(t, ns, "orch-cred")
	if o.Exited() {
		t.Fatalf("orchestrator exited at start-up: %v", o.Cmd.ProcessState)
	}
	w := startProc(t, "anonymous-worker", "worker", "--orchestrators="+o.url, "--id=anonymous", "--poll-wait=1s", "--log-format=json")
	if code := w.Wait(t, time.Minute); code == 0 {
		t.Fatal("jobfleet worker without a credential exited 0, want an error")
	}
	stderr := w.Stderr.String()
	line := logLine(stderr, "refused the worker's credentials")
	if line == "" {
		t.Fatalf("no log line about the refused credentials:\n%s", stderr)
	}
	var entry struct {
		Level        string `json:"level"`
		Msg          string `json:"msg"`
		Orchestrator string `json:"orchestrator"`
		Status       int    `json:"status"`
	}
	if err := json.Unmarshal([]byte(line), &entry); err != nil {
		t.Fatalf("log line %q: %v", line, err)
	}
	if entry.Level != "error" || entry.Orchestrator != o.url || entry.Status != http.StatusUnauthorized || !strings.Contains(entry.Msg, "--token-file") {
		t.Errorf("log line %+v, want an error naming the orchestrator %s, status 401 and the fix (--token, --token-file)", entry, o.url)
	}
	if !strings.Contains(stderr, "credentials refused") || !strings.Contains(stderr, "JOBFLEET_TOKEN") {
		t.Errorf("stderr lacks the command's error (credentials refused, and the fix):\n%s", stderr)
	}
}

// TestWorkerProcessWithReaderCredentialExits: `jobfleet worker --discover`
// with a viewer's or an operator's credential reads the members list (any
// role may), but no orchestrator accepts its registration or polls: it
// logs the refusal (403) and exits non-zero after the start grace, as a
// worker without a credential does, instead of backing off forever.
func TestWorkerProcessWithReaderCredentialExits(t *testing.T) {
	ns := etcdtest.Namespace(t)
	o := startOrchestrator(t, ns, "orch-reader")
	if o.Exited() {
		t.Fatalf("orchestrator exited at start-up: %v", o.Cmd.ProcessState)
	}
	client := etcd.Client(t)
	workers := map[api.Role]*proctest.Process{}
	for _, role := range []api.Role{api.RoleViewer, api.RoleOperator} {
		file := filepath.Join(t.TempDir(), string(role)+".token")
		if err := os.WriteFile(file, []byte(authtest.Token(t, client, ns, role, "")+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		workers[role] = startProc(t, string(role)+"-worker", "worker", "--orchestrators="+o.url, "--discover", "--token-file="+file,
			"--id="+string(role), "--poll-wait=1s", "--log-format=json")
	}
	for role, w := range workers {
		if code := w.Wait(t, time.Minute); code == 0 {
			t.Errorf("jobfleet worker --discover with a %s credential exited 0, want an error", role)
		}
		// The first refusal may be a 401, should the orchestrator not
		// have seen the new credential yet: look for the 403.
		stderr := w.Stderr.String()
		forbidden := false
		for line := range strings.Lines(stderr) {
			var entry struct {
				Level  string `json:"level"`
				Msg    string `json:"msg"`
				Status int    `json:"status"`
			}
			if json.Unmarshal([]byte(line), &entry) == nil && entry.Level == "error" && entry.Status == http.StatusForbidden &&
				strings.Contains(entry.Msg, "refused the worker's credentials") {
				forbidden = true
			}
		}
		if !forbidden {
			t.Errorf("%s: no error line saying the credentials were refused with 403:\n%s", role, stderr)
		}
		if !strings.Contains(stderr, "credentials refused") {
			t.Errorf("%s: stderr lacks the command's error (credentials refused):\n%s", role, stderr)
		}
	}
}

// attemptHook is the endpoint of an http job that counts its executions
// by attempt (the Jobfleet-Attempt header); attempt 1 hangs until the
// test ends, as an attempt does whose worker dies under it.
type attemptHook struct {
	*httptest.Server
	mu        sync.Mutex
	byAttempt map[string]int
}

func newAttemptHook(t *testing.T) *attemptHook {
	t.Helper()
	h := &attemptHook{byAttempt: map[string]int{}}
	hang := make(chan struct{})
	h.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		a := r.Header.Get("Jobfleet-Attempt")
		h.mu.Lock()
		h.byAttempt[a]++
		h.mu.Unlock()
		if a == "1" {
			<-hang // attempt 1 runs until its worker dies
		}
	}))
	t.Cleanup(h.Close)
	t.Cleanup(func() { close(hang) }) // first: Close waits for the handlers
	return h
}

// executions returns the executions so far by attempt number.
func (h *attemptHook) executions() map[string]int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return maps.Clone(h.byAttempt)
}

// startHTTPWorker starts a "jobfleet worker" process of one slot serving
// http jobs on loopback, registered with orchestrator o.
func startHTTPWorker(t *testing.T, o *orch, id string) *proctest.Process {
	t.Helper()
	return startProc(t, id, "worker", "--orchestrators="+o.url, "--token-file="+adminSecretFile, "--id="+id,
		"--concurrency=1", "--http-allow=127.0.0.1", "--poll-wait=1s", "--log-format=json")
}

// createJob creates job through o's API, failing the test unless it is
// created.
func createJob(t *testing.T, o *orch, job api.Job) {
	t.Helper()
	body, _ := json.Marshal(job)
	resp, err := httpClient.Post(o.url+"/v1/jobs", "application/json", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusCreated {
		t.Fatalf("create job: %d", resp.StatusCode)
	}
}

// jobRuns returns job id's runs as o lists them, none where o does not
// answer.
func jobRuns(o *orch, id string) []api.Run {
	var l api.RunList
	if code, err := getJSON(o.url+"/v1/jobs/"+url.PathEscape(id)+"/runs", &l); err != nil || code != http.StatusOK {
		return nil
	}
	return l.Runs
}
