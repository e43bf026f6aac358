//go:build unix

package worker

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"

	"github.com/jobfleet/jobfleet/dispatch"
)

// shellPath is the PATH of shell commands, unless Config.ShellEnv passes
// the worker's own.
const shellPath = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

// executeShell runs the attempt's command (argv, no shell of ours) in a
// process group of its own, with a minimal environment (see shellEnv) and
// the payload on standard input. The program is looked up in that
// environment's PATH. Exit status 0 is success; standard output and error,
// interleaved, are the output (their head and tail).
//
// When ctx ends the group gets SIGTERM, and KillGrace later the process
// SIGKILL and its pipes are closed. Whatever is left of the group when the
// command has exited (background children, or children that ignored
// SIGTERM) is killed with SIGKILL, so no process of the attempt outlives it
// unless it left the process group itself.
func (w *Worker) executeShell(ctx context.Context, a dispatch.AttemptGrant) outcome {
	argv := a.Executor.Command
	if len(argv) == 0 || argv[0] == "" {
		return outcome{err: errors.New("shell executor without a command")}
	}
	env := w.shellEnv(a)
	prog, err := lookPath(argv[0], envValue(env, "PATH"))
	if err != nil {
		return outcome{err: fmt.Errorf("start %q: %w", argv[0], err)}
	}
	out := newOutputBuffer(dispatch.MaxOutputBytes)
	cmd := exec.CommandContext(ctx, prog, argv[1:]...)
	cmd.Args[0] = argv[0]
	cmd.Env = env
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
	err = cmd.Wait()
	// Kill what is left of the group. The group ID cannot have been reused
	// while any member remains; if none does, this finds nothing.
	_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	if errors.Is(err, exec.ErrWaitDelay) {
		// Exited 0 but left its output pipes open (a background child).
		err = nil
	}
	return outcome{err: err, output: out}
}

// shellEnv returns the environment of a's command: PATH (shellPath), HOME
// and LANG (the worker's, if set), the variables Config.ShellEnv names
// (the worker's values, if set; PATH among them replaces shellPath), and
// the run's JOBFLEET_* variables, with the raw job ID. Nothing else of the
// worker's environment: not its settings, not its secrets.
func (w *Worker) shellEnv(a dispatch.AttemptGrant) []string {
	vars := map[string]string{"PATH": shellPath}
	for _, name := range append([]string{"HOME", "LANG"}, w.cfg.ShellEnv...) {
		if v, ok := os.LookupEnv(name); ok {
			vars[name] = v
		}
	}
	vars[EnvJobID] = a.JobID
	vars[EnvRunID] = a.RunID
	vars[EnvScheduledAt] = FormatScheduledAt(a.ScheduledAt)
	vars[EnvAttempt] = strconv.Itoa(a.Attempt)
	env := make([]string, 0, len(vars))
	for _, k := range slices.Sorted(maps.Keys(vars)) {
		env = append(env, k+"="+vars[k])
	}
	return env
}

// envValue returns the value of name in env ("NAME=value" entries).
func envValue(env []string, name string) string {
	for _, kv := range env {
		if v, ok := strings.CutPrefix(kv, name+"="); ok {
			return v
		}
	}
	return ""
}

// lookPath finds program file in the directories of path (the command's
// own PATH, not the worker's), like a shell does; a name with a slash is
// used as it is. Relative directories in path are skipped.
func lookPath(file, path string) (string, error) {
	if strings.Contains(file, "/") {
		return file, nil
	}
	for _, dir := range filepath.SplitList(path) {
		if !filepath.IsAbs(dir) {
			continue
		}
		p := filepath.Join(dir, file)
		if fi, err := os.Stat(p); err == nil && fi.Mode().IsRegular() && fi.Mode().Perm()&0o111 != 0 {
			return p, nil
		}
	}
	return "", fmt.Errorf("%w: not found in the command's PATH %s", exec.ErrNotFound, path)
}
