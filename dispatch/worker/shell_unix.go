//go:build unix

package worker

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"

	"github.com/jobfleet/jobfleet/api"
	"github.com/jobfleet/jobfleet/internal/tracing"
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
// The group is led by a guard (see shell_guard_unix.go), which kills it
// with SIGKILL if this process dies before the command ends: a worker
// killed outright leaves none of the attempt's processes running beside
// the retry, unless one left the process group itself.
//
// When ctx ends the group gets SIGTERM, and KillGrace later the guard
// SIGKILL and its pipes are closed. Whatever is left of the group when the
// guard has exited (background children, or children that ignored
// SIGTERM) is killed with SIGKILL, so no process of the attempt outlives it
// unless it left the process group itself.
func (w *Worker) executeShell(ctx context.Context, a api.AttemptGrant) outcome {
	argv := a.Executor.Command
	if len(argv) == 0 || argv[0] == "" {
		return outcome{err: errors.New("shell executor without a command")}
	}
	env := w.shellEnv(a)
	needs, removeNeeds, err := writeNeedsFile(a)
	if err != nil {
		return outcome{err: err}
	}
	defer removeNeeds()
	if needs != "" {
		env = append(env, EnvNeedsFile+"="+needs)
	}
	if tp := tracing.TraceParent(ctx); tp != "" {
		env = append(env, EnvTraceParent+"="+tp)
	}
	prog, err := lookPath(argv[0], envValue(env, "PATH"))
	if err != nil {
		return outcome{err: fmt.Errorf("start %q: %w", argv[0], err)}
	}
	self, err := guardExecutable()
	if err != nil {
		return outcome{err: fmt.Errorf("start %q: find the worker's executable for the shell guard: %w", argv[0], err)}
	}
	// os.Pipe's descriptors are close-on-exec: only the guard gets the
	// lifeline's read end, and no other process its write end.
	lifeR, lifeW, err := os.Pipe()
	if err != nil {
		return outcome{err: fmt.Errorf("start %q: %w", argv[0], err)}
	}
	defer lifeW.Close() // after the group is killed below
	statusR, statusW, err := os.Pipe()
	if err != nil {
		lifeR.Close()
		return outcome{err: fmt.Errorf("start %q: %w", argv[0], err)}
	}
	defer statusR.Close()

	out := newOutputBuffer(api.MaxOutputBytes)
	out.live = liveWriter(ctx)
	cmd := guardCommand(ctx, self, prog, argv, env)
	cmd.Stdin = bytes.NewReader(a.Payload)
	cmd.Stdout = out
	cmd.Stderr = out // the same pointer: exec serialises the writes
	var so *shellOutput
	if a.Step != nil {
		// Standard output apart, for its last line: two writers under
		// one lock (exec copies the two streams concurrently).
		so = &shellOutput{out: out}
		cmd.Stdout, cmd.Stderr = shellStream{so, true}, shellStream{so, false}
	}
	cmd.ExtraFiles = []*os.File{lifeR, statusW}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error {
		// The guard is its own group leader: its PID is the group ID.
		return syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM)
	}
	cmd.WaitDelay = w.cfg.KillGrace

	err = cmd.Start()
	lifeR.Close()
	statusW.Close()
	if err != nil {
		return outcome{err: fmt.Errorf("start %q: %w", argv[0], err)}
	}
	err = cmd.Wait()
	// Kill what is left of the group. The group ID cannot have been reused
	// while any member remains; if none does, this finds nothing.
	_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	// The guard has exited and no other process holds the status pipe's
	// write end: this does not block.
	msg, _ := io.ReadAll(io.LimitReader(statusR, 4096))
	started, serr := guardStatusError(string(msg), argv[0])
	switch {
	case !started:
		return outcome{err: serr}
	case serr != nil:
		err = serr
	case errors.Is(err, exec.ErrWaitDelay):
		// Exited 0 but left its output pipes open (a background child).
		err = nil
	}
	o := outcome{err: err, output: out}
	if so != nil && err == nil {
		o.result = so.last.result()
	}
	return o
}

// shellEnv returns the environment of a's command: PATH (shellPath), HOME
// and LANG (the worker's, if set), the variables Config.ShellEnv names
// (the worker's values, if set; PATH among them replaces shellPath), and
// the run's JOBFLEET_* variables, with the raw job ID. Nothing else of the
// worker's environment: not its settings, not its secrets.
func (w *Worker) shellEnv(a api.AttemptGrant) []string {
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
	if a.Item != nil {
		vars[EnvShardIndex] = strconv.Itoa(a.Item.Index)
		vars[EnvShardCount] = strconv.Itoa(a.Item.Count)
		if len(a.Item.Param) > 0 {
			vars[EnvShardParam] = string(a.Item.Param)
		}
	}
	if a.Step != nil {
		vars[EnvStep] = a.Step.ID
		vars[EnvRound] = strconv.Itoa(a.Round)
		vars[EnvShardIndex] = strconv.Itoa(a.Step.Shard)
		vars[EnvShardCount] = strconv.Itoa(a.Step.Shards)
	}
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
