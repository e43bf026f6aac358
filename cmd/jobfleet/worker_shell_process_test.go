//go:build linux

package main

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jobfleet/jobfleet/api"

	"github.com/jobfleet/jobfleet/internal/testkit/etcdtest"
)

// TestKilledWorkerProcessTakesItsShellCommandWithIt: a `jobfleet worker
// --allow-shell` process running a shell command that forked a background
// child is killed with SIGKILL; the command, its child and whatever runs
// them must all be gone soon after, not run on beside the retry the fleet
// makes once the worker's registration ends. (Linux: it reads /proc to
// tell a zombie from a running process.)
func TestKilledWorkerProcessTakesItsShellCommandWithIt(t *testing.T) {
	if _, err := os.Stat("/bin/sh"); err != nil {
		t.Skip("no /bin/sh")
	}
	ns := etcdtest.Namespace(t)
	o := startOrchestrator(t, ns, "orch-s")
	if o.Exited() {
		t.Fatalf("orchestrator exited at start-up: %v", o.Cmd.ProcessState)
	}
	waitSettled(t, o, []string{"orch-s"}, 20*time.Second)
	doomed := startProc(t, "doomed", "worker", "--orchestrators="+o.url, "--token-file="+adminSecretFile, "--id=doomed",
		"--concurrency=1", "--allow-shell", "--poll-wait=1s", "--log-format=json")

	// The command writes the PIDs of its background child, of itself and
	// of its parent, then waits for the child.
	pidFile := filepath.Join(t.TempDir(), "pids")
	script := fmt.Sprintf(`sleep 60 & echo $! > %[1]s.tmp; echo $$ >> %[1]s.tmp; echo $PPID >> %[1]s.tmp; mv %[1]s.tmp %[1]s; wait`, pidFile)
	job := api.Job{ID: "shell-dies-with-its-worker", Executor: api.Executor{Type: "shell", Command: []string{"/bin/sh", "-c", script}},
		Retry: api.RetryPolicy{MaxAttempts: 1}}
	createJob(t, o, job)

	var pids []int
	poll(t, 20*time.Second, "the command wrote its PIDs", func() (bool, string) {
		b, err := os.ReadFile(pidFile)
		if err != nil {
			return false, err.Error()
		}
		pids = pids[:0]
		for _, f := range strings.Fields(string(b)) {
			pid, err := strconv.Atoi(f)
			if err != nil {
				return false, fmt.Sprintf("bad PID %q", f)
			}
			pids = append(pids, pid)
		}
		return len(pids) == 3, fmt.Sprintf("PIDs %v", pids)
	})
	t.Cleanup(func() {
		for _, pid := range pids[:2] { // never leave the command running, even when the test fails
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	})
	for _, pid := range pids {
		if !running(pid) {
			t.Fatalf("process %d of the command (PIDs %v: child, shell, parent) is not running before the worker is killed", pid, pids)
		}
	}

	doomed.Signal(t, syscall.SIGKILL)
	doomed.Wait(t, 5*time.Second)
	poll(t, 10*time.Second, "every process of the command gone after its worker was killed", func() (bool, string) {
		var left []int
		for _, pid := range pids {
			if running(pid) {
				left = append(left, pid)
			}
		}
		return len(left) == 0, fmt.Sprintf("still running: %v of %v (child, shell, parent)", left, pids)
	})
}

// running reports whether process pid exists and is not a zombie.
func running(pid int) bool {
	if err := syscall.Kill(pid, 0); errors.Is(err, syscall.ESRCH) {
		return false
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	i := bytes.LastIndexByte(b, ')')
	return i < 0 || i+2 >= len(b) || (b[i+2] != 'Z' && b[i+2] != 'X')
}
