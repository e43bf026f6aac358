package bench

import (
	"os"
	"strings"
	"testing"
)

// TestProgressOnDevNullWritesLines: /dev/null is a character device but
// not a terminal, so progress on it (as on a file) is written as whole
// lines, never rewritten in place with carriage returns.
func TestProgressOnDevNullWritesLines(t *testing.T) {
	null, err := os.OpenFile(os.DevNull, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer null.Close()
	if p := NewProgress(null); p.tty {
		t.Errorf("progress on %s rewrites its line in place, as on a terminal", os.DevNull)
	}
	f, err := os.Create(t.TempDir() + "/progress")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	p := NewProgress(f)
	p.Update("step %d", 1)
	p.Step("done")
	b, err := os.ReadFile(f.Name())
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(b), "\r") {
		t.Errorf("progress on a file wrote a carriage return: %q", b)
	}
}
