package deploy

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"sigs.k8s.io/yaml"
)

// The build the tests check the deployment files against.
const (
	testVersion = "v0.0.0-deploytest"
	testCommit  = "0123456789abcdef"
)

var (
	// binary is the jobfleet binary built by build.sh.
	binary string
	// commands are its commands' flags (`jobfleet flags`), by command.
	commands map[string]map[string]flagInfo
	// buildErr is why building or listing failed (every test then fails).
	buildErr error
)

// flagInfo is one flag as `jobfleet flags` lists it.
type flagInfo struct {
	Name  string `json:"name"`
	Type  string `json:"type"`
	Env   string `json:"env"`
	Usage string `json:"usage"`
}

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "jobfleet-deploy-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	binary = filepath.Join(dir, "jobfleet")
	buildErr = buildAndList()
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// buildAndList builds the binary with build.sh and reads its flags.
func buildAndList() error {
	cmd := exec.Command("sh", "build.sh")
	cmd.Env = append(os.Environ(), "VERSION="+testVersion, "COMMIT="+testCommit, "OUT="+binary)
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("sh build.sh: %v\n%s", err, out)
	}
	out, err := exec.Command(binary, "flags").Output()
	if err != nil {
		return fmt.Errorf("jobfleet flags: %v", err)
	}
	var list []struct {
		Command string     `json:"command"`
		Flags   []flagInfo `json:"flags"`
	}
	if err := json.Unmarshal(out, &list); err != nil {
		return fmt.Errorf("jobfleet flags: %v", err)
	}
	commands = map[string]map[string]flagInfo{}
	for _, c := range list {
		commands[c.Command] = map[string]flagInfo{}
		for _, f := range c.Flags {
			commands[c.Command][f.Name] = f
		}
	}
	return nil
}

// needBinary fails the test if the binary could not be built or listed.
func needBinary(t *testing.T) {
	t.Helper()
	if buildErr != nil {
		t.Fatal(buildErr)
	}
}

// reporter is the part of testing.T the checks report through.
type reporter interface {
	Helper()
	Errorf(format string, args ...any)
	Logf(format string, args ...any)
}

// recorder is a reporter that only records whether an error was
// reported, for tests of the checks themselves.
type recorder struct {
	failed bool
	errors []string
}

func (r *recorder) Helper()             {}
func (r *recorder) Logf(string, ...any) {}
func (r *recorder) Errorf(f string, a ...any) {
	r.failed = true
	r.errors = append(r.errors, fmt.Sprintf(f, a...))
}

// invocation is one way a deployment file runs the binary: a command,
// its arguments and its environment.
type invocation struct {
	// where names the file and object, for messages.
	where string
	// args are the command line after the binary: the command's words,
	// then flags.
	args []string
	// env holds the JOBFLEET_* variables set for it.
	env map[string]string
	// positional allows arguments after the command (a job ID).
	positional bool
	// files holds the contents of the files the invocation may name with
	// --config, by the path the binary sees.
	files map[string]string
}

// placeholders replaces the references a runner expands before the
// binary sees them (Kubernetes $(VAR), systemd %d and ${VAR}, compose
// ${VAR}) with a plain word, so that values can be type-checked.
var placeholders = regexp.MustCompile(`\$\([A-Z_][A-Z0-9_]*\)|\$\{[A-Za-z_][A-Za-z0-9_:-]*\}|%[a-zA-Z]`)

// resolved holds the flags an invocation sets, by flag name, after
// checking them.
type resolved struct {
	command string
	flags   map[string]string
}

// has reports whether flag name is set (to anything but "false").
func (r resolved) has(name string) bool {
	v, ok := r.flags[name]
	return ok && v != "false"
}

