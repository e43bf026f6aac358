package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/url"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/jobfleet/jobfleet/api"

	"github.com/jobfleet/jobfleet/internal/testkit/etcdtest"
)

// TestRunLogsFollowsARunningShellJob: `jobfleet run logs RUN -f` against
// a real member and a `jobfleet worker --allow-shell` prints the lines a
// shell command writes while it still runs, then exits 0 once the attempt
// has ended, having printed them all in order; `run logs` without -f
// prints the same afterwards.
func TestRunLogsFollowsARunningShellJob(t *testing.T) {
	if _, err := os.Stat("/bin/sh"); err != nil {
		t.Skip("no /bin/sh")
	}
	ns := etcdtest.Namespace(t)
	o := startOrchestrator(t, ns, "orch-logs")
	if o.Exited() {
		t.Fatalf("orchestrator exited at start-up: %v", o.Cmd.ProcessState)
	}
	waitSettled(t, o, []string{"orch-logs"}, 20*time.Second)

	const id, lines = "logs/ticker", 10
	later := time.Now().Add(24 * time.Hour)
	job := api.Job{ID: id, RunAt: &later, Executor: api.Executor{Type: "shell",
		Command: []string{"/bin/sh", "-c", fmt.Sprintf("i=1; while [ $i -le %d ]; do echo tick $i; i=$((i+1)); sleep 0.2; done", lines)}}}
	post := func(path string, body any, out any) {
		t.Helper()
		var b []byte
		if body != nil {
			b, _ = json.Marshal(body)
		}
		resp, err := httpClient.Post(o.url+path, "application/json", bytes.NewReader(b))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		if resp.StatusCode/100 != 2 {
			t.Fatalf("POST %s: %d", path, resp.StatusCode)
		}
		if out != nil {
			json.NewDecoder(resp.Body).Decode(out)
		}
	}
	post("/v1/jobs", job, nil)
	var tr api.Triggered
	post("/v1/jobs/"+url.PathEscape(id)+"/trigger", nil, &tr)
	status := func() api.RunStatus {
		resp, err := httpClient.Get(o.url + "/v1/runs/" + url.PathEscape(tr.RunID))
		if err != nil {
			return ""
		}
		defer resp.Body.Close()
		var r api.Run
		json.NewDecoder(resp.Body).Decode(&r)
		return r.Status
	}
	// Followed before any worker is up: -f waits for the first attempt,
	// saying so.
	logs := startProc(t, "run logs -f", "run", "logs", "--server="+o.url, "--token-file="+adminSecretFile, tr.RunID, "-f")
	poll(t, 20*time.Second, "run logs -f saying it waits", func() (bool, string) {
		return strings.Contains(logs.Stderr.String(), "waiting for the first attempt"), logs.Stderr.String()
	})
	if logs.Exited() {
		t.Fatalf("run logs -f exited before the run started: %s", logs.Stderr.String())
	}
	startProc(t, "worker", "worker", "--orchestrators="+o.url, "--token-file="+adminSecretFile, "--id=logs-worker",
		"--concurrency=1", "--allow-shell", "--poll-wait=1s", "--log-format=json")
	poll(t, 20*time.Second, "the run to start", func() (bool, string) { s := status(); return s == api.RunRunning, string(s) })
	poll(t, 20*time.Second, "a line printed while the attempt runs", func() (bool, string) {
		out := logs.Stdout.String()
		return strings.Contains(out, "tick 1\n") && !strings.Contains(out, fmt.Sprintf("tick %d\n", lines)) && status() == api.RunRunning, out
	})
	if code := logs.Wait(t, 30*time.Second); code != 0 {
		t.Fatalf("run logs -f: exit code %d\n%s%s", code, logs.Stdout.String(), logs.Stderr.String())
	}
	var want strings.Builder
	for i := 1; i <= lines; i++ {
		fmt.Fprintf(&want, "tick %d\n", i)
	}
	if got := logs.Stdout.String(); got != want.String() {
		t.Fatalf("run logs -f printed %q, want %q", got, want.String())
	}
	poll(t, 20*time.Second, "the run to succeed", func() (bool, string) { s := status(); return s == api.RunSucceeded, string(s) })
	if out, _ := runCLIProc(t, "run", "logs", "--server="+o.url, "--token-file="+adminSecretFile, tr.RunID); out != want.String() {
		t.Fatalf("run logs printed %q, want %q", out, want.String())
	}
}
