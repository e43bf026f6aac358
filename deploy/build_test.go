package deploy

import (
	"debug/elf"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestBuildScript checks what build.sh made for the other tests: a static
// binary that reports the version and commit it was given.
func TestBuildScript(t *testing.T) {
	needBinary(t)
	out, err := exec.Command(binary, "version").Output()
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"version  " + testVersion, "commit   " + testCommit, "go       go1."} {
		if !strings.Contains(string(out), want) {
			t.Errorf("jobfleet version printed %q, lacking %q", out, want)
		}
	}
	f, err := elf.Open(binary)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP || p.Type == elf.PT_DYNAMIC {
			t.Errorf("the binary is dynamically linked (%v): build.sh must build with CGO_ENABLED=0", p.Type)
		}
	}
	if libs, _ := f.ImportedLibraries(); len(libs) > 0 {
		t.Errorf("the binary needs shared libraries %v", libs)
	}

	bad := exec.Command("sh", "build.sh")
	bad.Env = append(os.Environ(), "VERSION=v1 ; rm -rf /", "OUT="+filepath.Join(t.TempDir(), "x"))
	if out, err := bad.CombinedOutput(); err == nil || !strings.Contains(string(out), "VERSION and COMMIT") {
		t.Errorf("build.sh with a VERSION holding a space and a semicolon: %v\n%s", err, out)
	}
}

// dockerStage is one stage of the Dockerfile.
type dockerStage struct {
	name, base string
	lines      []string
}

// TestDockerfile checks the image build without a container engine: the
// build stage runs build.sh with the version arguments, the orchestrator
// image has no shell and runs as a non-root user, the worker image has a
// shell and tini and runs as a non-root user, and the commands are
// jobfleet's.
func TestDockerfile(t *testing.T) {
	needBinary(t)
	data, err := os.ReadFile("Dockerfile")
	if err != nil {
		t.Fatal(err)
	}
	var stages []*dockerStage
	from := regexp.MustCompile(`(?i)^FROM\s+(\S+)(?:\s+AS\s+(\S+))?$`)
	text := strings.ReplaceAll(string(data), "\\\n", " ")
	for _, line := range strings.Split(text, "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		if m := from.FindStringSubmatch(line); m != nil {
			stages = append(stages, &dockerStage{name: m[2], base: m[1]})
			continue
		}
		if len(stages) > 0 {
			stages[len(stages)-1].lines = append(stages[len(stages)-1].lines, line)
		}
	}
	byName := map[string]*dockerStage{}
	for _, s := range stages {
		byName[s.name] = s
	}
	has := func(s *dockerStage, prefix string) string {
		for _, l := range s.lines {
			if strings.HasPrefix(l, prefix) {
				return l
			}
		}
		return ""
	}
	build := byName["build"]
	if build == nil || !strings.Contains(has(build, "RUN VERSION="), "sh deploy/build.sh") ||
		has(build, "ARG VERSION") == "" || has(build, "ARG COMMIT") == "" {
		t.Errorf("the build stage must take ARG VERSION and COMMIT and run deploy/build.sh")
	}
	for _, tt := range []struct {
		stage, user, entry string
		shell              bool
	}{
		{"orchestrator", "USER 65532:65532", `ENTRYPOINT ["/usr/local/bin/jobfleet"]`, false},
		{"worker", "USER 10001:10001", `ENTRYPOINT ["/usr/bin/tini", "--", "/usr/local/bin/jobfleet"]`, true},
	} {
		s := byName[tt.stage]
		if s == nil {
			t.Errorf("no stage %s", tt.stage)
			continue
		}
		if has(s, tt.user) == "" || has(s, tt.entry) == "" {
			t.Errorf("stage %s: want %s and %s", tt.stage, tt.user, tt.entry)
		}
		shellBase := !strings.Contains(s.base, "distroless/static")
		if shellBase != tt.shell {
			t.Errorf("stage %s on %s: shell %v, want %v", tt.stage, s.base, shellBase, tt.shell)
		}
		if has(s, "COPY --from=build /out/jobfleet /usr/local/bin/jobfleet") == "" {
			t.Errorf("stage %s does not take the binary of the build stage", tt.stage)
		}
		cmd := has(s, "CMD ")
		var words []string
		for _, w := range regexp.MustCompile(`"([^"]*)"`).FindAllStringSubmatch(cmd, -1) {
			words = append(words, w[1])
		}
		invocation{where: "Dockerfile stage " + tt.stage, args: words}.check(t)
	}
	ignore, err := os.ReadFile("Dockerfile.dockerignore")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(ignore), "!deploy/build.sh") {
		t.Errorf("Dockerfile.dockerignore leaves deploy/build.sh out of the context")
	}
}
