package layering

import (
	"bufio"
	"bytes"
	"fmt"
	"os/exec"
	"slices"
	"strings"
	"testing"
)

// module is the module's import path.
const module = "github.com/jobfleet/jobfleet"

// testkit is the folder of test-only packages (kits and suites).
const testkit = "internal/testkit/"

// levels places every package of the module (paths relative to module):
// a package may import only packages of a lower level. Packages under
// internal/testkit are above every level and are not listed.
var levels = map[string]int{
	// Leaves: nothing of the module.
	"schedule":              0,
	"internal/retry":        0,
	"internal/buildinfo":    0,
	"internal/etcdserver":   0,
	"internal/netfault":     0,
	"internal/gapwatch":     0,
	"internal/etcdhealth":   0, // keeps an etcd client off silent endpoints
	"internal/httpserver":   0,
	"internal/settings":     0,
	"internal/cursor":       0, // the listings' signed cursors
	"internal/skewclock":    0,
	"internal/tracing":      0, // OpenTelemetry API only: the worker library uses it
	"bench/report":          0,
	"docs":                  0, // only the docs' tests
	"console":               0,
	"egress":                0, // the HTTP destination policy
	"dispatch/placement":    0, // labels and selectors: which workers may run a job
	"dispatch/liveoutput":   1, // rings of running attempts' output: imports internal/settings
	"internal/mirror":       1,
	"api":                   1, // the wire documents: imports only schedule
	"internal/etcdcluster":  1,
	"bench":                 2,
	"membership":            2,
	"membership/deathwatch": 3,
	"auth":                  2,
	"shard":                 3,
	"store":                 4,
	"dispatch/notify":       5,
	"dispatch/standby":      5, // the warm standby: imports shard and store
	"dispatch/limits":       5, // limit keys as a member sees them: imports store
	"dispatch/activity":     2, // the last hour per minute, for the console's charts: imports api
	"dispatch":              6,
	"internal/crontab":      5,
	"internal/storage":      6,
	"client":                7,
	"dispatch/workers":      7,
	"dispatch/worker":       7,
	"internal/orchestrator": 8,
	"admin":                 9,
	"internal/chaos":        9,
	"bench/inprocfleet":     9,
	"bench/failover":        10,
	"bench/rebalance":       10,
	"bench/scaling":         9,
	"bench/soak":            9,
	"bench/scale":           10,
	"bench/procfleet":       8, // the benchmarks' fleet of processes: client, dispatch/worker (header names), auth
	"bench/items":           9, // bench/procfleet, store
	"bench/steps":           9, // bench/procfleet
	"bench/limits":          9, // bench/procfleet
	"bench/child":           0, // the benchmarks' child processes
	"cmd/jobfleet":          11,

	// Opted into by programs whose workers find the orchestrators in etcd.
	"dispatch/worker/etcddiscovery": 8,
}

// pkg is one package as `go list` reports it.
type pkg struct {
	path    string   // relative to module
	imports []string // production imports (not tests'), relative to module when in it
}

// list runs `go list` with format over args and returns its output lines.
func list(t *testing.T, format string, args ...string) []string {
	t.Helper()
	goTool, err := exec.LookPath("go") // go test puts its own go first in PATH
	if err != nil {
		t.Fatalf("no go command: %v", err)
	}
	cmd := exec.Command(goTool, append([]string{"list", "-f", format}, args...)...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list %v: %v\n%s", args, err, stderr.Bytes())
	}
	var lines []string
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		if l := strings.TrimSpace(sc.Text()); l != "" {
			lines = append(lines, l)
		}
	}
	return lines
}

// packages lists the module's packages with their production imports.
func packages(t *testing.T) []pkg {
	var pkgs []pkg
	for _, l := range list(t, `{{.ImportPath}}{{range .Imports}} {{.}}{{end}}`, module+"/...") {
		f := strings.Fields(l)
		p := pkg{path: rel(f[0])}
		for _, imp := range f[1:] {
			if imp == module || strings.HasPrefix(imp, module+"/") {
				p.imports = append(p.imports, rel(imp))
			}
		}
		pkgs = append(pkgs, p)
	}
	if !slices.ContainsFunc(pkgs, func(p pkg) bool { return p.path == "store" && len(p.imports) > 0 }) {
		t.Fatalf("go list did not report store and its imports among %d packages", len(pkgs))
	}
	return pkgs
}

func rel(path string) string { return strings.TrimPrefix(path, module+"/") }

func isTestkit(path string) bool { return strings.HasPrefix(path, testkit) }

// violations returns what breaks the layering in pkgs, one line each.
func violations(pkgs []pkg, levels map[string]int) []string {
	var bad []string
	for _, p := range pkgs {
		if isTestkit(p.path) {
			continue // test kits may import anything of the module
		}
		lp, ok := levels[p.path]
		if !ok {
			bad = append(bad, fmt.Sprintf("%s has no level: add it to the table in internal/testkit/layering", p.path))
			continue
		}
		for _, imp := range p.imports {
			if isTestkit(imp) {
				bad = append(bad, fmt.Sprintf("%s imports the test kit %s: only tests may", p.path, imp))
				continue
			}
			li, ok := levels[imp]
			if !ok {
				continue // reported as a package of its own
			}
			if li >= lp {
				bad = append(bad, fmt.Sprintf("%s (level %d) imports %s (level %d): a package may import only lower levels", p.path, lp, imp, li))
			}
		}
	}
	slices.Sort(bad)
	return bad
}

// TestLayering fails when a package imports one of its level or above, or
// production code imports a test kit.
func TestLayering(t *testing.T) {
	for _, v := range violations(packages(t), levels) {
		t.Error(v)
	}
}

// TestLayeringCatchesUpwardImports checks the checker on made-up graphs:
// store importing dispatch, a leaf importing a leaf, admin importing a
// test kit, and a package with no level.
func TestLayeringCatchesUpwardImports(t *testing.T) {
	pkgs := []pkg{
		{path: "store", imports: []string{"schedule", "shard", "dispatch"}},
		{path: "schedule", imports: []string{"internal/mirror"}},
		{path: "admin", imports: []string{"store", testkit + "etcdtest"}},
		{path: "newpkg", imports: []string{"store"}},
		{path: testkit + "fleettest", imports: []string{"admin", testkit + "etcdtest"}},
		{path: "dispatch", imports: []string{"store", "schedule"}},
	}
	got := violations(pkgs, levels)
	want := []string{
		"admin imports the test kit internal/testkit/etcdtest: only tests may",
		"newpkg has no level: add it to the table in internal/testkit/layering",
		"schedule (level 0) imports internal/mirror (level 1): a package may import only lower levels",
		"store (level 4) imports dispatch (level 6): a package may import only lower levels",
	}
	if !slices.Equal(got, want) {
		t.Errorf("violations:\n got %q\nwant %q", got, want)
	}
}

// TestBinaryLinksNoTestCode fails when the jobfleet binary depends on
// package testing (or its subpackages), goleak, or a test kit.
func TestBinaryLinksNoTestCode(t *testing.T) {
	deps := list(t, `{{.ImportPath}}`, "-deps", module+"/cmd/jobfleet")
	if !slices.Contains(deps, module+"/store") {
		t.Fatalf("go list -deps of the binary does not list store; got %d packages", len(deps))
	}
	for _, d := range deps {
		if d == "testing" || strings.HasPrefix(d, "testing/") || strings.HasPrefix(d, "go.uber.org/goleak") || isTestkit(rel(d)) && strings.HasPrefix(d, module+"/") {
			t.Errorf("the jobfleet binary links %s", d)
		}
	}
}
