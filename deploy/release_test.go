package deploy

import (
	"bufio"
	"crypto/sha256"
	"debug/elf"
	"encoding/hex"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// tagVersion is the tag the release tests put on their throwaway commit.
const tagVersion = "v1.2.3"

// taggedCopy makes a git repository in a temporary folder holding the
// repository's files as they are in the work tree (committed or not,
// ignored files left out), commits them once and tags that commit
// tagVersion; it returns the folder and the commit. The real repository
// gets no tag and no commit.
func taggedCopy(t *testing.T) (dir, commit string) {
	t.Helper()
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("no git on PATH")
	}
	list := exec.Command("git", "ls-files", "-z", "--cached", "--others", "--exclude-standard")
	list.Dir = ".."
	out, err := list.Output()
	if err != nil {
		t.Skipf("not a git checkout: git ls-files: %v", err)
	}
	dir = filepath.Join(t.TempDir(), "src")
	copied := 0
	for _, f := range strings.Split(string(out), "\x00") {
		if f == "" {
			continue
		}
		src := filepath.Join("..", f)
		st, err := os.Lstat(src)
		if err != nil || !st.Mode().IsRegular() {
			continue // deleted in the work tree, or not a file
		}
		dst := filepath.Join(dir, f)
		if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := copyFile(dst, src, st.Mode().Perm()); err != nil {
			t.Fatal(err)
		}
		copied++
	}
	if copied < 100 {
		t.Fatalf("copied %d files: the listing is broken", copied)
	}
	git(t, dir, "init", "-q")
	git(t, dir, "add", "-A")
	git(t, dir, "commit", "-q", "-m", "throwaway commit of the release test")
	git(t, dir, "tag", "-a", tagVersion, "-m", tagVersion)
	return dir, strings.TrimSpace(git(t, dir, "rev-parse", "HEAD"))
}

// git runs git in dir with a throwaway identity and returns its output.
func git(t *testing.T, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", append([]string{"-c", "user.name=release test", "-c", "user.email=release-test@example.invalid", "-c", "commit.gpgsign=false", "-c", "tag.gpgsign=false"}, args...)...)
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

func copyFile(dst, src string, perm os.FileMode) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, perm)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}

// cleanEnv is the environment without the build's VERSION and COMMIT, so
// that the version comes from the tag; GOFLAGS stays (a -buildvcs=false
// in it must not hide the tag).
func cleanEnv(extra ...string) []string {
	var env []string
	for _, e := range os.Environ() {
		if !strings.HasPrefix(e, "VERSION=") && !strings.HasPrefix(e, "COMMIT=") {
			env = append(env, e)
		}
	}
	return append(env, extra...)
}

// versionOf runs bin version -o json.
func versionOf(t *testing.T, bin string) (version, commit string, modified bool) {
	t.Helper()
	out, err := exec.Command(bin, "version", "-o", "json").Output()
	if err != nil {
		t.Fatalf("%s version: %v", bin, err)
	}
	var info struct {
		Version  string `json:"version"`
		Commit   string `json:"commit"`
		Modified bool   `json:"modified"`
	}
	if err := json.Unmarshal(out, &info); err != nil {
		t.Fatalf("%s version -o json: %v in %q", bin, err, out)
	}
	return info.Version, info.Commit, info.Modified
}

// TestVersionFromTag builds a tagged commit three ways and checks that
// each binary reports the tag and the commit: build.sh (git describe,
// link flags), a plain go build (the go command's own stamp), and
// build.sh again after an edit (the version marked dirty).
func TestVersionFromTag(t *testing.T) {
	dir, commit := taggedCopy(t)
	bins := t.TempDir()
	for _, tt := range []struct {
		name         string
		args         []string // the output file follows; build.sh reads it from OUT
		edit         bool
		wantVersion  string
		wantModified bool
	}{
		{name: "build.sh", args: []string{"sh", "deploy/build.sh"}, wantVersion: tagVersion},
		{name: "go build", args: []string{"go", "build", "-trimpath", "-buildvcs=auto", "-o"}, wantVersion: tagVersion},
		{name: "build.sh after an edit", args: []string{"sh", "deploy/build.sh"}, edit: true, wantVersion: tagVersion + "-dirty", wantModified: true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if tt.edit {
				f, err := os.OpenFile(filepath.Join(dir, "README.md"), os.O_APPEND|os.O_WRONLY, 0)
				if err != nil {
					t.Fatal(err)
				}
				f.WriteString("\nan edit after the tag\n")
				if err := f.Close(); err != nil {
					t.Fatal(err)
				}
			}
			bin := filepath.Join(bins, strings.ReplaceAll(tt.name, " ", "-"))
			args := tt.args
			if args[0] == "go" {
				args = append(args, bin, "./cmd/jobfleet")
			}
			cmd := exec.Command(args[0], args[1:]...)
			cmd.Dir = dir
			cmd.Env = cleanEnv("OUT="+bin, "CGO_ENABLED=0")
			if out, err := cmd.CombinedOutput(); err != nil {
				t.Fatalf("%s: %v\n%s", strings.Join(args, " "), err, out)
			}
			v, c, m := versionOf(t, bin)
			if v != tt.wantVersion || c != commit || m != tt.wantModified {
				t.Errorf("got version %q commit %q modified %v, want %q %q %v", v, c, m, tt.wantVersion, commit, tt.wantModified)
			}
		})
	}
}