// check fails t for every flag or JOBFLEET_* variable of inv that the
// binary's command does not have, and for every value that does not
// parse as the flag's type; it returns the flags set.
func (inv invocation) check(t reporter) resolved {
	t.Helper()
	if buildErr != nil {
		t.Errorf("%s: %v", inv.where, buildErr)
		return resolved{}
	}
	// The command is the longest run of leading words naming one.
	var words []string
	for _, a := range inv.args {
		if strings.HasPrefix(a, "-") {
			break
		}
		words = append(words, a)
	}
	command := ""
	for n := len(words); n > 0; n-- {
		if _, ok := commands[strings.Join(words[:n], " ")]; ok {
			command = strings.Join(words[:n], " ")
			words = words[n:]
			break
		}
	}
	if command == "" {
		t.Errorf("%s: %q is not a jobfleet command", inv.where, inv.args)
		return resolved{}
	}
	if len(words) > 0 && !inv.positional {
		t.Errorf("%s: jobfleet %s takes no arguments, got %q", inv.where, command, words)
	}
	known := commands[command]
	r := resolved{command: command, flags: map[string]string{}}
	set := func(name, value, how string) {
		f, ok := known[name]
		if !ok {
			t.Errorf("%s: jobfleet %s has no flag --%s (%s)", inv.where, command, name, how)
			return
		}
		if err := checkValue(f.Type, value); err != nil {
			t.Errorf("%s: jobfleet %s --%s=%q (%s): %v", inv.where, command, name, value, how, err)
		}
		r.flags[name] = value
	}
	rest := inv.args[strings.Count(command, " ")+1+len(words):]
	for i := 0; i < len(rest); i++ {
		a := rest[i]
		if !strings.HasPrefix(a, "--") {
			if !inv.positional {
				t.Errorf("%s: argument %q: want --flag or --flag=value", inv.where, a)
			}
			continue
		}
		name, value, hasValue := strings.Cut(strings.TrimPrefix(a, "--"), "=")
		if !hasValue {
			if f, ok := known[name]; ok && f.Type != "bool" && i+1 < len(rest) {
				i++
				value = rest[i]
			} else {
				value = "true"
			}
		}
		set(name, value, "argument")
	}
	if path, ok := r.flags["config"]; ok {
		inv.configFile(t, r, path)
	}
	byEnv := map[string]string{}
	for name, f := range known {
		byEnv[f.Env] = name
	}
	for key, value := range inv.env {
		name, ok := byEnv[key]
		if !ok {
			// The binary ignores a variable it has no flag for: a typo
			// would silently drop a setting.
			name = strings.ToLower(strings.ReplaceAll(strings.TrimPrefix(key, "JOBFLEET_"), "_", "-"))
		}
		if _, dup := r.flags[name]; dup && ok {
			t.Errorf("%s: --%s given both as an argument and as %s (the argument wins)", inv.where, name, key)
		}
		set(name, value, "environment variable "+key)
	}
	if _, ok := known["print-config"]; ok {
		dir, err := os.MkdirTemp("", "jobfleet-deploy-run-")
		if err != nil {
			t.Errorf("%s: %v", inv.where, err)
			return r
		}
		defer os.RemoveAll(dir)
		inv.accepted(t, dir)
	}
	return r
}

// configFile checks the settings of the config file at path (as the
// binary sees it): every key a flag of r's command, every value of the
// flag's type, no setting also given as an argument; and adds them to
// r's flags.
func (inv invocation) configFile(t reporter, r resolved, path string) {
	t.Helper()
	data, ok := inv.files[path]
	if !ok {
		t.Errorf("%s: --config=%s names no file the deployment ships", inv.where, path)
		return
	}
	var settings map[string]any
	if err := yaml.UnmarshalStrict([]byte(data), &settings); err != nil {
		t.Errorf("%s: config file %s: %v", inv.where, path, err)
		return
	}
	known := commands[r.command]
	for _, key := range sortedKeys(settings) {
		how := "key of config file " + path
		f, ok := known[key]
		if !ok || key == "config" || key == "print-config" {
			t.Errorf("%s: jobfleet %s has no setting %s (%s)", inv.where, r.command, key, how)
			continue
		}
		if _, dup := r.flags[key]; dup {
			t.Errorf("%s: %s given both as an argument and in config file %s (the argument wins)", inv.where, key, path)
		}
		var values []string
		switch v := settings[key].(type) {
		case []any:
			if f.Type != "stringSlice" {
				t.Errorf("%s: %s: a list for --%s, of type %s", inv.where, how, key, f.Type)
			}
			for _, e := range v {
				values = append(values, fmt.Sprint(e))
			}
		case map[string]any, nil:
			t.Errorf("%s: %s: --%s wants a value, not %v", inv.where, how, key, v)
		default:
			values = []string{fmt.Sprint(v)}
		}
		for _, v := range values {
			if err := checkValue(f.Type, v); err != nil {
				t.Errorf("%s: jobfleet %s %s=%q (%s): %v", inv.where, r.command, key, v, how, err)
			}
		}
		r.flags[key] = strings.Join(values, ",")
	}
}

// runnable replaces the references a runner expands (placeholders) with
// values of the kind they stand for, so that the binary can check them.
func runnable(v string) string {
	return placeholders.ReplaceAllStringFunc(v, func(ref string) string {
		switch {
		case strings.HasPrefix(ref, "%"):
			return "/run/credentials/jobfleet" // systemd's %d
		case strings.Contains(ref, "NAMESPACE"):
			return "jobfleet"
		default:
			return "pod-0"
		}
	})
}

