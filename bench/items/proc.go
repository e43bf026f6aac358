package items

import (
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"
)

// proc is one child process of this binary: the orchestrator or a worker.
type proc struct {
	name string
	log  string // log file

	mu   sync.Mutex // guards cmd and done
	cmd  *exec.Cmd
	done chan struct{} // closed when cmd is reaped
}

// start starts binary with args, its output appended to p.log and none of
// this process's JOBFLEET_* variables in its environment.
func (p *proc) start(binary string, args []string) error {
	f, err := os.OpenFile(p.log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	defer f.Close() // the child has its own descriptor
	cmd := exec.Command(binary, args...)
	cmd.Stdout, cmd.Stderr = f, f
	cmd.SysProcAttr = sysProcAttr()
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "JOBFLEET_") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("items: start %s: %w", p.name, err)
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

// signal sends sig and waits up to timeout for the process to exit (then
// kills it). It returns when the signal was sent.
func (p *proc) signal(sig syscall.Signal, timeout time.Duration) time.Time {
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
