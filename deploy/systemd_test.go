package deploy

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/coreos/go-systemd/v22/unit"
)

// installedBinary is where the units expect the binary.
const installedBinary = "/usr/local/bin/jobfleet"

// service is what a unit file says about how systemd runs the binary.
type service struct {
	// directives are the [Service] directives, by name, in order.
	directives map[string][]string
	// args are ExecStart's words after the binary.
	args []string
	// env are the variables of Environment= and the EnvironmentFile=.
	env map[string]string
	// credentials are LoadCredential= sources, by credential name.
	credentials map[string]string
	// files are the config files ExecStart names (--config), read from
	// the unit's directory by base name, by installed path.
	files map[string]string
}

// parseUnit reads unit file path, its environment file and its config
// files (found in the unit's directory by base name).
func parseUnit(path string) (service, error) {
	unitPath := path
	f, err := os.Open(path)
	if err != nil {
		return service{}, err
	}
	defer f.Close()
	opts, err := unit.DeserializeOptions(f)
	if err != nil {
		return service{}, fmt.Errorf("%s: %w", path, err)
	}
	s := service{directives: map[string][]string{}, env: map[string]string{}, credentials: map[string]string{}, files: map[string]string{}}
	for _, o := range opts {
		if o.Section != "Service" {
			continue
		}
		s.directives[o.Name] = append(s.directives[o.Name], o.Value)
		switch o.Name {
		case "ExecStart":
			if strings.ContainsAny(o.Value, `"'\`) {
				return s, fmt.Errorf("%s: ExecStart with quotes or escapes: keep it to plain words", path)
			}
			words := strings.Fields(o.Value)
			if len(words) == 0 || words[0] != installedBinary {
				return s, fmt.Errorf("%s: ExecStart=%s does not run %s", path, o.Value, installedBinary)
			}
			s.args = words[1:]
			for _, w := range s.args {
				if path, ok := strings.CutPrefix(w, "--config="); ok {
					data, err := os.ReadFile(filepath.Join(filepath.Dir(unitPath), filepath.Base(path)))
					if err != nil {
						return s, fmt.Errorf("%s: ExecStart names %s: %w", unitPath, path, err)
					}
					s.files[path] = string(data)
				}
			}
		case "Environment":
			k, v, ok := strings.Cut(o.Value, "=")
			if !ok || strings.ContainsAny(o.Value, `"' `) {
				return s, fmt.Errorf("%s: Environment=%s: want one plain KEY=VALUE", path, o.Value)
			}
			s.env[k] = v
		case "EnvironmentFile":
			env, err := parseEnvFile(filepath.Join(filepath.Dir(path), filepath.Base(o.Value)))
			if err != nil {
				return s, err
			}
			for k, v := range env {
				if _, dup := s.env[k]; dup {
					return s, fmt.Errorf("%s: %s set both in the unit and in %s", path, k, o.Value)
				}
				s.env[k] = v
			}
		case "LoadCredential":
			name, src, ok := strings.Cut(o.Value, ":")
			if !ok {
				return s, fmt.Errorf("%s: LoadCredential=%s: want NAME:PATH", path, o.Value)
			}
			s.credentials[name] = src
		}
	}
	return s, nil
}

// parseEnvFile reads an environment file: KEY=VALUE lines, comments and
// blank lines; no quoting (systemd would strip quotes; keep values
// plain so that every reader agrees).
func parseEnvFile(path string) (map[string]string, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	env := map[string]string{}
	for i, line := range strings.Split(string(data), "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		k, v, ok := strings.Cut(line, "=")
		if !ok || strings.ContainsAny(line, `"'\$ `) {
			return nil, fmt.Errorf("%s:%d: want a plain KEY=VALUE line, got %q", path, i+1, line)
		}
		env[k] = v
	}
	return env, nil
}

// credentialRef matches %d/NAME: a file in the credentials directory.
var credentialRef = regexp.MustCompile(`%d/([A-Za-z0-9_.-]+)`)

