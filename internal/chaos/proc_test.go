package chaos

import (
	"path/filepath"
	"testing"
	"time"
)

// TestExitOfEachIncarnationStays: the exit time of an incarnation stays
// known after the process was started again, as a rolling restart does at
// once: the fault suite's record of a worker's life reads it after the
// next incarnation may be running.
func TestExitOfEachIncarnationStays(t *testing.T) {
	p := newProcess("sh", filepath.Join(t.TempDir(), "log"), []string{"-c", "exit 0"})
	wait := func() {
		t.Helper()
		_, done := p.state()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			t.Fatal("the process did not exit")
		}
	}
	if err := p.start("/bin/sh"); err != nil {
		t.Fatal(err)
	}
	wait()
	first := p.exitedAtOf(0)
	p.setArgs([]string{"-c", "sleep 30"})
	if err := p.start("/bin/sh"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.kill() })
	if first.IsZero() || !p.exitedAtOf(0).Equal(first) {
		t.Fatalf("incarnation 0's exit %v after the restart, want %v", p.exitedAtOf(0), first)
	}
	if got := p.exitedAtOf(1); !got.IsZero() {
		t.Fatalf("incarnation 1 exited at %v while it runs", got)
	}
}
