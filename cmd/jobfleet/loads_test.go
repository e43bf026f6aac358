package main

import (
	"context"
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestLoadsInFlightFlag: --loads-in-flight and --load-jobs-in-flight 0
// mean no bound (-1 for the orchestrator, whose 0 is its default), a
// positive value is the bound, and a negative one is refused with the
// flag's name.
func TestLoadsInFlightFlag(t *testing.T) {
	for _, tt := range []struct {
		loads, jobs         int
		wantLoads, wantJobs int
		err                 string
	}{
		{loads: 2, jobs: 2048, wantLoads: 2, wantJobs: 2048},
		{loads: 16, jobs: 1, wantLoads: 16, wantJobs: 1},
		{loads: 0, jobs: 0, wantLoads: -1, wantJobs: -1},
		{loads: -1, jobs: 2048, err: "--loads-in-flight -1"},
		{loads: 2, jobs: -1, err: "--load-jobs-in-flight -1"},
	} {
		o := memberOptions{loadsInFlight: tt.loads, loadJobsInFlight: tt.jobs}
		loads, jobs, err := o.loadsConfig()
		switch {
		case tt.err != "" && (err == nil || !strings.Contains(err.Error(), tt.err)):
			t.Errorf("--loads-in-flight %d --load-jobs-in-flight %d: error %v, want one naming %q", tt.loads, tt.jobs, err, tt.err)
		case tt.err == "" && (err != nil || loads != tt.wantLoads || jobs != tt.wantJobs):
			t.Errorf("--loads-in-flight %d --load-jobs-in-flight %d: %d, %d, %v; want %d, %d", tt.loads, tt.jobs, loads, jobs, err, tt.wantLoads, tt.wantJobs)
		}
	}
}

// TestDevRefusesBadFlagsBeforeStarting: dev refuses a bad member setting
// before it starts anything: no embedded etcd in its data directory, no
// credentials, no CLI context written.
func TestDevRefusesBadFlagsBeforeStarting(t *testing.T) {
	t.Setenv("XDG_CONFIG_HOME", t.TempDir())
	for _, args := range [][]string{
		{"--loads-in-flight=-1"},
		{"--load-jobs-in-flight=-1"},
		{"--storage-high-water=2"},
		{"--worker-ttl=1s"},
		{"--worker-id-grace=500ms"},
	} {
		dir := filepath.Join(t.TempDir(), "dev")
		root := newRootCmd()
		root.SetArgs(append([]string{"dev", "--data-dir", dir, "--etcd-listen", "127.0.0.1:0", "--etcd-peer-listen", "127.0.0.1:0", "--listen", "127.0.0.1:1", "--workers=0", "--examples=false", "--orchestrators=1"}, args...))
		root.SetOut(io.Discard)
		root.SetErr(io.Discard)
		err := root.ExecuteContext(context.Background())
		if err == nil || !strings.Contains(err.Error(), strings.SplitN(args[0], "=", 2)[0]) {
			t.Errorf("dev %v: error %v, want one naming the flag", args, err)
		}
		if _, err := os.Stat(dir); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("dev %v: data directory %s: %v, want none (nothing started)", args, dir, err)
		}
	}
}
