package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spf13/cobra"
)

// TestTokenFileReadableByOthersWarns checks that a client command warns,
// without refusing, about a token file other users can read, and is
// silent about a private one.
func TestTokenFileReadableByOthersWarns(t *testing.T) {
	t.Setenv("HOME", t.TempDir())
	t.Setenv("XDG_CONFIG_HOME", t.TempDir())
	dir := t.TempDir()
	for _, tt := range []struct {
		mode os.FileMode
		warn bool
	}{{0o644, true}, {0o640, true}, {0o600, false}, {0o400, false}} {
		path := filepath.Join(dir, "token-"+tt.mode.String())
		if err := os.WriteFile(path, []byte("s3cret\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(path, tt.mode); err != nil {
			t.Fatal(err)
		}
		var o clientOptions
		cmd := &cobra.Command{Use: "x"}
		o.register(cmd)
		var stderr bytes.Buffer
		cmd.SetErr(&stderr)
		if err := cmd.PersistentFlags().Set("token-file", path); err != nil {
			t.Fatal(err)
		}
		if err := o.prepare(); err != nil {
			t.Fatalf("mode %04o: %v, want accepted", tt.mode, err)
		}
		if o.bearer != "s3cret" {
			t.Fatalf("mode %04o: token %q", tt.mode, o.bearer)
		}
		got := stderr.String()
		if warned := strings.Contains(got, "can be read by other users") && strings.Contains(got, "chmod 600"); warned != tt.warn {
			t.Errorf("mode %04o: stderr %q, want a warning: %v", tt.mode, got, tt.warn)
		}
	}
}
