package main

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/jobfleet/jobfleet/internal/binarytest"

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
	if err := binarytest.Build(binary); err != nil {
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
