package retry_test

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// clockInjected are the packages (from the repository's root) whose types
// take a clockwork.Clock: their production code reads and waits on time
// only through it, so that tests control time.
var clockInjected = []string{
	"admin", "auth", "dispatch", "dispatch/notify", "dispatch/worker", "membership", "membership/deathwatch", "shard", "store",
	"internal/mirror", "internal/orchestrator", "internal/retry", "internal/storage",
}

// realClock matches calls of the real clock that a clock-injected package
// must make through its clock instead.
var realClock = regexp.MustCompile(`\btime\.(Now|Since|Until|After|AfterFunc|Sleep|NewTimer|NewTicker|Tick)\(`)

// TestNoRealClockInClockInjectedPackages fails when production code of a
// clock-injected package calls the real clock (time.Now, time.After, ...)
// instead of its injected one.
func TestNoRealClockInClockInjectedPackages(t *testing.T) {
	files := 0
	for _, pkg := range clockInjected {
		paths, err := filepath.Glob(filepath.Join("..", "..", pkg, "*.go"))
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range paths {
			if strings.HasSuffix(p, "_test.go") {
				continue
			}
			files++
			b, err := os.ReadFile(p)
			if err != nil {
				t.Fatal(err)
			}
			for i, line := range strings.Split(string(b), "\n") {
				code, _, _ := strings.Cut(line, "//")
				if m := realClock.FindString(code); m != "" {
					t.Errorf("%s:%d calls %s: use the injected clock", p, i+1, strings.TrimSuffix(m, "("))
				}
			}
		}
	}
	if files < 50 {
		t.Fatalf("read %d files: the package list is out of date", files)
	}
	if realClock.FindString("deadline := time.Now().Add(d)") == "" || realClock.FindString("now := clock.Now()") != "" {
		t.Fatal("the pattern does not tell real-clock calls from injected ones")
	}
}