// accepted runs the binary on inv with --print-config, its files written
// where --config finds them: the binary must accept every setting (and
// start nothing). It returns what it printed.
func (inv invocation) accepted(t reporter, dir string) string {
	t.Helper()
	if buildErr != nil {
		t.Errorf("%s: %v", inv.where, buildErr)
		return ""
	}
	args := make([]string, 0, len(inv.args)+1)
	for _, a := range inv.args {
		if name, path, ok := strings.Cut(a, "="); ok && name == "--config" {
			local := filepath.Join(dir, strings.ReplaceAll(strings.Trim(path, "/"), "/", "_"))
			if err := os.WriteFile(local, []byte(runnable(inv.files[path])), 0o600); err != nil {
				t.Errorf("%s: %v", inv.where, err)
				return ""
			}
			a = "--config=" + local
		}
		args = append(args, runnable(a))
	}
	cmd := exec.Command(binary, append(args, "--print-config")...)
	cmd.Env = []string{"HOME=" + dir, "PATH=" + os.Getenv("PATH")}
	for k, v := range inv.env {
		cmd.Env = append(cmd.Env, k+"="+runnable(v))
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Errorf("%s: jobfleet %s --print-config refuses the settings: %v: %s", inv.where, strings.Join(args, " "), err, bytes.TrimSpace(stderr.Bytes()))
	}
	return string(out)
}

// checkValue reports whether value parses as a flag of pflag type typ.
func checkValue(typ, value string) error {
	v := placeholders.ReplaceAllString(value, "x")
	var err error
	switch typ {
	case "bool":
		_, err = strconv.ParseBool(v)
	case "int", "int64", "uint", "uint64":
		_, err = strconv.ParseInt(v, 10, 64)
	case "float64":
		_, err = strconv.ParseFloat(v, 64)
	case "duration":
		_, err = time.ParseDuration(v)
	case "string", "stringSlice", "stringArray":
		if strings.TrimSpace(v) != v {
			err = fmt.Errorf("surrounding white space")
		}
	default:
		if v == "" {
			err = fmt.Errorf("empty")
		}
	}
	return err
}

// sortedKeys returns m's keys in order.
func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// repoFile returns the path of a file of the repository (the deploy
// module's parent).
func repoFile(parts ...string) string {
	return filepath.Join(append([]string{".."}, parts...)...)
}

func TestInvocationCheckFails(t *testing.T) {
	needBinary(t)
	// The checker itself must be able to fail: run it on bad invocations
	// under a recorder.
	for _, tt := range []struct {
		name string
		inv  invocation
	}{
		{"unknown flag", invocation{args: []string{"orchestrator", "--lease-tll=5s"}}},
		{"unknown command", invocation{args: []string{"orchestrater"}}},
		{"bad duration", invocation{args: []string{"orchestrator", "--lease-ttl=five"}}},
		{"bad int", invocation{args: []string{"worker", "--concurrency=lots"}}},
		{"unknown variable", invocation{args: []string{"worker"}, env: map[string]string{"JOBFLEET_CONCURENCY": "4"}}},
		{"variable of another command", invocation{args: []string{"worker"}, env: map[string]string{"JOBFLEET_LEASE_TTL": "5s"}}},
		{"positional argument", invocation{args: []string{"orchestrator", "extra"}}},
		{"config file not shipped", invocation{args: []string{"orchestrator", "--config=/etc/jobfleet/o.yaml"}}},
		{"unknown config key", invocation{args: []string{"worker", "--config=/c.yaml"}, files: map[string]string{"/c.yaml": "concurency: 4\n"}}},
		{"config value of the wrong type", invocation{args: []string{"worker", "--config=/c.yaml"}, files: map[string]string{"/c.yaml": "concurrency: lots\n"}}},
		{"config value the binary refuses", invocation{args: []string{"worker", "--config=/c.yaml"}, files: map[string]string{"/c.yaml": "concurrency: -4\n"}}},
		{"settings that do not fit together", invocation{args: []string{"orchestrator", "--config=/c.yaml"}, files: map[string]string{"/c.yaml": "tls-cert: /a.crt\n"}}},
		{"a setting in the file and as an argument", invocation{args: []string{"worker", "--config=/c.yaml", "--concurrency=4"}, files: map[string]string{"/c.yaml": "concurrency: 8\n"}}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			rec := &recorder{}
			tt.inv.where = tt.name
			tt.inv.check(rec)
			if !rec.failed {
				t.Errorf("%v: not reported", tt.inv)
			}
		})
	}
	good := invocation{where: "good", args: []string{"orchestrator", "--lease-ttl=5s", "--id=$(POD_NAME)", "--config=/c.yaml"}, env: map[string]string{"JOBFLEET_PARTITIONS": "1024"},
		files: map[string]string{"/c.yaml": "etcd-endpoints: [http://a:2379, http://b:2379]\nhistory-max-runs: 50\n"}}
	r := good.check(t)
	if r.flags["lease-ttl"] != "5s" || r.flags["partitions"] != "1024" || r.flags["history-max-runs"] != "50" || r.flags["etcd-endpoints"] != "http://a:2379,http://b:2379" {
		t.Errorf("resolved %v", r.flags)
	}
}
