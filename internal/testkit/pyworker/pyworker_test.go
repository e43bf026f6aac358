// Package pyworker tests the Python worker of sdk/python against a real
// fleet: orchestrators on an embedded etcd, the worker a python3 process.
// Without python3 on PATH the tests skip, unless JOBFLEET_PYTHON_TESTS=1
// (CI) makes that a failure.
package pyworker

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jobfleet/jobfleet/api"
	"github.com/jobfleet/jobfleet/client"
	"github.com/jobfleet/jobfleet/internal/etcdserver"
	"github.com/jobfleet/jobfleet/internal/testkit/binarytest"
	"github.com/jobfleet/jobfleet/internal/testkit/etcdtest"
	"github.com/jobfleet/jobfleet/internal/testkit/fleettest"
	"github.com/jobfleet/jobfleet/internal/testkit/proctest"
)

var etcd *etcdtest.Server

func TestMain(m *testing.M) {
	os.Exit(etcdtest.Main(m, &etcd, etcdtest.KeepAliveLeaks()...))
}

// python returns python3's path, or skips the test without it.
func python(t *testing.T) string {
	t.Helper()
	p, err := exec.LookPath("python3")
	if err != nil {
		if os.Getenv("JOBFLEET_PYTHON_TESTS") == "1" {
			t.Fatalf("python3 is not on PATH and JOBFLEET_PYTHON_TESTS=1: %v", err)
		}
		t.Skip("python3 is not on PATH (JOBFLEET_PYTHON_TESTS=1 makes this a failure)")
	}
	return p
}

// sdkDir is sdk/python, from this file's place in the module.
func sdkDir(t *testing.T) string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..", "..", "sdk", "python")
}

// pyWorker is a running python3 process of sdk/python/tests/example_worker.py.
type pyWorker struct {
	cmd    *exec.Cmd
	stderr *bytes.Buffer
	done   chan error
}

// startWorker starts the example worker for fleet f's members with
// token as worker id.
func startWorker(t *testing.T, f *fleettest.Fleet, token, id, markers string) *pyWorker {
	t.Helper()
	return startWorkerFor(t, f.URLs(), token, id, markers)
}

// startWorkerFor starts the example worker for the members at urls, with
// env added to its environment.
func startWorkerFor(t *testing.T, urls []string, token, id, markers string, env ...string) *pyWorker {
	t.Helper()
	cmd := exec.Command(python(t), "-m", "jobfleet_worker", "example_worker:worker")
	cmd.Env = append(os.Environ(),
		"PYTHONPATH="+sdkDir(t)+string(os.PathListSeparator)+filepath.Join(sdkDir(t), "tests"),
		"JOBFLEET_ORCHESTRATORS="+strings.Join(urls, ","),
		"JOBFLEET_TOKEN="+token,
		"JOBFLEET_WORKER_ID="+id,
		"MARKER_DIR="+markers,
	)
	cmd.Env = append(cmd.Env, env...)
	w := &pyWorker{cmd: cmd, stderr: &bytes.Buffer{}, done: make(chan error, 1)}
	cmd.Stderr = w.stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { w.done <- cmd.Wait() }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-w.done
		if t.Failed() {
			t.Logf("python worker %s stderr:\n%s", id, w.stderr.String())
		}
	})
	return w
}

