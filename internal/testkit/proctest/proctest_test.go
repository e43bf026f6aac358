package proctest

import (
	"fmt"
	"strings"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// TestOutputAndExit checks separate and combined output, the environment,
// the working directory and exit codes.
func TestOutputAndExit(t *testing.T) {
	dir := t.TempDir()
	p := Start(t, "sh", "/bin/sh", []string{"-c", `echo out $X; pwd; echo err >&2; exit 3`}, Options{Env: []string{"X=x"}, Dir: dir})
	if code := p.Wait(t, 10*time.Second); code != 3 {
		t.Errorf("exit code %d, want 3", code)
	}
	if got, want := p.Stdout.String(), "out x\n"+dir+"\n"; got != want {
		t.Errorf("stdout %q, want %q", got, want)
	}
	if got := p.Stderr.String(); got != "err\n" {
		t.Errorf("stderr %q, want %q", got, "err\n")
	}

	c := Start(t, "sh", "/bin/sh", []string{"-c", `echo one; echo two >&2`}, Options{Combined: true})
	c.Wait(t, 10*time.Second)
	if got := c.Stdout.String(); got != "one\ntwo\n" || c.Stderr != c.Stdout {
		t.Errorf("combined output %q, want both lines in one buffer", got)
	}
}

// TestSignals checks Signal, Stop on a running and on an exited process,
// and the exit code of a process a signal killed.
func TestSignals(t *testing.T) {
	p := Start(t, "sleep", "/bin/sh", []string{"-c", "exec sleep 60"}, Options{})
	p.Signal(t, syscall.SIGKILL)
	if code := p.Wait(t, 10*time.Second); code != -1 {
		t.Errorf("SIGKILLed: exit code %d, want -1", code)
	}
	if !p.Exited() {
		t.Error("Exited is false after Wait returned")
	}
	if code := p.Stop(t, syscall.SIGTERM, time.Second); code != -1 {
		t.Errorf("Stop of an exited process: exit code %d, want -1", code)
	}
	q := Start(t, "sleep", "/bin/sh", []string{"-c", "exec sleep 60"}, Options{})
	if code := q.Stop(t, syscall.SIGTERM, 10*time.Second); code != -1 {
		t.Errorf("Stop with SIGTERM: exit code %d, want -1", code)
	}
}

// recorder is a testing.TB whose cleanups, failure and logs the test
// controls.
type recorder struct {
	testing.TB
	cleanups []func()
	failed   bool
	logs     []string
}

func (r *recorder) Helper()                 {}
func (r *recorder) Cleanup(f func())        { r.cleanups = append(r.cleanups, f) }
func (r *recorder) Failed() bool            { return r.failed }
func (r *recorder) Logf(f string, a ...any) { r.logs = append(r.logs, fmt.Sprintf(f, a...)) }

// end runs the cleanups as the end of a test does.
func (r *recorder) end() {
	for i := len(r.cleanups) - 1; i >= 0; i-- {
		r.cleanups[i]()
	}
}

// TestEnd checks what happens when a test ends: a running process is
// killed and reaped before AtEnd runs, and the output is logged only if
// the test failed, its last LogLines lines or all of it, stdout and
// stderr apart or combined.
func TestEnd(t *testing.T) {
	script := []string{"-c", `echo a; echo b; echo c; echo e >&2; exec sleep 60`}
	for _, tc := range []struct {
		name   string
		opts   Options
		failed bool
		want   string // in the log; "" for no log
		absent string
	}{
		{name: "passed", want: ""},
		{name: "separate", failed: true, want: "----- stdout:\na\nb\nc\n\n----- stderr:\ne\n"},
		{name: "combined tail", opts: Options{Combined: true, LogLines: 2}, failed: true, want: "]: signal: killed\ne\n", absent: "b\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := &recorder{TB: t, failed: tc.failed}
			var exitedAtEnd bool
			tc.opts.AtEnd = func(p *Process) { exitedAtEnd = p.Exited() }
			p := Start(r, "sh", "/bin/sh", script, tc.opts)
			Poll(t, 10*time.Second, time.Millisecond, "the output written", func() (bool, string) {
				return strings.Contains(p.Stderr.String(), "e\n"), p.Stderr.String()
			})
			r.end()
			if !p.Exited() || !exitedAtEnd {
				t.Errorf("at the end: exited %v, when AtEnd ran %v; want both", p.Exited(), exitedAtEnd)
			}
			log := strings.Join(r.logs, "\n")
			if tc.want == "" && log != "" {
				t.Errorf("logged %q for a passing test", log)
			}
			if !strings.Contains(log, tc.want) || tc.absent != "" && strings.Contains(log, tc.absent) {
				t.Errorf("logged %q; want it to hold %q and not %q", log, tc.want, tc.absent)
			}
		})
	}
}