// checkService checks one unit: flags, credentials, stop behaviour and
// hardening.
func checkUnit(t reporter, where string, s service) resolved {
	t.Helper()
	r := invocation{where: where, args: s.args, env: s.env, files: s.files}.check(t)
	one := func(name string) string {
		v := s.directives[name]
		if len(v) == 0 {
			return ""
		}
		return v[len(v)-1]
	}
	for _, v := range s.env {
		for _, m := range credentialRef.FindAllStringSubmatch(v, -1) {
			if _, ok := s.credentials[m[1]]; !ok {
				t.Errorf("%s: %s refers to credential %q, which no LoadCredential= loads", where, v, m[1])
			}
		}
	}
	for name, src := range s.credentials {
		used := false
		for _, v := range s.env {
			used = used || strings.Contains(v, "%d/"+name)
		}
		if !used {
			t.Errorf("%s: credential %s (%s) is loaded but never given to the binary", where, name, src)
		}
	}
	for _, secretFlag := range []string{"admin-token-file", "token-file", "etcd-key", "etcd-password", "token"} {
		if v, ok := r.flags[secretFlag]; ok && !strings.HasPrefix(v, "%d/") {
			t.Errorf("%s: --%s=%s: secrets come as credentials (%%d/NAME), not from /etc or the environment", where, secretFlag, v)
		}
	}
	for name, want := range map[string]string{
		"User": "", "NoNewPrivileges": "yes", "ProtectSystem": "strict", "ProtectHome": "yes",
		"PrivateTmp": "yes", "KillSignal": "SIGTERM", "KillMode": "mixed", "Restart": "on-failure",
		"CapabilityBoundingSet": "", "UMask": "0077",
	} {
		got, set := one(name), len(s.directives[name]) > 0
		if !set || (want != "" && got != want) || (name == "User" && (got == "" || got == "root")) {
			t.Errorf("%s: %s=%q, want %q", where, name, got, want)
		}
	}
	stop, err := time.ParseDuration(one("TimeoutStopSec"))
	if err != nil {
		t.Errorf("%s: TimeoutStopSec=%q: %v", where, one("TimeoutStopSec"), err)
	}
	switch r.command {
	case "orchestrator":
		ttl := 5 * time.Second
		if v, ok := r.flags["lease-ttl"]; ok {
			ttl, _ = time.ParseDuration(v)
		}
		if stop < 2*ttl {
			t.Errorf("%s: TimeoutStopSec %v, want at least 2× the lease TTL %v to hand partitions over", where, stop, ttl)
		}
		if !strings.HasPrefix(r.flags["advertise"], "https://") || !r.has("tls-cert") || !r.has("etcd-cert") {
			t.Errorf("%s: want the API over TLS (https advertise URL, --tls-cert) and a client certificate for etcd", where)
		}
	case "worker":
		st := 30 * time.Second
		if v, ok := r.flags["shutdown-timeout"]; ok {
			st, _ = time.ParseDuration(v)
		}
		if stop < st+5*time.Second {
			t.Errorf("%s: TimeoutStopSec %v, want above --shutdown-timeout %v with room to report", where, stop, st)
		}
		if r.has("etcd-endpoints") {
			t.Errorf("%s: the worker reaches etcd; only orchestrators need to", where)
		}
	default:
		t.Errorf("%s: runs jobfleet %q", where, r.command)
	}
	return r
}

var units = []string{"jobfleet-orchestrator.service", "jobfleet-worker.service"}

func TestSystemdUnits(t *testing.T) {
	needBinary(t)
	for _, name := range units {
		t.Run(name, func(t *testing.T) {
			s, err := parseUnit(filepath.Join("systemd", name))
			if err != nil {
				t.Fatal(err)
			}
			checkUnit(t, "systemd/"+name, s)
		})
	}
}

func TestSystemdUnitChecksFail(t *testing.T) {
	needBinary(t)
	for _, tt := range []struct{ name, unit, old, new string }{
		{"misspelt setting", "orchestrator.yaml", "lease-ttl: 5s", "lease-time: 5s"},
		{"bad setting", "worker.yaml", "concurrency: 8", "concurrency: -8"},
		{"relation refused", "orchestrator.yaml", "tls-key: /etc/jobfleet/tls/api.key", "#tls-key: /etc/jobfleet/tls/api.key"},
		{"misspelt variable", "jobfleet-orchestrator.service", "Environment=JOBFLEET_ETCD_KEY=", "Environment=JOBFLEET_ETCD_KEYFILE="},
		{"credential not loaded", "jobfleet-orchestrator.service", "LoadCredential=admin-token:", "LoadCredential=admin:"},
		{"short stop timeout", "jobfleet-worker.service", "TimeoutStopSec=45s", "TimeoutStopSec=10s"},
		{"no hardening", "jobfleet-orchestrator.service", "ProtectSystem=strict", "ProtectSystem=full"},
		{"secret from /etc", "jobfleet-worker.service", "Environment=JOBFLEET_TOKEN_FILE=%d/worker-token", "Environment=JOBFLEET_TOKEN_FILE=/etc/jobfleet/worker.token"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			for _, f := range []string{"jobfleet-orchestrator.service", "jobfleet-worker.service", "orchestrator.yaml", "worker.yaml"} {
				data, err := os.ReadFile(filepath.Join("systemd", f))
				if err != nil {
					t.Fatal(err)
				}
				if f == tt.unit {
					mutated := bytes.Replace(data, []byte(tt.old), []byte(tt.new), 1)
					if bytes.Equal(mutated, data) {
						t.Fatalf("%q not in %s", tt.old, f)
					}
					data = mutated
				}
				if err := os.WriteFile(filepath.Join(dir, f), data, 0o600); err != nil {
					t.Fatal(err)
				}
			}
			rec := &recorder{}
			for _, name := range units {
				s, err := parseUnit(filepath.Join(dir, name))
				if err != nil {
					rec.Errorf("%v", err)
					continue
				}
				checkUnit(rec, name, s)
			}
			if !rec.failed {
				t.Errorf("units with %s pass", tt.name)
			}
		})
	}
}

