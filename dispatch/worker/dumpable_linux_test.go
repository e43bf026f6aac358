package worker_test

import (
	"io"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/jobfleet/jobfleet/api"
	"github.com/jobfleet/jobfleet/dispatch/worker"
)

// shellSnoopChild marks the copy of this test binary that
// TestShellJobCannotReadWorkerEnvironment runs as an unprivileged user.
const shellSnoopChild = "JOBFLEET_TEST_SHELL_SNOOP_CHILD"

// snoopCanary is a secret in the worker's environment.
const snoopCanary = "canary-5ecret-7f3a"

// TestShellJobCannotReadWorkerEnvironment runs a worker as an
// unprivileged user (root may read any process's memory, so the test runs
// a copy of this test binary as nobody), with a token and a secret in its
// environment, and a shell job that reads the worker's
// /proc/<pid>/environ (the parent of its guard's): the job, running as the same user, must not see
// them.
func TestShellJobCannotReadWorkerEnvironment(t *testing.T) {
	requireShell(t)
	if os.Getenv(shellSnoopChild) == "1" {
		shellSnoop(t)
		return
	}
	if os.Geteuid() != 0 {
		t.Skip("needs root, to run the worker as another, unprivileged user")
	}
	nobody, err := user.Lookup("nobody")
	if err != nil {
		t.Skip("no user nobody:", err)
	}
	uid, _ := strconv.Atoi(nobody.Uid)
	gid, _ := strconv.Atoi(nobody.Gid)

	// A directory nobody can reach: the binary's copy and a temp dir.
	dir, err := os.MkdirTemp("", "jobfleet-snoop-")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	tmp := filepath.Join(dir, "tmp")
	if err := os.Mkdir(tmp, 0o777); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{dir, tmp} {
		if err := os.Chmod(p, map[bool]os.FileMode{true: 0o755, false: 0o1777}[p == dir]); err != nil {
			t.Fatal(err)
		}
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "worker.test")
	if err := copyFile(self, bin, 0o755); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "-test.run=^TestShellJobCannotReadWorkerEnvironment$", "-test.v", "-test.count=1")
	cmd.Dir = tmp
	cmd.Env = []string{shellSnoopChild + "=1", "PATH=" + os.Getenv("PATH"), "HOME=" + tmp, "TMPDIR=" + tmp,
		"JOBFLEET_TOKEN=" + snoopCanary, "DEPLOY_KEY=" + snoopCanary}
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}}
	out, err := cmd.CombinedOutput()
	t.Logf("worker as %s:\n%s", nobody.Username, out)
	if err != nil || !strings.Contains(string(out), "--- PASS: TestShellJobCannotReadWorkerEnvironment") {
		t.Fatalf("the unprivileged worker's test: %v", err)
	}
}

// shellSnoop is the test as run by the unprivileged copy.
func shellSnoop(t *testing.T) {
	if os.Getenv("JOBFLEET_TOKEN") != snoopCanary {
		t.Fatal("the canary is not in this worker's environment")
	}
	f := newFakeOrch(t, "a", nil)
	startWorker(t, worker.Config{Orchestrators: worker.StaticOrchestrators(f.URL()), AllowShell: true}, nil)
	// The job's parent is the shell guard; the worker is the guard's.
	script := `w=$(sed -n 's/^PPid:[[:space:]]*//p' /proc/$PPID/status); echo "worker=$w"; tr "\0" "\n" < /proc/$w/environ; echo "read=$?"`
	f.enqueue(f.assignment("r1", api.Executor{Type: "shell", Command: []string{"sh", "-c", script}}, ""))
	c := f.waitComplete(t, "r1")
	t.Logf("job output: %q", c.Output)
	if !strings.Contains(c.Output, "worker="+strconv.Itoa(os.Getpid())+"\n") {
		t.Fatalf("the job's guard's parent is not this worker (pid %d)", os.Getpid())
	}
	if strings.Contains(c.Output, snoopCanary) || strings.Contains(c.Output, "read=0") {
		t.Errorf("a shell job read the worker's environment")
	}
}

func copyFile(from, to string, mode os.FileMode) error {
	src, err := os.Open(from)
	if err != nil {
		return err
	}
	defer src.Close()
	dst, err := os.OpenFile(to, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, mode)
	if err != nil {
		return err
	}
	if _, err := io.Copy(dst, src); err != nil {
		dst.Close()
		return err
	}
	return dst.Close()
}
