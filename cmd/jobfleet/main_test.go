package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"testing"

	"go.uber.org/goleak"

	"github.com/jobfleet/jobfleet/internal/etcdtest"
)

var (
	// etcd is the embedded etcd the tests' orchestrator processes share,
	// each test in its own namespace.
	etcd *etcdtest.Server
	// binary is the jobfleet binary built from this package.
	binary string
)

func TestMain(m *testing.M) {
	leakOpts := goleak.IgnoreCurrent()
	dir, err := os.MkdirTemp("", "jobfleet-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "temp dir:", err)
		os.Exit(1)
	}
	binary = filepath.Join(dir, "jobfleet")
	if err := buildBinary(binary); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.RemoveAll(dir)
		os.Exit(1)
	}
	etcd = etcdtest.MustStart()

	code := m.Run()

	etcd.Close()
	os.RemoveAll(dir)
	if code == 0 {
		if err := goleak.Find(leakOpts); err != nil {
			fmt.Fprintln(os.Stderr, "goleak:", err)
			code = 1
		}
	}
	os.Exit(code)
}

// buildBinary builds this package (the test's working directory) into out
// with `go build`, with the race detector if the test binary has it, so
// that the processes are checked too and the build cache is shared.
func buildBinary(out string) error {
	goTool, err := exec.LookPath("go")
	if err != nil {
		goTool = filepath.Join(runtime.GOROOT(), "bin", "go")
	}
	args := []string{"build", "-o", out}
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, s := range bi.Settings {
			if s.Key == "-race" && s.Value == "true" {
				args = append(args, "-race")
			}
		}
	}
	cmd := exec.Command(goTool, append(args, ".")...)
	if b, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("go %v: %v\n%s", args, err, b)
	}
	return nil
}