// TestSystemdAnalyze runs systemd-analyze verify on the units (with the
// binary's path pointing at the test build) and requires a silent pass,
// and an exposure score of "OK" from systemd-analyze security.
func TestSystemdAnalyze(t *testing.T) {
	needBinary(t)
	tool, err := exec.LookPath("systemd-analyze")
	if err != nil {
		t.Skip("systemd-analyze is not installed (Debian's package systemd has it): unit files not verified")
	}
	dir := t.TempDir()
	var paths []string
	for _, name := range units {
		data, err := os.ReadFile(filepath.Join("systemd", name))
		if err != nil {
			t.Fatal(err)
		}
		data = bytes.ReplaceAll(data, []byte(installedBinary), []byte(binary))
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, data, 0o644); err != nil {
			t.Fatal(err)
		}
		paths = append(paths, p)
	}
	cmd := exec.Command(tool, append([]string{"verify", "--man=no"}, paths...)...)
	out, err := cmd.CombinedOutput()
	if err != nil || len(bytes.TrimSpace(out)) > 0 {
		t.Errorf("systemd-analyze verify: %v\n%s", err, out)
	}
	for _, p := range paths {
		// Exposure 0 (best) to 10; "OK" is at most 3.9 (39 in tenths).
		out, err := exec.Command(tool, "security", "--offline=yes", "--threshold=39", "--no-pager", p).CombinedOutput()
		if err != nil {
			t.Errorf("systemd-analyze security %s: %v\n%s", filepath.Base(p), err, out)
			continue
		}
		lines := strings.Split(strings.TrimSpace(string(out)), "\n")
		t.Logf("%s: %s", filepath.Base(p), lines[len(lines)-1])
	}
}

// commentedSetting matches a config file line that shows a setting
// commented out: "#key: value".
var commentedSetting = regexp.MustCompile(`(?m)^#([a-z][a-z0-9-]*: .*)$`)

// TestSystemdCommentedSettings: the settings the units' config files show
// commented out are settings the command accepts, and those the
// orchestrator's file shows are its defaults (its comments say so):
// uncommenting them changes nothing --print-config prints but where the
// values came from.
func TestSystemdCommentedSettings(t *testing.T) {
	needBinary(t)
	settingsOnly := func(out string) []string {
		var lines []string
		for _, l := range strings.Split(out, "\n") {
			if l == "" || strings.HasPrefix(l, "#") {
				continue
			}
			v, _, _ := strings.Cut(l, "  # from ")
			lines = append(lines, v)
		}
		return lines
	}
	for _, name := range units {
		t.Run(name, func(t *testing.T) {
			s, err := parseUnit(filepath.Join("systemd", name))
			if err != nil {
				t.Fatal(err)
			}
			inv := invocation{where: "systemd/" + name, args: s.args, env: s.env, files: s.files}
			uncommented := invocation{where: inv.where + " (commented settings set)", args: s.args, env: s.env, files: map[string]string{}}
			shown := 0
			for path, data := range s.files {
				shown += len(commentedSetting.FindAllString(data, -1))
				uncommented.files[path] = commentedSetting.ReplaceAllString(data, "$1")
			}
			if shown == 0 {
				t.Skip("no setting shown commented out")
			}
			before, after := settingsOnly(inv.accepted(t, t.TempDir())), settingsOnly(uncommented.accepted(t, t.TempDir()))
			if len(before) < 20 || len(after) != len(before) {
				t.Fatalf("--print-config printed %d settings, then %d", len(before), len(after))
			}
			if name != "jobfleet-orchestrator.service" {
				return // examples of values, not defaults
			}
			if strings.Join(before, "\n") != strings.Join(after, "\n") {
				t.Errorf("uncommenting the %d settings shown changes the configuration:\nbefore %q\nafter  %q", shown, before, after)
			}
		})
	}
}
