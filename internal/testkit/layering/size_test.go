package layering

import (
	"bytes"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// core are the packages whose files must each stay readable at once, one
// concern a file; dispatch counts with its subpackages.
var core = []string{"membership", "shard", "store", "dispatch", "schedule", "api", "auth", "admin", "internal/orchestrator"}

// maxFileLines is the most lines a non-test .go file of a core package
// may have. A file that grows past it is split by concern, not trimmed.
const maxFileLines = 450

// generated matches the line Go's convention puts in a generated file
// (https://go.dev/s/generatedcode), before its package clause.
var generated = regexp.MustCompile(`(?m)^// Code generated .* DO NOT EDIT\.$`)

// isCore reports whether the package at path (relative to module) is a
// core package.
func isCore(path string) bool {
	return slices.Contains(core, path) || strings.HasPrefix(path, "dispatch/")
}

// oversized returns the files of lines (line counts by path) longer than
// limit, longest first, one line each.
func oversized(lines map[string]int, limit int) []string {
	var paths []string
	for p, n := range lines {
		if n > limit {
			paths = append(paths, p)
		}
	}
	slices.SortFunc(paths, func(a, b string) int {
		if d := lines[b] - lines[a]; d != 0 {
			return d
		}
		return strings.Compare(a, b)
	})
	out := make([]string, len(paths))
	for i, p := range paths {
		out[i] = p + ": " + strconv.Itoa(lines[p]) + " lines (at most " + strconv.Itoa(limit) + ")"
	}
	return out
}

// coreFileLines counts the lines of every non-test .go file of the core
// packages, by path relative to the module's root.
func coreFileLines(t *testing.T) map[string]int {
	t.Helper()
	root := list(t, `{{.Dir}}`, "-m")[0]
	lines := map[string]int{}
	for _, l := range list(t, `{{.ImportPath}} {{.Dir}}`, module+"/...") {
		path, dir, _ := strings.Cut(l, " ")
		if !isCore(rel(path)) {
			continue
		}
		files, err := filepath.Glob(filepath.Join(dir, "*.go"))
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range files {
			if strings.HasSuffix(f, "_test.go") {
				continue
			}
			b, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			if generated.Match(b[:bytes.Index(b, []byte("\npackage "))+1]) {
				continue // written by a program, read by none
			}
			name, err := filepath.Rel(root, f)
			if err != nil {
				t.Fatal(err)
			}
			lines[filepath.ToSlash(name)] = bytes.Count(b, []byte{'\n'})
		}
	}
	return lines
}

// TestCoreFilesAreSmall fails when a non-test .go file of a core package
// has more than maxFileLines lines, listing every such file.
func TestCoreFilesAreSmall(t *testing.T) {
	lines := coreFileLines(t)
	for _, f := range []string{"dispatch/dispatcher.go", "shard/controller.go", "store/keys.go", "admin/admin.go"} {
		if lines[f] == 0 {
			t.Fatalf("the core's files do not include %s; got %d files", f, len(lines))
		}
	}
	if bad := oversized(lines, maxFileLines); len(bad) > 0 {
		t.Errorf("files of the core packages over %d lines (split each by concern):\n%s", maxFileLines, strings.Join(bad, "\n"))
	}
}

// TestOversizedCatchesLongFiles checks the checker on made-up counts:
// files over the limit are listed longest first, those at it are not,
// and the core includes dispatch's subpackages but not the commands.
func TestOversizedCatchesLongFiles(t *testing.T) {
	got := oversized(map[string]int{"a.go": 450, "b.go": 451, "c.go": 900, "d.go": 12, "e.go": 451}, 450)
	want := []string{"c.go: 900 lines (at most 450)", "b.go: 451 lines (at most 450)", "e.go: 451 lines (at most 450)"}
	if !slices.Equal(got, want) {
		t.Errorf("oversized:\n got %q\nwant %q", got, want)
	}
	for path, want := range map[string]bool{"dispatch": true, "dispatch/standby": true, "shard": true, "admin": true, "internal/orchestrator": true, "cmd/jobfleet": false, "internal/chaos": false, "bench/scale": false, "dispatchx": false} {
		if got := isCore(path); got != want {
			t.Errorf("isCore(%q) = %v, want %v", path, got, want)
		}
	}
}