// TestReleaseScript runs release.sh on a tagged commit: a static binary
// per architecture, named for the version, each reporting it, and a
// SHA256SUMS file that matches them; and it refuses a work tree with
// changes or a commit without a tag.
func TestReleaseScript(t *testing.T) {
	dir, commit := taggedCopy(t)
	run := func(env ...string) (string, error) {
		cmd := exec.Command("sh", "deploy/release.sh")
		cmd.Dir = dir
		cmd.Env = cleanEnv(env...)
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	if out, err := run(); err != nil {
		t.Fatalf("release.sh: %v\n%s", err, out)
	}
	dist := filepath.Join(dir, "dist", tagVersion)
	sums := map[string]string{}
	f, err := os.Open(filepath.Join(dist, "SHA256SUMS"))
	if err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		sum, name, ok := strings.Cut(sc.Text(), "  ")
		if !ok {
			t.Errorf("SHA256SUMS line %q: want \"<sum>  <file>\"", sc.Text())
		}
		sums[name] = sum
	}
	f.Close()
	for arch, machine := range map[string]elf.Machine{"amd64": elf.EM_X86_64, "arm64": elf.EM_AARCH64} {
		name := "jobfleet-" + tagVersion + "-linux-" + arch
		b, err := os.ReadFile(filepath.Join(dist, name))
		if err != nil {
			t.Errorf("release.sh made no %s: %v", name, err)
			continue
		}
		if got := sha256.Sum256(b); sums[name] != hex.EncodeToString(got[:]) {
			t.Errorf("SHA256SUMS says %s is %q, it is %x", name, sums[name], got)
		}
		e, err := elf.Open(filepath.Join(dist, name))
		if err != nil {
			t.Fatal(err)
		}
		if e.Machine != machine {
			t.Errorf("%s is for %v, want %v", name, e.Machine, machine)
		}
		for _, p := range e.Progs {
			if p.Type == elf.PT_INTERP || p.Type == elf.PT_DYNAMIC {
				t.Errorf("%s is dynamically linked (%v)", name, p.Type)
			}
		}
		e.Close()
		if machine == elf.EM_X86_64 && hostIsAMD64() {
			if v, c, m := versionOf(t, filepath.Join(dist, name)); v != tagVersion || c != commit || m {
				t.Errorf("%s reports version %q commit %q modified %v, want %q %q false", name, v, c, m, tagVersion, commit)
			}
		}
	}
	if len(sums) != 2 {
		t.Errorf("SHA256SUMS lists %d files, want 2: %v", len(sums), sums)
	}

	if err := os.WriteFile(filepath.Join(dir, "notes.txt"), []byte("not committed\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := run("ARCHS=amd64"); err == nil || !strings.Contains(out, "uncommitted changes") {
		t.Errorf("release.sh in a work tree with changes: %v\n%s", err, out)
	}
	git(t, dir, "add", "notes.txt")
	git(t, dir, "commit", "-q", "-m", "after the tag")
	if out, err := run("ARCHS=amd64"); err == nil || !strings.Contains(out, "has no v* tag") {
		t.Errorf("release.sh on a commit without a tag: %v\n%s", err, out)
	}
	if out, err := run("ARCHS=amd64", "VERSION=1.2.3"); err == nil || !strings.Contains(out, "v1.2.3") {
		t.Errorf("release.sh with VERSION=1.2.3: %v\n%s", err, out)
	}
}

// hostIsAMD64 reports whether this machine runs linux/amd64 binaries.
func hostIsAMD64() bool {
	e, err := elf.Open("/proc/self/exe")
	if err != nil {
		return false
	}
	defer e.Close()
	return e.Machine == elf.EM_X86_64
}
