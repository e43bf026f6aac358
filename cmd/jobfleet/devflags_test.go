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

// TestDevRefusesBadFlagsBeforeStarting: dev refuses a bad member setting
// before it starts anything: no embedded etcd in its data directory, no
// credentials, no CLI context written.
func TestDevRefusesBadFlagsBeforeStarting(t *testing.T) {
	t.Setenv("XDG_CONFIG_HOME", t.TempDir())
	for _, args := range [][]string{
		{"--history-max-runs=-1"},
		{"--lease-ttl=-5s"},
		{"--storage-high-water=2"},
		{"--api-burst=-1"},
		{"--worker-ttl=1s"},
		{"--worker-id-grace=500ms"},
		{"--history-floor=-1"},
		{"--notify-max-age=-1h"},
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