// stopOnceStarted sends the worker SIGTERM once the handler of job's
// attempt wrote its marker in markers (py-slow, py-steady).
func (w *pyWorker) stopOnceStarted(t *testing.T, markers, job string) {
	t.Helper()
	marker := filepath.Join(markers, strings.ReplaceAll(job, "/", "_"))
	deadline := time.Now().Add(30 * time.Second)
	for {
		if _, err := os.Stat(marker); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s did not start within 30s; stderr:\n%s", job, w.stderr.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err := w.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
}

// waitRun returns the run of job id once done says it is done.
func waitRun(t *testing.T, c *client.Client, id string, timeout time.Duration, done func(api.Run) bool) api.Run {
	t.Helper()
	deadline := time.Now().Add(timeout)
	var last api.Run
	for time.Now().Before(deadline) {
		runs, err := c.ListRuns(context.Background(), id, 10)
		if err == nil && len(runs) > 0 {
			last = runs[0]
			if done(last) {
				return last
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("job %s: run not done within %v; last seen %+v", id, timeout, last)
	return last
}

func newFleet(t *testing.T) (*fleettest.Fleet, *client.Client) {
	t.Helper()
	f := fleettest.New(t, etcd, fleettest.Options{Partitions: 8, Scheduler: true, RunLease: 3 * time.Second, Quiet: true})
	f.Join("m1")
	f.Join("m2")
	f.WaitSettled(20 * time.Second)
	c, err := client.New(client.Config{Server: f.URLs()[0], Token: f.AdminToken})
	if err != nil {
		t.Fatal(err)
	}
	return f, c
}

func put(t *testing.T, c *client.Client, doc string) {
	t.Helper()
	var head struct {
		ID string `json:"id"`
	}
	if err := json.Unmarshal([]byte(doc), &head); err != nil {
		t.Fatal(err)
	}
	if _, _, err := c.PutJobJSON(context.Background(), head.ID, []byte(doc)); err != nil {
		t.Fatalf("put %s: %v", head.ID, err)
	}
}

func runAt() string { return time.Now().UTC().Add(200 * time.Millisecond).Format(time.RFC3339Nano) }

// TestPythonWorkerRunsHandlers: the Python worker runs a named handler
// end to end (payload in, output and result back), retries a failing one
// as the job's retry policy says, and passes a step's result to the step
// that needs it.
func TestPythonWorkerRunsHandlers(t *testing.T) {
	f, c := newFleet(t)
	startWorker(t, f, f.WorkerToken, "py-1", t.TempDir())

	put(t, c, `{"id": "py/echo", "run_at": "`+runAt()+`", "executor": {"type": "py-echo"}, "payload": {"n": 7}}`)
	r := waitRun(t, c, "py/echo", 30*time.Second, func(r api.Run) bool { return r.Status.Final() })
	if r.Status != api.RunSucceeded || len(r.Attempts) != 1 {
		t.Fatalf("py/echo: run %s with %d attempts, want succeeded at once: %+v", r.Status, len(r.Attempts), r)
	}
	if a := r.Attempts[0]; a.Worker != "py-1" || !strings.Contains(a.Output, "echo py/echo attempt 1") {
		t.Errorf("py/echo: attempt by %q with output %q, want py-1 and its log line", a.Worker, a.Output)
	}

	put(t, c, `{"id": "py/flaky", "run_at": "`+runAt()+`", "executor": {"type": "py-flaky"}, "retry": {"max_attempts": 3, "initial_backoff": "100ms"}}`)
	r = waitRun(t, c, "py/flaky", 30*time.Second, func(r api.Run) bool { return r.Status.Final() })
	if r.Status != api.RunSucceeded || len(r.Attempts) != 2 {
		t.Fatalf("py/flaky: run %s with %d attempts, want succeeded at the second: %+v", r.Status, len(r.Attempts), r)
	}
	if e := r.Attempts[0].Error; e != "RuntimeError: first attempts fail" {
		t.Errorf("py/flaky: first attempt's error %q, want the exception's text", e)
	}

	put(t, c, `{"id": "py/steps", "run_at": "`+runAt()+`", "steps": [
		{"id": "extract", "executor": {"type": "py-echo"}},
		{"id": "load", "needs": ["extract"], "executor": {"type": "py-echo"}}]}`)
	r = waitRun(t, c, "py/steps", 30*time.Second, func(r api.Run) bool { return r.Status.Final() })
	if r.Status != api.RunSucceeded || len(r.Items) != 2 {
		t.Fatalf("py/steps: run %s with %d items, want succeeded with 2: %+v", r.Status, len(r.Items), r)
	}
	var load struct {
		Step  string                     `json:"step"`
		Needs map[string]json.RawMessage `json:"needs"`
	}
	for _, it := range r.Items {
		if it.Step == "load" {
			if err := json.Unmarshal(it.Result, &load); err != nil {
				t.Fatalf("load's result %s: %v", it.Result, err)
			}
		}
	}
	var extract bytes.Buffer
	_ = json.Compact(&extract, load.Needs["extract"])
	if load.Step != "load" || !strings.Contains(extract.String(), `"step":"extract"`) {
		t.Errorf("load saw step %q and needs of extract %s, want extract's result", load.Step, extract.String())
	}
}

// TestPythonWorkerPushesLiveOutput: what a Python handler logs reaches
// the fleet while the attempt runs: each member answers the run's output
// (the one that does not own its partition by forwarding), as live bytes
// that grow, offsets counted from the attempt's first byte; cancelled,
// the run keeps the handler's output.
func TestPythonWorkerPushesLiveOutput(t *testing.T) {
	f, c := newFleet(t)
	startWorker(t, f, f.WorkerToken, "py-live", t.TempDir())
	put(t, c, `{"id": "py/chatty", "run_at": "`+runAt()+`", "executor": {"type": "py-chatty"}}`)
	r := waitRun(t, c, "py/chatty", 30*time.Second, func(r api.Run) bool { return r.Status == api.RunRunning })
	ctx := context.Background()
	grown := map[string]int{}
	for _, base := range f.URLs() {
		mc, err := client.New(client.Config{Server: base, Token: f.AdminToken})
		if err != nil {
			t.Fatal(err)
		}
		deadline := time.Now().Add(20 * time.Second)
		for {
			out, err := mc.RunOutput(ctx, r.ID, client.OutputOptions{})
			if err == nil && out.Running && out.Source == api.OutputLive && strings.HasPrefix(out.Output, "line 1\n") && strings.Count(out.Output, "\n") >= 3 {
				grown[base] = strings.Count(out.Output, "\n")
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: live output of %s: %+v %v; want running, live, from line 1, 3 lines at least", base, r.ID, out, err)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	first := f.URLs()[0]
	if grown[f.URLs()[1]] < grown[first] {
		t.Errorf("live output shrank from %d to %d lines", grown[first], grown[f.URLs()[1]])
	}
	if _, _, err := c.CancelRun(ctx, r.ID); err != nil {
		t.Fatal(err)
	}
	done := waitRun(t, c, "py/chatty", 30*time.Second, func(r api.Run) bool { return r.Status.Final() })
	if done.Status != api.RunCancelled {
		t.Fatalf("run %s after cancel, want cancelled", done.Status)
	}
}

// TestPythonWorkerRefusedWithViewerToken: a viewer's credential cannot
// register a worker; the process says so and exits 1.
func TestPythonWorkerRefusedWithViewerToken(t *testing.T) {
	f, _ := newFleet(t)
	w := startWorker(t, f, f.Token(api.RoleViewer, ""), "py-viewer", t.TempDir())
	select {
	case err := <-w.done:
		w.done <- err // for the cleanup
		var ee *exec.ExitError
		if !errorsAs(err, &ee) || ee.ExitCode() != 1 || !strings.Contains(w.stderr.String(), "403") {
			t.Fatalf("worker with a viewer's token: exit %v, stderr %q; want exit 1 naming 403", err, w.stderr.String())
		}
	case <-time.After(30 * time.Second):
		t.Fatal("a worker with a viewer's token is still running after 30s")
	}
}

// TestPythonWorkerStopsGracefully: on SIGTERM the worker stops polling,
// gives a running attempt shutdown_timeout to end, then reports it
// failed ("worker shutting down") so that it is retried at once, not
// after its run lease, and exits 0.
func TestPythonWorkerStopsGracefully(t *testing.T) {
	f, c := newFleet(t)
	markers := t.TempDir()
	w := startWorker(t, f, f.WorkerToken, "py-2", markers)
	put(t, c, `{"id": "py/slow", "run_at": "`+runAt()+`", "executor": {"type": "py-slow"}, "retry": {"max_attempts": 3, "initial_backoff": "1h"}}`)
	w.stopOnceStarted(t, markers, "py/slow")
	select {
	case err := <-w.done:
		w.done <- err
		if err != nil {
			t.Fatalf("worker exit after SIGTERM: %v; stderr:\n%s", err, w.stderr.String())
		}
	case <-time.After(20 * time.Second):
		t.Fatal("worker still running 20s after SIGTERM")
	}
	r := waitRun(t, c, "py/slow", 10*time.Second, func(r api.Run) bool { return len(r.Attempts) > 0 && !r.Attempts[0].FinishedAt.IsZero() })
	if a := r.Attempts[0]; a.Error != "worker shutting down" || r.Status != api.RunFailed || !strings.Contains(a.Output, "stopped when asked") {
		t.Fatalf("py/slow after SIGTERM: run %s, attempt error %q output %q; want failed (a retry follows), shutting down, with the handler's output", r.Status, a.Error, a.Output)
	}
	workers, err := c.Workers(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, wk := range workers.Workers {
		if wk.ID == "py-2" {
			t.Errorf("worker py-2 is still registered after a graceful stop")
		}
	}
}

// TestPythonWorkerRefusesResultsThatAreNotJSON: a handler returning NaN
// fails its attempt at once, saying why, with its output kept (not left
// to its run lease).
func TestPythonWorkerRefusesResultsThatAreNotJSON(t *testing.T) {
	f, c := newFleet(t)
	startWorker(t, f, f.WorkerToken, "py-4", t.TempDir())
	put(t, c, `{"id": "py/nan", "run_at": "`+runAt()+`", "executor": {"type": "py-nan"}}`)
	r := waitRun(t, c, "py/nan", 20*time.Second, func(r api.Run) bool { return r.Status.Final() })
	if a := r.Attempts[0]; r.Status != api.RunDead || !strings.Contains(a.Error, "result: not JSON") || !strings.Contains(a.Output, "about to return NaN") {
		t.Fatalf("py/nan: %s, attempt %+v; want dead at once, its error naming the result, its output kept", r.Status, a)
	}
}

// TestPythonWorkerFinishesAttemptsWhileStopping: a worker told to stop
// lets an attempt that needs longer than its registration's TTL (6 s)
// finish within its shutdown_timeout: its registration lives on until
// then, so the attempt is not taken for lost and its report is
// recorded, once.
func TestPythonWorkerFinishesAttemptsWhileStopping(t *testing.T) {
	f, c := newFleet(t)
	markers := t.TempDir()
	w := startWorkerFor(t, f.URLs(), f.WorkerToken, "py-3", markers, "SHUTDOWN_TIMEOUT=20")
	put(t, c, `{"id": "py/steady", "run_at": "`+runAt()+`", "executor": {"type": "py-steady"}, "payload": {"seconds": 8}, "retry": {"max_attempts": 3}}`)
	w.stopOnceStarted(t, markers, "py/steady")
	r := waitRun(t, c, "py/steady", 30*time.Second, func(r api.Run) bool { return r.Status.Final() || r.Status == api.RunFailed })
	if r.Status != api.RunSucceeded || len(r.Attempts) != 1 || !strings.Contains(r.Attempts[0].Output, "slept 8") {
		t.Fatalf("py/steady after SIGTERM: %s, attempts %+v; want succeeded by its one attempt", r.Status, r.Attempts)
	}
	select {
	case err := <-w.done:
		w.done <- err
		if err != nil {
			t.Fatalf("worker exit after SIGTERM: %v; stderr:\n%s", err, w.stderr.String())
		}
	case <-time.After(20 * time.Second):
		t.Fatal("worker still running 20s after its attempt ended")
	}
}

func errorsAs(err error, target **exec.ExitError) bool { return errors.As(err, target) }

// TestPythonUnits runs the Python worker's own unit tests
// (sdk/python/tests/test_*.py).
func TestPythonUnits(t *testing.T) {
	cmd := exec.Command(python(t), "-m", "unittest", "discover", "-s", "tests", "-p", "test_*.py")
	cmd.Dir = sdkDir(t)
	cmd.Env = append(os.Environ(), "PYTHONPATH="+sdkDir(t))
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("python3 -m unittest: %v\n%s", err, out)
	}
}

// TestPythonWorkerAgainstDev: the Python worker against `jobfleet dev`
// started as a new user does (its credentials from the data directory):
// a named handler runs end to end, and its result and output are
// recorded.
func TestPythonWorkerAgainstDev(t *testing.T) {
	python(t)
	if testing.Short() {
		t.Skip("builds the jobfleet binary")
	}
	bin := filepath.Join(t.TempDir(), "jobfleet")
	if err := binarytest.Build(bin); err != nil {
		t.Fatal(err)
	}
	free := func() string {
		a, err := etcdserver.FreeAddr()
		if err != nil {
			t.Fatal(err)
		}
		return a
	}
	data, home, listen := t.TempDir(), t.TempDir(), free()
	dev := proctest.Start(t, "jobfleet dev", bin, []string{"dev", "--data-dir=" + data, "--listen=" + listen,
		"--etcd-listen=" + free(), "--etcd-peer-listen=" + free(), "--orchestrators=1", "--workers=0", "--examples=false"},
		proctest.Options{Env: append(os.Environ(), "HOME="+home, "XDG_CONFIG_HOME="+filepath.Join(home, ".config")), Combined: true, LogLines: 40})
	base := "http://" + listen
	read := func(name string) string {
		b, _ := os.ReadFile(filepath.Join(data, name))
		return strings.TrimSpace(string(b))
	}
	proctest.Poll(t, 60*time.Second, 100*time.Millisecond, "jobfleet dev ready", func() (bool, string) {
		if dev.Exited() {
			t.Fatalf("jobfleet dev exited: %v", dev.Cmd.ProcessState)
		}
		resp, err := http.Get(base + "/readyz")
		if err != nil {
			return false, err.Error()
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK && read("admin.token") != "" && read("worker.token") != "", fmt.Sprintf("GET /readyz: %d", resp.StatusCode)
	})
	c, err := client.New(client.Config{Server: base, Token: read("admin.token")})
	if err != nil {
		t.Fatal(err)
	}
	startWorkerFor(t, []string{base}, read("worker.token"), "py-dev", t.TempDir())
	put(t, c, `{"id": "py/on-dev", "run_at": "`+runAt()+`", "executor": {"type": "py-echo"}, "payload": {"from": "dev"}}`)
	r := waitRun(t, c, "py/on-dev", 30*time.Second, func(r api.Run) bool { return r.Status.Final() })
	if r.Status != api.RunSucceeded || len(r.Attempts) != 1 || r.Attempts[0].Worker != "py-dev" || !strings.Contains(r.Attempts[0].Output, "echo py/on-dev attempt 1") {
		t.Fatalf("run on dev: %s, attempts %+v; want succeeded by py-dev with the handler's output", r.Status, r.Attempts)
	}
	dev.Signal(t, syscall.SIGINT)
	if code := dev.Wait(t, 30*time.Second); code != 0 {
		t.Errorf("jobfleet dev exited %d after SIGINT", code)
	}
}
