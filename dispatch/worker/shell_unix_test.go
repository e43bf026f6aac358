//go:build unix

package worker_test

// The shell executor's process-group handling: unix only, as the
// executor (shell_unix.go).

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

	"github.com/jonboulle/clockwork"

	"github.com/jobfleet/jobfleet/api"
	"github.com/jobfleet/jobfleet/dispatch/worker"
)

// readPIDs creates a FIFO, returns its path, and a function that reads the
// PIDs a command writes to it (blocking until it does).
func pidFIFO(t *testing.T) (string, func() []int) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "pids")
	if err := syscall.Mkfifo(path, 0o600); err != nil {
		t.Skip("mkfifo:", err)
	}
	return path, func() []int {
		t.Helper()
		type result struct {
			b   []byte
			err error
		}
		ch := make(chan result, 1)
		go func() {
			b, err := os.ReadFile(path) // blocks until the command opens it
			ch <- result{b, err}
		}()
		r := recv(t, ch, "the command's PIDs")
		if r.err != nil {
			t.Fatalf("read PIDs: %v", r.err)
		}
		var pids []int
		for _, f := range strings.Fields(string(r.b)) {
			pid, err := strconv.Atoi(f)
			if err != nil {
				t.Fatalf("bad PID %q", f)
			}
			pids = append(pids, pid)
		}
		return pids
	}
}

// waitGone waits until process pid has exited (gone, or a zombie waiting
// for a parent that does not reap it).
func waitGone(t *testing.T, pid int) {
	t.Helper()
	deadline := time.Now().Add(waitTimeout)
	for {
		if err := syscall.Kill(pid, 0); errors.Is(err, syscall.ESRCH) {
			return
		}
		if b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid)); err == nil {
			if i := bytes.LastIndexByte(b, ')'); i > 0 && i+2 < len(b) && (b[i+2] == 'Z' || b[i+2] == 'X') {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("process %d still running after its attempt ended", pid)
		}
		time.Sleep(10 * time.Millisecond) // polling the OS: no event to wait on
	}
}

func TestShellTimeoutKillsProcessGroup(t *testing.T) {
	checkShellTimesOut(t, `sleep 30 & echo $$ $! > "$0"; sleep 30`, func(pids []int) {
		if len(pids) != 2 {
			t.Fatalf("PIDs %v, want the shell's and its background child's", pids)
		}
	})
}

func TestShellTimeoutEscalatesToSIGKILL(t *testing.T) {
	// Both the shell and its child ignore SIGTERM.
	checkShellTimesOut(t, `trap '' TERM; sh -c 'trap "" TERM; sleep 30' & echo $$ $! > "$0"; while :; do sleep 1; done`, nil)
}

// checkShellTimesOut runs script (sh -c, with a FIFO to write PIDs to as
// $0) as an attempt of a 10s timeout on a fake clock, hands the PIDs it
// wrote to checkPIDs (if not nil), lets the timeout pass, and checks that
// the attempt failed as timed out and that every PID is gone.
func checkShellTimesOut(t *testing.T, script string, checkPIDs func(pids []int)) {
	t.Helper()
	requireShell(t)
	clock := clockwork.NewFakeClock()
	f := newFakeOrch(t, "a", clock)
	fifo, readPIDs := pidFIFO(t)
	startWorker(t, worker.Config{Orchestrators: worker.StaticOrchestrators(f.URL()), AllowShell: true, Clock: clock, KillGrace: 100 * time.Millisecond}, nil)
	a := f.assignment("r1", api.Executor{Type: "shell", Command: []string{"sh", "-c", script, fifo}}, "")
	a.Timeout = api.Duration(10 * time.Second)
	f.enqueue(a)
	pids := readPIDs()
	if checkPIDs != nil {
		checkPIDs(pids)
	}
	clock.Advance(10 * time.Second)
	c := f.waitComplete(t, "r1")
	if c.Success || c.Error != "timed out after 10s" {
		t.Errorf("completion success=%v error=%q, want failure %q", c.Success, c.Error, "timed out after 10s")
	}
	for _, pid := range pids {
		waitGone(t, pid)
	}
}

func TestShellLeftoverChildrenKilledAfterExit(t *testing.T) {
	requireShell(t)
	f := newFakeOrch(t, "a", nil)
	fifo, readPIDs := pidFIFO(t)
	startWorker(t, worker.Config{Orchestrators: worker.StaticOrchestrators(f.URL()), AllowShell: true, KillGrace: 100 * time.Millisecond}, nil)
	f.enqueue(f.assignment("r1", api.Executor{Type: "shell", Command: []string{"sh", "-c", `sleep 30 & echo $! > "$0"; echo done`, fifo}}, ""))
	pids := readPIDs()
	c := f.waitComplete(t, "r1")
	if !c.Success || c.Output != "done\n" {
		t.Errorf("completion success=%v error=%q output=%q, want success with %q", c.Success, c.Error, c.Output, "done\n")
	}
	for _, pid := range pids {
		waitGone(t, pid)
	}
}

// TestShellCancelledAtShutdown: the process group is killed when the
// shutdown timeout cancels the attempt, too.
func TestShellCancelledAtShutdown(t *testing.T) {
	requireShell(t)
	clock := clockwork.NewFakeClock()
	f := newFakeOrch(t, "a", clock)
	lg, logs := newTestLogger(t)
	fifo, readPIDs := pidFIFO(t)
	tw := startWorker(t, worker.Config{Orchestrators: worker.StaticOrchestrators(f.URL()), AllowShell: true, Clock: clock, Logger: lg,
		KillGrace: 100 * time.Millisecond, ShutdownTimeout: time.Minute}, nil)
	f.enqueue(withLease(f.assignment("r1", api.Executor{Type: "shell", Command: []string{"sh", "-c", `sleep 30 & echo $$ $! > "$0"; wait`, fifo}}, ""), time.Hour))
	pids := readPIDs()
	tw.cancel()
	logs.wait(t, "waiting for in-flight attempts")
	clock.Advance(time.Minute)
	c := f.waitComplete(t, "r1")
	if c.Success || c.Error != "worker shutting down" {
		t.Errorf("completion success=%v error=%q, want failure %q", c.Success, c.Error, "worker shutting down")
	}
	for _, pid := range pids {
		waitGone(t, pid)
	}
	if err := tw.result(); err != nil {
		t.Errorf("Run = %v", err)
	}
}
