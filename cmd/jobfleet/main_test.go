package main

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/jobfleet/jobfleet/internal/testkit/binarytest"

	"go.uber.org/goleak"

	"github.com/jobfleet/jobfleet/internal/testkit/etcdtest"
)

var (
	// etcd is the embedded etcd the tests' orchestrator processes share,
	// each test in its own namespace.
	etcd *etcdtest.Server
	// binary is the jobfleet binary built from this package.
	binary string
	// adminSecretFile holds the bootstrap admin secret the tests'
	// orchestrator processes accept (--admin-token-file), adminSecret.
	adminSecretFile string
	// testConfigHome is the XDG_CONFIG_HOME of the tests' own process,
	// and procConfigHome that of the processes they start (unless a test
	// sets its own): a `jobfleet dev` process writes a current "dev"
	// context there, which must not leak into the commands the tests run
	// in process.
	testConfigHome, procConfigHome string
)

// adminSecret is the tests' bootstrap admin secret.
const adminSecret = "process-tests-bootstrap-admin-secret-0123456789"

func TestMain(m *testing.M) {
	leakOpts := goleak.IgnoreCurrent()
	dir, err := os.MkdirTemp("", "jobfleet-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "temp dir:", err)
		os.Exit(1)
	}
	// Built before HOME moves: go would otherwise use a new, empty build
	// cache and module cache under it, and compile (and download)
	// everything again.
	binary = filepath.Join(dir, "jobfleet")
	if err := binarytest.Build(binary); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.RemoveAll(dir)
		os.Exit(1)
	}
	// The tests, and the processes they start, never touch the real
	// user's configuration: contexts go to a directory of their own.
	home := filepath.Join(dir, "home")
	testConfigHome, procConfigHome = filepath.Join(home, ".config"), filepath.Join(dir, "proc-config")
	for _, kv := range [][2]string{{"HOME", home}, {"XDG_CONFIG_HOME", testConfigHome}, {"", procConfigHome}} {
		if err := os.MkdirAll(kv[1], 0o700); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		if kv[0] != "" {
			os.Setenv(kv[0], kv[1])
		}
	}
	adminSecretFile = filepath.Join(dir, "admin-secret")
	if err := os.WriteFile(adminSecretFile, []byte(adminSecret+"\n"), 0o600); err != nil {
		fmt.Fprintln(os.Stderr, err)
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
