// Package proctest runs child processes in tests (the jobfleet binary, a
// shell, an etcd) and polls for conditions on them: a Process is killed
// when its test ends if it still runs, its output is kept in memory and
// logged if the test failed, and its signals and exit are checked with
// bounded waits that fail the test.
//
// cmd/jobfleet's process tests and the deploy walkthrough
// (internal/testkit/walkthrough) use it.
//
// What it does not promise: a Process signals its own process only, not
// a process group; children it forked are not killed with it, and one
// that still holds the output keeps Wait (and the end of the test)
// waiting until it exits.
package proctest

import (
	"bytes"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"
)

// Buffer is a bytes.Buffer safe for concurrent use: a process writes
// through exec's copying goroutine while the test reads.
type Buffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

// Write appends p.
func (s *Buffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

// String returns what was written so far.
func (s *Buffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// Options configures Start.
type Options struct {
	// Env is the process's environment; nil is the test's own.
	Env []string
	// Dir is its working directory; "" is the test's.
	Dir string
	// Combined writes standard error into Stdout too (Stderr is then
	// Stdout), in the order the process wrote them.
	Combined bool
	// LogLines, if not 0, is how many of the last lines of each output
	// are logged when the test failed; 0 logs all of it.
	LogLines int
	// AtEnd, if not nil, is called when the test ends, after the process
	// was reaped and before its output is logged (if the test failed):
	// where a test checks the output once more, and may fail.
	AtEnd func(p *Process)
}

// Process is a child process a test started. Its methods are safe for
// concurrent use; Cmd.ProcessState may be read once Exited reports true.
type Process struct {
	// Name names it in failures and logs.
	Name string
	// Cmd is the running command.
	Cmd *exec.Cmd
	// Stdout and Stderr hold its output (one Buffer with
	// Options.Combined).
	Stdout, Stderr *Buffer

	done chan struct{} // closed when the process has exited and been reaped
}

// Start starts path with args as opts says, or fails the test. When the
// test ends the process is killed if it still runs (SIGKILL, which also
// ends a stopped process) and reaped, opts.AtEnd is called, and if the
// test failed its exit state and output are logged.
func Start(t testing.TB, name, path string, args []string, opts Options) *Process {
	t.Helper()
	p := &Process{Name: name, Stdout: &Buffer{}, Stderr: &Buffer{}, done: make(chan struct{})}
	if opts.Combined {
		p.Stderr = p.Stdout
	}
	p.Cmd = exec.Command(path, args...)
	p.Cmd.Env = opts.Env
	p.Cmd.Dir = opts.Dir
	p.Cmd.Stdout = p.Stdout
	p.Cmd.Stderr = p.Stderr
	if err := p.Cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", name, err)
	}
	go func() {
		_ = p.Cmd.Wait() // the exit status is read from ProcessState
		close(p.done)
	}()
	t.Cleanup(func() {
		if !p.Exited() {
			_ = p.Cmd.Process.Kill()
			<-p.done
		}
		if opts.AtEnd != nil {
			opts.AtEnd(p)
		}
		if !t.Failed() {
			return
		}
		if opts.Combined {
			t.Logf("----- %s %v: %v\n%s", name, args, p.Cmd.ProcessState, tail(p.Stdout.String(), opts.LogLines))
		} else {
			t.Logf("----- %s %v: %v\n----- stdout:\n%s\n----- stderr:\n%s", name, args, p.Cmd.ProcessState,
				tail(p.Stdout.String(), opts.LogLines), tail(p.Stderr.String(), opts.LogLines))
		}
	})
	return p
}

// tail returns the last n lines of s, all of s if n is 0.
func tail(s string, n int) string {
	if n == 0 {
		return s
	}
	lines := strings.Split(s, "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// Exited reports whether the process has exited and been reaped.
func (p *Process) Exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// Signal sends sig to the process, or fails the test.
func (p *Process) Signal(t testing.TB, sig os.Signal) {
	t.Helper()
	if err := p.Cmd.Process.Signal(sig); err != nil {
		t.Fatalf("signal %v to %s: %v", sig, p.Name, err)
	}
}

// Wait waits up to timeout for the process to exit and returns its exit
// code (-1 if a signal killed it); after timeout it fails the test.
func (p *Process) Wait(t testing.TB, timeout time.Duration) int {
	t.Helper()
	return p.wait(t, timeout, "it was asked to")
}

// Stop sends sig unless the process has exited, then waits as Wait does.
func (p *Process) Stop(t testing.TB, sig os.Signal, timeout time.Duration) int {
	t.Helper()
	if !p.Exited() {
		p.Signal(t, sig)
	}
	return p.wait(t, timeout, sig.String())
}

func (p *Process) wait(t testing.TB, timeout time.Duration, after string) int {
	t.Helper()
	select {
	case <-p.done:
		return p.Cmd.ProcessState.ExitCode()
	case <-time.After(timeout):
		t.Fatalf("%s has not exited %v after %s", p.Name, timeout, after)
		return 0
	}
}

// Poll calls cond every interval until it holds and returns the time that
// took; after timeout it fails the test with what and cond's last reason.
func Poll(t testing.TB, timeout, interval time.Duration, what string, cond func() (bool, string)) time.Duration {
	t.Helper()
	start := time.Now()
	for {
		ok, why := cond()
		if ok {
			return time.Since(start)
		}
		if time.Since(start) > timeout {
			t.Fatalf("%s: not within %v: %s", what, timeout, why)
		}
		time.Sleep(interval)
	}
}
