package chaos

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"
)

// process is one child process of the harness (an etcd member, an
// orchestrator, a worker) that can be started again after it ends. Each
// start is an incarnation; all incarnations append to one log file. The
// process runs in its own process group, and every signal goes to the
// group. Methods are safe for concurrent use.
type process struct {
	name    string
	logPath string
	// wrap runs the binary through another program: `ip netns exec NS`
	// on a host of its own (Config.Hosts); nil runs it directly.
	wrap []string

	mu          sync.Mutex // guards the fields below
	args        []string   // of the next start
	cmd         *exec.Cmd  // current incarnation, nil before the first start
	done        chan struct{}
	incarnation int               // of cmd; the first is 0
	paused      bool              // SIGSTOPped and not continued
	exitedAt    time.Time         // when cmd was reaped; zero while it runs
	exits       map[int]time.Time // when each incarnation was reaped
}

func newProcess(name, logPath string, args []string) *process {
	return &process{name: name, logPath: logPath, args: args, incarnation: -1}
}

// start starts a new incarnation. The previous one must have exited.
func (p *process) start(binary string) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd != nil && p.exitedAt.IsZero() {
		return fmt.Errorf("%s: already running", p.name)
	}
	log, err := os.OpenFile(p.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	defer log.Close() // the child has its own descriptor
	p.incarnation++
	fmt.Fprintf(log, "===== %s incarnation %d started %s: %s %s\n", p.name, p.incarnation, time.Now().UTC().Format(time.RFC3339Nano), binary, strings.Join(p.args, " "))
	argv := slices.Concat(p.wrap, []string{binary}, p.args)
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stdout, cmd.Stderr = log, log
	cmd.SysProcAttr = sysProcAttr()
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "JOBFLEET_") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start %s: %w", p.name, err)
	}
	done := make(chan struct{})
	p.cmd, p.done, p.paused, p.exitedAt = cmd, done, false, time.Time{}
	inc := p.incarnation
	go func() {
		_ = cmd.Wait() // the status is read from ProcessState
		p.mu.Lock()
		p.exitedAt = time.Now()
		if p.exits == nil {
			p.exits = map[int]time.Time{}
		}
		p.exits[inc] = p.exitedAt
		p.mu.Unlock()
		close(done)
	}()
	return nil
}

// setArgs changes the arguments of the next start.
func (p *process) setArgs(args []string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.args = args
}

// state returns the current incarnation's command and done channel.
func (p *process) state() (*exec.Cmd, chan struct{}) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.cmd, p.done
}

// running reports whether the current incarnation has started and not
// exited (it may be paused).
func (p *process) running() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.cmd != nil && p.exitedAt.IsZero()
}

// live reports whether the process runs and is not paused.
func (p *process) live() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.cmd != nil && p.exitedAt.IsZero() && !p.paused
}

// Incarnation returns the number of the current (or last) incarnation.
func (p *process) Incarnation() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.incarnation
}

// signal sends sig to the process group of the running incarnation.
func (p *process) signal(sig syscall.Signal) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd == nil || !p.exitedAt.IsZero() {
		return fmt.Errorf("%s: not running", p.name)
	}
	if err := syscall.Kill(-p.cmd.Process.Pid, sig); err != nil && !errors.Is(err, syscall.ESRCH) {
		return fmt.Errorf("signal %v to %s: %w", sig, p.name, err)
	}
	switch sig {
	case syscall.SIGSTOP:
		p.paused = true
	case syscall.SIGCONT:
		p.paused = false
	}
	return nil
}

// kill sends SIGKILL to the group and waits until the process is reaped.
// It returns the time of the kill. Killing a process that is not running
// is a no-op.
func (p *process) kill() time.Time {
	at := time.Now()
	if err := p.signal(syscall.SIGKILL); err != nil {
		return at
	}
	_, done := p.state()
	<-done
	return at
}

// terminate sends SIGTERM (continuing a paused process) and waits up to
// timeout for it to exit, then kills it. It reports whether it exited on
// its own.
func (p *process) terminate(timeout time.Duration) bool {
	_, done := p.state()
	if done == nil || p.signal(syscall.SIGTERM) != nil {
		return true
	}
	_ = p.signal(syscall.SIGCONT)
	return p.wait(done, timeout)
}

// wait waits for done up to timeout, then kills the process.
func (p *process) wait(done chan struct{}, timeout time.Duration) bool {
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case <-done:
		return true
	case <-t.C:
		p.kill()
		return false
	}
}

// waitExit waits up to timeout for the current incarnation to exit by
// itself and reports whether it did.
func (p *process) waitExit(timeout time.Duration) bool {
	_, done := p.state()
	if done == nil {
		return true
	}
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case <-done:
		return true
	case <-t.C:
		return false
	}
}

// exitedAtOf returns when incarnation inc was reaped, zero while it runs:
// unlike exitedAtTime, it stays right once the next incarnation started.
func (p *process) exitedAtOf(inc int) time.Time {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.exits[inc]
}

// exitState describes how the last incarnation ended, "" while it runs.
func (p *process) exitState() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd == nil || p.exitedAt.IsZero() {
		return ""
	}
	return p.cmd.ProcessState.String()
}
