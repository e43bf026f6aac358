//go:build unix

package worker

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"syscall"

	"github.com/jobfleet/jobfleet/dispatch"
)

// executeShell runs the attempt's command (argv, no shell of ours) in a
// process group of its own, with the JOBFLEET_* variables added to the
// worker's environment and the payload on standard input. Exit status 0 is
// success; standard output and error, interleaved, are the output.
//
// When ctx ends the group gets SIGTERM, and KillGrace later the process
// SIGKILL and its pipes are closed. Whatever is left of the group when the
// command has exited (background children, or children that ignored
// SIGTERM) is killed with SIGKILL, so no process of the attempt outlives it
// unless it left the process group itself.
func (w *Worker) executeShell(ctx context.Context, a dispatch.Assignment) outcome {
	argv := a.Executor.Command
	if len(argv) == 0 || argv[0] == "" {
		return outcome{err: errors.New("shell executor without a command")}
	}
	out := &capWriter{max: dispatch.MaxOutputBytes}
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Env = append(os.Environ(),
		EnvJobID+"="+a.JobID,
		EnvRunID+"="+a.RunID,
		EnvScheduledAt+"="+FormatScheduledAt(a.ScheduledAt),
		EnvAttempt+"="+strconv.Itoa(a.Attempt),
	)
	cmd.Stdin = bytes.NewReader(a.Payload)
	cmd.Stdout = out
	cmd.Stderr = out // the same pointer: exec serialises the writes
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error {
		// The child is its own group leader: its PID is the group ID.
		return syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM)
	}
	cmd.WaitDelay = w.cfg.KillGrace

	if err := cmd.Start(); err != nil {
		return outcome{err: fmt.Errorf("start %q: %w", argv[0], err)}
	}
	err := cmd.Wait()
	// Kill what is left of the group. The group ID cannot have been reused
	// while any member remains; if none does, this finds nothing.
	_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	if errors.Is(err, exec.ErrWaitDelay) {
		// Exited 0 but left its output pipes open (a background child).
		err = nil
	}
	return outcome{err: err, output: out.buf}
}
