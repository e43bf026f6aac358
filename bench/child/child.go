// Package child runs the benchmarks' child processes: orchestrators and
// workers started from this binary, their output appended to a log file
// of their own, signalled and reaped by the benchmark that started them.
//
// Guarantees: a child never inherits this process's JOBFLEET_* variables
// (a benchmark's children are configured by their arguments only); on
// Linux the kernel kills a child when this process dies first, so a
// crashed benchmark leaves no fleet behind. Not guaranteed: the same on
// other systems, where children outlive a crash of the benchmark.
package child

import (
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Process is one child process, started again after each exit if its
// owner wishes (one incarnation at a time). The zero value with Name and
// Log set is ready to Start. Safe for concurrent use.
type Process struct {
	// Name names the process in errors and in its log's banner lines.
	Name string
	// Log is the file every incarnation's output is appended to.
	Log string

	mu   sync.Mutex // guards cmd and done
	cmd  *exec.Cmd
	done chan struct{} // closed when cmd is reaped
}

// Start starts an incarnation: binary with args, a banner line and then
// its output appended to Log, none of this process's JOBFLEET_* variables
// in its environment. The previous incarnation, if any, must have exited.
// Errors: the log cannot be opened, or the process cannot be started.
func (p *Process) Start(binary string, args []string) error {
	f, err := os.OpenFile(p.Log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	defer f.Close() // the child has its own descriptor
	fmt.Fprintf(f, "===== %s started %s\n", p.Name, time.Now().UTC().Format(time.RFC3339Nano))
	cmd := exec.Command(binary, args...)
	cmd.Stdout, cmd.Stderr = f, f
	cmd.SysProcAttr = sysProcAttr()
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "JOBFLEET_") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start %s: %w", p.Name, err)
	}
	done := make(chan struct{})
	p.mu.Lock()
	p.cmd, p.done = cmd, done
	p.mu.Unlock()
	go func() { // owned by the process: ends when it is reaped
		_ = cmd.Wait()
		close(done)
	}()
	return nil
}

// PID returns the running incarnation's process ID, 0 if none runs.
func (p *Process) PID() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd == nil {
		return 0
	}
	select {
	case <-p.done:
		return 0
	default:
		return p.cmd.Process.Pid
	}
}

// Signal sends sig to the running incarnation and waits up to timeout for
// it to exit (then kills it and waits). It returns when the signal was
// sent; with no incarnation started, it returns at once.
func (p *Process) Signal(sig syscall.Signal, timeout time.Duration) time.Time {
	p.mu.Lock()
	cmd, done := p.cmd, p.done
	p.mu.Unlock()
	at := time.Now()
	if cmd == nil {
		return at
	}
	_ = cmd.Process.Signal(sig)
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case <-done:
	case <-t.C:
		_ = cmd.Process.Kill()
		<-done
	}
	return at
}
