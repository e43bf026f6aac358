//go:build unix

package worker

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
)

// A shell command does not run as the worker's child but as the child of
// a guard: a fresh execution of the worker's own program (guardExecutable)
// that leads the command's process group, starts the command in it and
// waits for it. The guard holds the read end of a pipe (the lifeline, its
// file descriptor 3) whose only write end is the worker's. When the worker
// dies, however it dies (SIGKILL, the out-of-memory killer), the kernel
// closes that write end; the guard reads end of file and sends SIGKILL to
// its whole process group, itself, the command and the command's children
// included. A signal on the worker's side (such as Linux's parent-death
// signal) would reach the command only, not its children.
//
// The guard reports on its file descriptor 4 (the status pipe) why the
// command did not start ("error <message>"), or the signal that ended it
// ("signal <number>"); otherwise it exits with the command's exit code.
// It ignores SIGTERM, which the worker sends to the whole group to stop
// the command, and the other signals a group may be sent (guardCaught),
// and waits for the command to end.

const (
	// guardEnv, set to guardOn in its environment, makes a process of this
	// program a guard (see init). The command does not inherit it.
	guardEnv = "JOBFLEET_INTERNAL_SHELL_GUARD"
	guardOn  = "1"
	// guardArg0 is the guard's argv[0], as ps shows it.
	guardArg0 = "jobfleet-shell-guard"
	// guardLifeline and guardStatus are the guard's descriptors of the
	// lifeline and status pipes (exec.Cmd.ExtraFiles 0 and 1).
	guardLifeline = 3
	guardStatus   = 4
)

// The guard runs before main in any program that links this package, the
// jobfleet binary and test binaries alike: the worker starts it from its
// own executable.
func init() {
	if os.Getenv(guardEnv) != guardOn || len(os.Args) < 3 || os.Args[0] != guardArg0 {
		return
	}
	os.Exit(runShellGuard(os.Args[1], os.Args[2:]))
}

// guardExecutable returns the path the guard is started from: this very
// program (on Linux through /proc/self/exe, which holds even if the file
// was replaced or removed since the worker started).
func guardExecutable() (string, error) {
	if runtime.GOOS == "linux" {
		return "/proc/self/exe", nil
	}
	return os.Executable()
}

// guardCommand returns the guard's command, under ctx, for the program
// prog (a path, as lookPath found it) with argv (argv[0] as the command
// gives it), in environment env. The caller sets its standard streams,
// process group, Cancel and ExtraFiles: the lifeline's read end, then the
// status pipe's write end.
func guardCommand(ctx context.Context, self, prog string, argv, env []string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, self, append([]string{prog}, argv...)...)
	cmd.Args[0] = guardArg0
	cmd.Env = append(slices.Clone(env), guardEnv+"="+guardOn)
	return cmd
}

// guardCaught are the signals the guard does not act on, when they are
// sent to its process group: those that would end it (SIGQUIT with a
// goroutine dump in the command's output).
var guardCaught = []os.Signal{syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP, syscall.SIGQUIT, syscall.SIGUSR1, syscall.SIGUSR2}

// runShellGuard is the guard's main: it runs prog with argv and returns
// the exit code for the guard.
func runShellGuard(prog string, argv []string) int {
	// Neither descriptor may reach the command.
	syscall.CloseOnExec(guardLifeline)
	syscall.CloseOnExec(guardStatus)
	// Were descriptor 3 not open, reading it would fail at once and the
	// guard kill itself before starting anything.
	lifeline := os.NewFile(guardLifeline, "lifeline")
	status := os.NewFile(guardStatus, "status")
	// Signals sent to the group are for the command (the worker sends
	// SIGTERM to stop it); the guard waits for the command to end. A
	// caught signal is reset for the command when it is executed; one
	// the guard was started ignoring stays ignored, for the command too.
	for _, sig := range guardCaught {
		if !signal.Ignored(sig) {
			signal.Notify(make(chan os.Signal, 1), sig)
		}
	}
	go func() {
		// Returns at end of file: the worker is gone (or has finished
		// with this attempt, and kills the group anyway).
		_, _ = io.Copy(io.Discard, lifeline)
		_ = syscall.Kill(0, syscall.SIGKILL) // the guard's process group
	}()

	env := slices.DeleteFunc(os.Environ(), func(kv string) bool { return strings.HasPrefix(kv, guardEnv+"=") })
	cmd := exec.Command(prog, argv[1:]...)
	cmd.Args[0] = argv[0]
	cmd.Env = env
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	if err := cmd.Start(); err != nil {
		fmt.Fprintf(status, "error %v", err)
		return 127
	}
	_ = cmd.Wait()
	ws, _ := cmd.ProcessState.Sys().(syscall.WaitStatus)
	if ws.Signaled() {
		fmt.Fprintf(status, "signal %d", int(ws.Signal()))
		return 128 + int(ws.Signal())
	}
	return cmd.ProcessState.ExitCode()
}

// guardStatusError reads the guard's status message msg: whether the
// command started, and the error the message reports (nil for none, the
// empty message). cmdName is the command's argv[0].
func guardStatusError(msg, cmdName string) (started bool, err error) {
	kind, rest, _ := strings.Cut(msg, " ")
	switch kind {
	case "":
		return true, nil
	case "error":
		return false, fmt.Errorf("start %q: %s", cmdName, rest)
	case "signal":
		if n, perr := strconv.Atoi(rest); perr == nil {
			return true, signalError(syscall.Signal(n))
		}
	}
	return true, fmt.Errorf("shell guard: unexpected status %q", msg)
}

// signalError is the error of a command ended by sig, worded as
// exec.ExitError words it ("signal: killed").
type signalError syscall.Signal

func (e signalError) Error() string { return "signal: " + syscall.Signal(e).String() }
