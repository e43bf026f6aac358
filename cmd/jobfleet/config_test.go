package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/jobfleet/jobfleet/internal/settings"
)

// setting is one row of the settings table: a flag, two values it takes
// (a differs from the default, b from a), flags it needs besides
// (with), and where its value lands in the command's configuration.
type setting[C any] struct {
	a, b string
	with []string
	get  func(*C) any
}

// The settings every member has (dev and orchestrator).
func memberSettings() map[string]setting[memberOptions] {
	m := func(a, b string, get func(*memberOptions) any) setting[memberOptions] {
		return setting[memberOptions]{a: a, b: b, get: get}
	}
	return map[string]setting[memberOptions]{
		"admin-token-file":           m("/a/admin.token", "/b/admin.token", func(c *memberOptions) any { return c.adminTokenFile }),
		"advertise":                  m("http://a.example:8080", "http://b.example:8080", func(c *memberOptions) any { return c.orch.Advertise }),
		"api-burst":                  m("7", "9", func(c *memberOptions) any { return c.api.Limits.Burst }),
		"api-rate":                   m("7.5", "-1", func(c *memberOptions) any { return c.api.Limits.Rate }),
		"api-write-bytes":            m("7000", "-1", func(c *memberOptions) any { return c.api.Limits.WriteBytes }),
		"api-write-bytes-burst":      m("7", "9", func(c *memberOptions) any { return c.api.Limits.WriteBytesBurst }),
		"api-write-revisions":        m("7.5", "-1", func(c *memberOptions) any { return c.api.Limits.WriteRevisions }),
		"api-write-revisions-burst":  m("7", "9", func(c *memberOptions) any { return c.api.Limits.WriteRevisionsBurst }),
		"backfill-rate":              m("7.5", "-1", func(c *memberOptions) any { return c.orch.Dispatch.BackfillRate }),
		"compaction-bytes":           m("7MiB", "9000000", func(c *memberOptions) any { return c.orch.Storage.CompactionBytes }),
		"compaction-interval":        m("7s", "-1s", func(c *memberOptions) any { return c.orch.Storage.CompactionInterval }),
		"dead-member-confirm":        m("70ms", "90ms", func(c *memberOptions) any { return c.orch.DeadMembers.Confirm }),
		"dead-member-probe-interval": m("700ms", "-1s", func(c *memberOptions) any { return c.orch.DeadMembers.Interval }),
		"delete-after":               m("7h", "-1s", func(c *memberOptions) any { return c.orch.Dispatch.DeleteAfter }),
		"etcd-quota-bytes":           m("7GiB", "9000000000", func(c *memberOptions) any { return c.orch.Storage.QuotaBytes }),
		"history-budget":             m("7GiB", "900MB", func(c *memberOptions) any { return c.orch.Dispatch.HistoryBudget }),
		"history-floor":              m("7", "9", func(c *memberOptions) any { return c.orch.Dispatch.HistoryFloor }),
		"history-max-age":            m("7h", "-1s", func(c *memberOptions) any { return c.orch.Dispatch.HistoryMaxAge }),
		"history-max-runs":           m("7", "9", func(c *memberOptions) any { return c.orch.Dispatch.HistoryMaxRuns }),
		"insecure-no-auth":           m("true", "false", func(c *memberOptions) any { return c.insecureNoAuth }),
		"lease-ttl":                  m("7s", "9s", func(c *memberOptions) any { return c.orch.LeaseTTL }),
		"activity-interval":          m("7s", "9s", func(c *memberOptions) any { return c.orch.ActivityInterval }),
		"listen":                     m("127.0.0.1:7000", "localhost:9000", func(c *memberOptions) any { return c.listen }),
		"load-jobs-in-flight":        m("7", "-1", func(c *memberOptions) any { return c.orch.Dispatch.LoadJobsInFlight }),
		"loads-in-flight":            m("7", "-1", func(c *memberOptions) any { return c.orch.Dispatch.LoadsInFlight }),
		"max-polls":                  m("700", "900", func(c *memberOptions) any { return c.api.Limits.MaxPolls }),
		"max-polls-per-credential":   m("7", "9", func(c *memberOptions) any { return c.api.Limits.MaxPollsPerCredential }),
		"max-streams":                m("7", "9", func(c *memberOptions) any { return c.api.Limits.MaxStreams }),
		"max-streams-per-credential": m("7", "9", func(c *memberOptions) any { return c.api.Limits.MaxStreamsPerCredential }),
		"namespace":                  m("/a/", "/b/", func(c *memberOptions) any { return c.orch.Namespace }),
		"notify-allow":               m("10.0.0.0/8,127.0.0.1:9000", "192.168.0.0/16", func(c *memberOptions) any { return c.orch.Notify.Policy.Allow }),
		"notify-deny":                m("10.0.0.0/8,*.internal", "192.168.0.0/16", func(c *memberOptions) any { return c.orch.Notify.Policy.Deny }),
		"notify-in-flight":           m("7", "-1", func(c *memberOptions) any { return c.orch.Notify.Delivery.Concurrency }),
		"notify-max-age":             m("7h", "9h", func(c *memberOptions) any { return c.orch.Notify.Delivery.MaxAge }),
		"notify-max-pending":         m("7", "-1", func(c *memberOptions) any { return c.orch.Notify.Delivery.MaxPendingPerJob }),
		"notify-on":                  m("failed,succeeded", "dead", func(c *memberOptions) any { return c.orch.Notify.On }),
		"notify-secret-env":          m("A_TOKEN,B_TOKEN", "C_TOKEN", func(c *memberOptions) any { return c.orch.Notify.SecretEnv }),
		"notify-console-url":         m("https://a.example/ui/", "https://b.example/ui/", func(c *memberOptions) any { return c.orch.Notify.ConsoleURL }),
		"priority-aging":             m("7s", "-1s", func(c *memberOptions) any { return c.orch.Dispatch.PriorityAging }),
		"limit-queue-interval":       m("7s", "-1s", func(c *memberOptions) any { return c.orch.Dispatch.LimitQueueInterval }),
		"live-output-bytes":          m("7KiB", "9KiB", func(c *memberOptions) any { return c.orch.Dispatch.LiveOutput.AttemptBytes }),
		"live-output-attempts":       m("7", "-1", func(c *memberOptions) any { return c.orch.Dispatch.LiveOutput.Attempts }),
		"notify-url":                 m("https://a.example/hook", "https://b.example/hook", func(c *memberOptions) any { return c.orch.Notify.URL }),
		"partitions":                 m("7", "9", func(c *memberOptions) any { return c.orch.Partitions }),
		"run-lease":                  m("7s", "9s", func(c *memberOptions) any { return c.orch.Dispatch.RunLease }),
		"storage-check-interval":     m("7s", "9s", func(c *memberOptions) any { return c.orch.Storage.CheckInterval }),
		"storage-high-water":         m("0.7", "0.9", func(c *memberOptions) any { return c.orch.Storage.HighWater }),
		"trigger-burst":              m("7", "9", func(c *memberOptions) any { return c.api.TriggerBurst }),
		"trigger-rate":               m("7.5", "-1", func(c *memberOptions) any { return c.api.TriggerRate }),
		"warm-standby":               m("true", "false", func(c *memberOptions) any { return c.orch.WarmStandby }),
		"worker-id-grace":            m("7s", "9m", func(c *memberOptions) any { return c.orch.Workers.IDGrace }),
		"worker-presence-grace":      m("700ms", "-1s", func(c *memberOptions) any { return c.orch.Workers.PresenceGrace }),
		"worker-register-rate":       m("7.5", "-1", func(c *memberOptions) any { return c.orch.Workers.RequestRate }),
		"worker-register-writes":     m("7.5", "-1", func(c *memberOptions) any { return c.orch.Workers.WriteRate }),
		"worker-ttl":                 m("7s", "9s", func(c *memberOptions) any { return c.orch.Workers.TTL }),
	}
}

func etcdSettings() map[string]setting[etcdOptions] {
	e := func(a, b string, with []string, get func(*etcdOptions) any) setting[etcdOptions] {
		return setting[etcdOptions]{a: a, b: b, with: with, get: get}
	}
	return map[string]setting[etcdOptions]{
		"etcd-endpoints": e("http://a-1:2379,http://a-2:2379", "https://b:2379", nil, func(c *etcdOptions) any { return c.endpoints }),
		"etcd-ca":        e("/a/ca.crt", "/b/ca.crt", nil, func(c *etcdOptions) any { return c.ca }),
		"etcd-cert":      e("/a/client.crt", "/b/client.crt", []string{"--etcd-key=/k"}, func(c *etcdOptions) any { return c.cert }),
		"etcd-key":       e("/a/client.key", "/b/client.key", []string{"--etcd-cert=/c"}, func(c *etcdOptions) any { return c.key }),
		"etcd-username":  e("a", "b", nil, func(c *etcdOptions) any { return c.username }),
		"etcd-password":  e("secret-a", "secret-b", nil, func(c *etcdOptions) any { return c.password }),
	}
}

func logSettings() map[string]setting[logOptions] {
	return map[string]setting[logOptions]{
		"log-level":  {a: "debug", b: "warn", get: func(c *logOptions) any { return c.level }},
		"log-format": {a: "console", b: "json", get: func(c *logOptions) any { return c.format }},
	}
}

// lift turns rows of a part's settings into rows of a command's.
func lift[C, P any](dst map[string]setting[C], src map[string]setting[P], part func(*C) *P) {
	for name, s := range src {
		dst[name] = setting[C]{a: s.a, b: s.b, with: s.with, get: func(c *C) any { return s.get(part(c)) }}
	}
}

// settingsTable returns, for each long-running command, a row per flag.
func orchestratorSettings() map[string]setting[orchestratorOptions] {
	t := map[string]setting[orchestratorOptions]{
		"id":                          {a: "a", b: "b", get: func(c *orchestratorOptions) any { return c.mem.orch.ID }},
		"max-connections":             {a: "7", b: "9", get: func(c *orchestratorOptions) any { return c.srv.maxConnections }},
		"max-connections-per-address": {a: "7", b: "9", get: func(c *orchestratorOptions) any { return c.srv.fair.MaxConnectionsPerAddress }},
		"anonymous-rate":              {a: "7", b: "9.5", get: func(c *orchestratorOptions) any { return c.srv.fair.AnonymousRate }},
		"anonymous-burst":             {a: "7", b: "9", get: func(c *orchestratorOptions) any { return c.srv.fair.AnonymousBurst }},
		"metrics-listen":              {a: "127.0.0.1:7001", b: "localhost:9001", get: func(c *orchestratorOptions) any { return c.srv.metricsListen }},
		"tls-cert":                    {a: "/a/api.crt", b: "/b/api.crt", with: []string{"--tls-key=/k", "--advertise=https://m:1"}, get: func(c *orchestratorOptions) any { return c.srv.tlsCert }},
		"tls-key":                     {a: "/a/api.key", b: "/b/api.key", with: []string{"--tls-cert=/c", "--advertise=https://m:1"}, get: func(c *orchestratorOptions) any { return c.srv.tlsKey }},
		"tls-client-ca":               {a: "/a/ca.crt", b: "/b/ca.crt", with: []string{"--tls-cert=/c", "--tls-key=/k"}, get: func(c *orchestratorOptions) any { return c.srv.tlsClientCA }},
		"peer-ca":                     {a: "/a/ca.crt", b: "/b/ca.crt", with: []string{"--tls-cert=/c", "--tls-key=/k", "--advertise=https://m:1"}, get: func(c *orchestratorOptions) any { return c.srv.peerCA }},
	}
	lift(t, memberSettings(), func(c *orchestratorOptions) *memberOptions { return &c.mem })
	lift(t, etcdSettings(), func(c *orchestratorOptions) *etcdOptions { return &c.etcd })
	lift(t, logSettings(), func(c *orchestratorOptions) *logOptions { return &c.logs })
	return t
}

func devSettings() map[string]setting[devOptions] {
	t := map[string]setting[devOptions]{
		"id":                          {a: "a", b: "b", with: []string{"--orchestrators=1"}, get: func(c *devOptions) any { return c.mem.orch.ID }},
		"max-connections":             {a: "7", b: "9", get: func(c *devOptions) any { return c.srv.maxConnections }},
		"max-connections-per-address": {a: "7", b: "9", get: func(c *devOptions) any { return c.srv.fair.MaxConnectionsPerAddress }},
		"anonymous-rate":              {a: "7", b: "9.5", get: func(c *devOptions) any { return c.srv.fair.AnonymousRate }},
		"anonymous-burst":             {a: "7", b: "9", get: func(c *devOptions) any { return c.srv.fair.AnonymousBurst }},
		"orchestrators":               {a: "1", b: "5", get: func(c *devOptions) any { return c.orchestrators }},
		"workers":                     {a: "0", b: "5", get: func(c *devOptions) any { return c.workers }},
		"examples":                    {a: "false", b: "true", get: func(c *devOptions) any { return c.examples }},
		"data-dir":                    {a: "/a/dev", b: "/b/dev", get: func(c *devOptions) any { return c.dataDir }},
		"etcd-listen":                 {a: "127.0.0.1:7379", b: "127.0.0.1:9379", get: func(c *devOptions) any { return c.etcdListen }},
		"etcd-peer-listen":            {a: "127.0.0.1:7380", b: "127.0.0.1:9380", get: func(c *devOptions) any { return c.etcdPeer }},
	}
	lift(t, memberSettings(), func(c *devOptions) *memberOptions { return &c.mem })
	lift(t, logSettings(), func(c *devOptions) *logOptions { return &c.logs })
	return t
}

func workerSettings() map[string]setting[workerOptions] {
	w := func(a, b string, with []string, get func(*workerOptions) any) setting[workerOptions] {
		return setting[workerOptions]{a: a, b: b, with: with, get: get}
	}
	t := map[string]setting[workerOptions]{
		"id":                  w("a", "b", nil, func(c *workerOptions) any { return c.w.ID }),
		"concurrency":         w("7", "9", nil, func(c *workerOptions) any { return c.w.Concurrency }),
		"allow-shell":         w("true", "false", nil, func(c *workerOptions) any { return c.w.AllowShell }),
		"labels":              w("pool=a,zone=z1", "pool=b", nil, func(c *workerOptions) any { return c.w.Labels }),
		"shutdown-timeout":    w("7s", "9s", nil, func(c *workerOptions) any { return c.w.ShutdownTimeout }),
		"poll-wait":           w("7s", "9s", nil, func(c *workerOptions) any { return c.w.PollWait }),
		"token":               w("token-a", "token-b", nil, func(c *workerOptions) any { return c.w.Token }),
		"http-allow":          w("10.0.0.0/8,127.0.0.1:9000", "192.168.0.0/16", nil, func(c *workerOptions) any { return c.w.HTTPPolicy.Allow }),
		"http-deny":           w("10.0.0.0/8,*.internal", "192.168.0.0/16", nil, func(c *workerOptions) any { return c.w.HTTPPolicy.Deny }),
		"http-proxy-from-env": w("true", "false", nil, func(c *workerOptions) any { return c.w.HTTPPolicy.ProxyFromEnvironment }),
		"shell-env":           w("A_VAR,B_VAR", "C_VAR", nil, func(c *workerOptions) any { return c.w.ShellEnv }),
		"secret-env":          w("A_TOKEN,B_TOKEN", "C_TOKEN", nil, func(c *workerOptions) any { return c.w.SecretEnv }),
		"orchestrators":       w("http://a-1:8080,http://a-2:8080", "https://b:8443", nil, func(c *workerOptions) any { return c.orchestrators }),
		"discover":            w("true", "false", []string{"--orchestrators=http://seed:8080"}, func(c *workerOptions) any { return c.discover }),
		"namespace":           w("/a/", "/b/", nil, func(c *workerOptions) any { return c.namespace }),
		"metrics-listen":      w("127.0.0.1:7001", "localhost:9001", nil, func(c *workerOptions) any { return c.metricsListen }),
		"token-file":          w("/a/worker.token", "/b/worker.token", nil, func(c *workerOptions) any { return c.tokenFile }),
		"ca":                  w("/a/ca.crt", "/b/ca.crt", nil, func(c *workerOptions) any { return c.caFile }),
		"cert":                w("/a/w.crt", "/b/w.crt", []string{"--key=/k"}, func(c *workerOptions) any { return c.certFile }),
		"key":                 w("/a/w.key", "/b/w.key", []string{"--cert=/c"}, func(c *workerOptions) any { return c.keyFile }),
	}
	lift(t, etcdSettings(), func(c *workerOptions) *etcdOptions { return &c.etcd })
	lift(t, logSettings(), func(c *workerOptions) *logOptions { return &c.logs })
	return t
}

// commandUnderTest runs one long-running command in process, configured
// by a configuration the test can read.
type commandUnderTest[C any] struct {
	name     string
	defaults func() *C
	command  func(*C) *cobra.Command
	rows     map[string]setting[C]
}

// run executes `jobfleet <name> --print-config args...` (with the config
// file text, if any) on a fresh default configuration and returns it,
// with what the command printed.
func (u commandUnderTest[C]) run(t *testing.T, file string, args ...string) (*C, string, error) {
	t.Helper()
	cfg := u.defaults()
	root := newRootCmd()
	for _, c := range root.Commands() {
		if c.Name() == u.name {
			root.RemoveCommand(c)
		}
	}
	root.AddCommand(u.command(cfg))
	if file != "" {
		path := filepath.Join(t.TempDir(), "config.yaml")
		if err := os.WriteFile(path, []byte(file), 0o600); err != nil {
			t.Fatal(err)
		}
		args = append(args, "--config", path)
	}
	var out bytes.Buffer
	root.SetOut(&out)
	root.SetErr(&out)
	root.SetArgs(append([]string{u.name, "--print-config"}, args...))
	err := root.ExecuteContext(context.Background())
	return cfg, out.String(), err
}

// yamlLine writes setting name = value as a config file line: a list for
// a list flag, a plain scalar for a number or a boolean.
func yamlLine(f *pflag.Flag, value string) string {
	if _, ok := f.Value.(pflag.SliceValue); ok {
		b, _ := json.Marshal(strings.Split(value, ","))
		return fmt.Sprintf("%s: %s\n", f.Name, b)
	}
	switch f.Value.Type() {
	case "int", "float64", "bool":
		return fmt.Sprintf("%s: %s\n", f.Name, value)
	}
	return fmt.Sprintf("%s: %q\n", f.Name, value)
}

// helpDefault matches a flag's line in --help: its name, and the default
// pflag prints at the end of its usage.
var helpLine = regexp.MustCompile(`^\s+(?:-\w, )?--([a-z0-9-]+)(?: \w+)?\s{2,}.*?(?:\(default (.+)\))?$`)

// helpDefaults returns the defaults the command's --help shows, by flag
// name ("" for a flag whose default it does not show: the zero value).
func (u commandUnderTest[C]) helpDefaults(t *testing.T) map[string]string {
	t.Helper()
	root := newRootCmd()
	var out bytes.Buffer
	root.SetOut(&out)
	root.SetArgs([]string{u.name, "--help"})
	if err := root.Execute(); err != nil {
		t.Fatal(err)
	}
	shown := map[string]string{}
	for _, line := range strings.Split(out.String(), "\n") {
		if m := helpLine.FindStringSubmatch(line); m != nil {
			d := m[2]
			if uq, err := strconv.Unquote(d); err == nil {
				d = uq
			} else if strings.HasPrefix(d, "[") && strings.HasSuffix(d, "]") {
				d = d[1 : len(d)-1]
			}
			shown[m[1]] = d
		}
	}
	if len(shown) < 20 {
		t.Fatalf("read %d flags from `%s --help`: the parser is broken\n%s", len(shown), u.name, out.String())
	}
	return shown
}

func same(a, b any) bool { return fmt.Sprint(a) == fmt.Sprint(b) }

// check runs the table over every flag of the command.
func (u commandUnderTest[C]) check(t *testing.T) {
	fs := u.command(u.defaults()).Flags()
	var names []string
	fs.VisitAll(func(f *pflag.Flag) {
		if fileKey(f) {
			names = append(names, f.Name)
		}
	})
	for name := range u.rows {
		if fs.Lookup(name) == nil {
			t.Errorf("the table has a row for --%s, which %s does not have", name, u.name)
		}
	}
	shown := u.helpDefaults(t)
	ref := u.defaults() // never bound to flags: the struct's own defaults
	for _, name := range names {
		row, ok := u.rows[name]
		if !ok {
			t.Errorf("%s --%s has no row in the settings table: add one", u.name, name)
			continue
		}
		f := fs.Lookup(name)
		t.Run(name, func(t *testing.T) {
			want := row.get(ref)
			// The default --help shows is the configuration's default.
			helpDefault, listed := shown[name]
			if !listed {
				t.Fatalf("--%s is not in --help", name)
			}
			if helpDefault == "" {
				if v := reflect.ValueOf(want); !v.IsZero() && !(v.Kind() == reflect.Slice && v.Len() == 0) {
					t.Errorf("--help shows no default, the configuration's is %v", want)
				}
			} else {
				parsed := u.defaults()
				pfs := u.command(parsed).Flags()
				if err := pfs.Set(name, helpDefault); err != nil {
					t.Fatalf("the default --help shows, %q: %v", helpDefault, err)
				}
				if got := row.get(parsed); !same(got, want) {
					t.Errorf("--help shows the default %q (%v), the configuration's is %v", helpDefault, got, want)
				}
			}

			byFlag := func(v string) any {
				t.Helper()
				c, out, err := u.run(t, "", append(slices.Clone(row.with), "--"+name+"="+v)...)
				if err != nil {
					t.Fatalf("--%s=%s: %v\n%s", name, v, err, out)
				}
				return row.get(c)
			}
			if same(byFlag(row.a), want) { // a is this command's default: swap
				row.a, row.b = row.b, row.a
			}
			wantA, wantB := byFlag(row.a), byFlag(row.b)
			if same(wantA, want) || same(wantA, wantB) {
				t.Fatalf("the samples %q and %q do not change --%s from %v (%v, %v): the test could not fail", row.a, row.b, name, want, wantA, wantB)
			}

			// Its environment variable sets it.
			t.Run("env", func(t *testing.T) {
				t.Setenv(envName(name), row.a)
				c, out, err := u.run(t, "", row.with...)
				if err != nil {
					t.Fatalf("%s=%s: %v\n%s", envName(name), row.a, err, out)
				}
				if got := row.get(c); !same(got, wantA) {
					t.Errorf("%s=%s: %v, want %v", envName(name), row.a, got, wantA)
				}
			})
			// A config file sets it, and the flag overrides the file.
			line := yamlLine(f, row.a)
			c, out, err := u.run(t, line, row.with...)
			if err != nil {
				t.Fatalf("config file %q: %v\n%s", line, err, out)
			}
			if got := row.get(c); !same(got, wantA) {
				t.Errorf("config file %q: %v, want %v", line, got, wantA)
			}
			if !settings.IsSecret(f) && !slices.ContainsFunc(strings.Split(out, "\n"), func(l string) bool {
				return strings.HasPrefix(l, name+": ") && strings.HasSuffix(l, "# from "+filepath.Join(filepath.Dir(l[strings.LastIndex(l, " ")+1:]), "config.yaml"))
			}) {
				t.Errorf("--print-config does not say the value of %s came from the file:\n%s", name, out)
			}
			c, out, err = u.run(t, line, append(slices.Clone(row.with), "--"+name+"="+row.b)...)
			if err != nil {
				t.Fatalf("config file %q and --%s=%s: %v\n%s", line, name, row.b, err, out)
			}
			if got := row.get(c); !same(got, wantB) {
				t.Errorf("config file %q and --%s=%s: %v, want the flag's %v", line, name, row.b, got, wantB)
			}
			// And the environment overrides the file too.
			t.Setenv(envName(name), row.b)
			c, out, err = u.run(t, line, row.with...)
			if err != nil {
				t.Fatalf("config file %q and %s=%s: %v\n%s", line, envName(name), row.b, err, out)
			}
			if got := row.get(c); !same(got, wantB) {
				t.Errorf("config file %q and %s=%s: %v, want the variable's %v", line, envName(name), row.b, got, wantB)
			}
		})
	}
}

func orchestratorUnderTest() commandUnderTest[orchestratorOptions] {
	return commandUnderTest[orchestratorOptions]{name: "orchestrator", defaults: defaultOrchestratorOptions, command: orchestratorCommand, rows: orchestratorSettings()}
}

func devUnderTest() commandUnderTest[devOptions] {
	return commandUnderTest[devOptions]{name: "dev", defaults: defaultDevOptions, command: devCommand, rows: devSettings()}
}

func workerUnderTest() commandUnderTest[workerOptions] {
	return commandUnderTest[workerOptions]{name: "worker", defaults: defaultWorkerOptions, command: workerCommand, rows: workerSettings()}
}

// TestSettingsTable: for every flag of dev, orchestrator and worker, the
// default --help shows is the configuration struct's default, its
// JOBFLEET_* variable sets it, a config file sets it, and the flag and the
// variable override the file.
func TestSettingsTable(t *testing.T) {
	t.Run("orchestrator", orchestratorUnderTest().check)
	t.Run("dev", devUnderTest().check)
	t.Run("worker", workerUnderTest().check)
}

// zeroExceptions are the numeric flags for which 0 is not the default,
// and what it is instead. The rule, in docs/operations.md, names them.
var zeroExceptions = map[string]string{
	"dev --workers":       "a count of workers: 0 runs none",
	"dev --orchestrators": "a count of members: at least 1",
}

// checkZeroConvention checks every number, size and duration flag of the
// command against the one convention: 0 is the default, a negative value
// is accepted exactly when the flag is marked unbounded (and its help
// says what it means), and refused naming the flag otherwise.
func (u commandUnderTest[C]) checkZeroConvention(t *testing.T) {
	ref := u.defaults()
	u.command(u.defaults()).Flags().VisitAll(func(f *pflag.Flag) {
		negative := map[string]string{"int": "-1", "float64": "-1", "duration": "-1s", "bytes": "-1"}[f.Value.Type()]
		if negative == "" || !fileKey(f) {
			return
		}
		row := u.rows[f.Name]
		t.Run(f.Name, func(t *testing.T) {
			meaning, unbounded := settings.NegativeMeaning(f)
			if says := strings.Contains(f.Usage, "negative: "); says != unbounded || (unbounded && !strings.Contains(f.Usage, "negative: "+meaning)) {
				t.Errorf("help %q: says what a negative value means %v, marked unbounded %v (%q)", f.Usage, says, unbounded, meaning)
			}
			_, out, err := u.run(t, "", append(slices.Clone(row.with), "--"+f.Name+"="+negative)...)
			switch {
			case unbounded && err != nil:
				t.Errorf("--%s=%s (%s) is refused: %v\n%s", f.Name, negative, meaning, err, out)
			case !unbounded && err == nil:
				t.Errorf("--%s=%s is accepted, but the flag is not marked unbounded", f.Name, negative)
			case !unbounded && !strings.Contains(err.Error(), "--"+f.Name):
				t.Errorf("--%s=%s is refused with %q, which does not name the flag", f.Name, negative, err)
			}
			c, out, err := u.run(t, "", append(slices.Clone(row.with), "--"+f.Name+"=0")...)
			if why, ok := zeroExceptions[u.name+" --"+f.Name]; ok {
				t.Logf("--%s=0: %v (%s)", f.Name, err, why)
				return
			}
			if err != nil {
				t.Fatalf("--%s=0 (the default) is refused: %v\n%s", f.Name, err, out)
			}
			if got, want := row.get(any(u.effective(c)).(*C)), row.get(ref); !same(got, want) {
				t.Errorf("--%s=0 is in effect %v, want the default %v", f.Name, got, want)
			}
		})
	})
}

// effective returns c with its zero settings replaced by their defaults,
// as --print-config shows it.
func (u commandUnderTest[C]) effective(c *C) settingsOf {
	return any(c).(settingsOf).withDefaults()
}

// TestSettingsZeroConvention: every number, size and duration flag of
// dev, orchestrator and worker follows the zero convention, and its help
// says so.
func TestSettingsZeroConvention(t *testing.T) {
	t.Run("orchestrator", orchestratorUnderTest().checkZeroConvention)
	t.Run("dev", devUnderTest().checkZeroConvention)
	t.Run("worker", workerUnderTest().checkZeroConvention)
}

// TestBadConfigFileRefusedBeforeStarting: orchestrator, worker and dev
// processes given a config file with a bad key or a bad value exit with
// an error naming the file, the key and the rule, before they start
// anything: no log line of starting, no connection to etcd, no data
// directory.
func TestBadConfigFileRefusedBeforeStarting(t *testing.T) {
	etcdLn, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer etcdLn.Close()
	etcdURL := "http://" + etcdLn.Addr().String()
	dir := t.TempDir()
	devDir := filepath.Join(dir, "dev-data")
	for _, tt := range []struct {
		name, command, file string
		args                []string
		want                []string // besides the file's path
	}{
		{"orchestrator, refused negative", "orchestrator", "lease-ttl: 5s\nhistory-max-runs: -1\n", []string{"--etcd-endpoints=" + etcdURL},
			[]string{"key history-max-runs", "-1", "want 1 to 100000"}},
		{"orchestrator, not a duration", "orchestrator", "lease-ttl: soon\n", []string{"--etcd-endpoints=" + etcdURL},
			[]string{"key lease-ttl", `"soon" is not a duration`}},
		{"orchestrator, unknown key", "orchestrator", "lease-tll: 5s\n", []string{"--etcd-endpoints=" + etcdURL},
			[]string{"key lease-tll", "unknown setting"}},
		{"orchestrator, a worker's key", "orchestrator", "concurrency: 8\n", []string{"--etcd-endpoints=" + etcdURL},
			[]string{"key concurrency", "unknown setting"}},
		{"orchestrator, relation", "orchestrator", "max-polls: 100\nmax-polls-per-credential: 200\n", []string{"--etcd-endpoints=" + etcdURL},
			[]string{"key max-polls-per-credential", "200", "at most --max-polls"}},
		{"worker, refused negative", "worker", "concurrency: -4\n", []string{"--etcd-endpoints=" + etcdURL},
			[]string{"key concurrency", "-4", "want 1 to 1024"}},
		{"worker, list where one value goes", "worker", "poll-wait: [1s, 2s]\n", []string{"--etcd-endpoints=" + etcdURL},
			[]string{"key poll-wait", "not a list"}},
		{"dev, refused negative", "dev", "storage-high-water: 2\n", []string{"--data-dir=" + devDir, "--etcd-listen=127.0.0.1:0", "--etcd-peer-listen=127.0.0.1:0", "--workers=0"},
			[]string{"key storage-high-water", "at most 1"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(dir, strings.ReplaceAll(tt.name, " ", "-")+".yaml")
			if err := os.WriteFile(path, []byte(tt.file), 0o600); err != nil {
				t.Fatal(err)
			}
			p := startProc(t, tt.command, append([]string{tt.command, "--config=" + path}, tt.args...)...)
			if code := p.Wait(t, 10*time.Second); code == 0 || code == -1 {
				t.Fatalf("exit code %d, want an error exit", code)
			}
			stderr := p.Stderr.String()
			for _, want := range append([]string{"config file " + path}, tt.want...) {
				if !strings.Contains(stderr, want) {
					t.Errorf("stderr lacks %q:\n%s", want, stderr)
				}
			}
			if strings.Contains(stderr, "starting") || strings.Count(stderr, "\n") > 2 {
				t.Errorf("want one line of error and nothing started, got:\n%s", stderr)
			}
		})
	}
	// The processes have exited: a connection any of them made to etcd
	// waits in the listener's queue.
	etcdLn.(*net.TCPListener).SetDeadline(time.Now())
	if c, err := etcdLn.Accept(); err == nil {
		c.Close()
		t.Errorf("a process connected to etcd although its configuration was refused")
	}
	if _, err := os.Stat(devDir); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("dev made its data directory (%v) although its configuration was refused", err)
	}
}

// TestConfigFileShapes: what loadConfigFile accepts besides a plain
// mapping of values, and what it refuses, naming the file and the key.
func TestConfigFileShapes(t *testing.T) {
	u := workerUnderTest()
	for _, tt := range []struct {
		name, file string
		want       string // in the error; "" for accepted
		check      func(*workerOptions) bool
	}{
		{"empty", "", "", nil},
		{"comments only", "# nothing yet\n", "", nil},
		{"list as one comma separated value", "http-allow: 10.0.0.0/8,127.0.0.1\n", "", func(c *workerOptions) bool { return len(c.w.HTTPPolicy.Allow) == 2 }},
		{"list as a YAML list", "http-allow:\n  - 10.0.0.0/8\n  - 127.0.0.1\n", "", func(c *workerOptions) bool { return len(c.w.HTTPPolicy.Allow) == 2 }},
		{"empty list", "http-allow: []\n", "", func(c *workerOptions) bool { return len(c.w.HTTPPolicy.Allow) == 0 }},
		{"number as a string", "concurrency: \"8\"\n", "", func(c *workerOptions) bool { return c.w.Concurrency == 8 }},
		{"boolean", "allow-shell: true\n", "", func(c *workerOptions) bool { return c.w.AllowShell }},
		{"not a mapping", "- concurrency\n", "want a mapping of settings", nil},
		{"nested mapping", "worker:\n  concurrency: 8\n", "key worker: unknown setting", nil},
		{"mapping as a value", "concurrency: {n: 8}\n", "key concurrency: want a single value, not a mapping", nil},
		{"no value", "concurrency:\n", "key concurrency: no value", nil},
		{"duplicate key", "concurrency: 8\nconcurrency: 9\n", "already set", nil},
		{"the config flag itself", "config: other.yaml\n", "key config: unknown setting", nil},
		{"print-config", "print-config: true\n", "key print-config: unknown setting", nil},
		{"a hidden flag", "help: true\n", "key help: unknown setting", nil},
		{"list entry with spaces", "http-allow: [' 10.0.0.0/8']\n", "surrounding spaces", nil},
		{"not YAML", "concurrency: [8\n", "not YAML", nil},
		// YAML 1.1 reads these as booleans and numbers; the file's
		// documentation says true, false and decimal.
		{"yes for a boolean", "allow-shell: yes\n", "key allow-shell: yes is read by YAML as the boolean true: write true or false", nil},
		{"on for a boolean", "allow-shell: on\n", "key allow-shell: on is read by YAML as the boolean true: write true or false", nil},
		{"True for a boolean", "allow-shell: True\n", "write true or false", nil},
		{"quoted yes for a boolean", "allow-shell: \"yes\"\n", `key allow-shell: "yes" is not true or false`, nil},
		{"false", "allow-shell: false\n", "", func(c *workerOptions) bool { return !c.w.AllowShell }},
		{"no for a string", "namespace: no\n", `key namespace: no is read by YAML as the boolean false: quote it ("no") for the text`, nil},
		{"quoted no for a string", "namespace: \"no/\"\n", "", func(c *workerOptions) bool { return c.namespace == "no/" }},
		{"hexadecimal", "concurrency: 0x10\n", "key concurrency: 0x10 is read by YAML as the number 16: write numbers in decimal (16)", nil},
		{"octal", "concurrency: 010\n", "key concurrency: 010 is read by YAML as the number 8: write numbers in decimal (8)", nil},
		{"exponent", "concurrency: 1e1\n", "write numbers in decimal (10)", nil},
		{"underscores", "concurrency: 1_0\n", "write numbers in decimal (10)", nil},
		{"quoted hexadecimal", "concurrency: \"0x10\"\n", `key concurrency: "0x10" is not an integer: write the number in decimal`, nil},
		{"number for a string", "id: 010\n", `key id: 010 is read by YAML as the number 8: quote it ("010") for the text`, nil},
		{"yes in a list", "http-allow: [127.0.0.1, on]\n", `key http-allow: on is read by YAML as the boolean true: quote it ("on") for the text`, nil},
		{"not an integer", "concurrency: lots\n", `key concurrency: "lots" is not an integer`, nil},
		{"not a duration", "poll-wait: soon\n", `key poll-wait: "soon" is not a duration such as 30s`, nil},
		{"list for a number", "concurrency: [8]\n", "key concurrency: want a single value (an integer), not a list", nil},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c, out, err := u.run(t, tt.file)
			switch {
			case tt.want == "" && err != nil:
				t.Fatalf("refused: %v\n%s", err, out)
			case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want) || !strings.Contains(err.Error(), "config file ")):
				t.Fatalf("error %v, want one naming the file and containing %q", err, tt.want)
			case tt.check != nil && !tt.check(c):
				t.Errorf("loaded %+v", c.w)
			}
		})
	}
}

// TestPrintConfigMasksSecrets: --print-config never shows a secret's
// value (etcd's password, the worker's token), wherever it came from, and
// what it prints reads back with --config to the same settings.
func TestPrintConfigMasksSecrets(t *testing.T) {
	t.Setenv("JOBFLEET_ETCD_PASSWORD", "etcd-hunter2")
	u := workerUnderTest()
	_, out, err := u.run(t, "token: file-token-hunter2\nconcurrency: 7\n", "--etcd-username=root")
	if err != nil {
		t.Fatal(err)
	}
	for _, secret := range []string{"etcd-hunter2", "file-token-hunter2"} {
		if strings.Contains(out, secret) {
			t.Errorf("--print-config shows the secret %q:\n%s", secret, out)
		}
	}
	for _, want := range []string{"# etcd-password: not shown", "# token: not shown", "concurrency: 7", `etcd-username: "root"  # from --etcd-username`} {
		if !strings.Contains(out, want) {
			t.Errorf("--print-config lacks %q:\n%s", want, out)
		}
	}
	os.Unsetenv("JOBFLEET_ETCD_PASSWORD")
	again, out2, err := u.run(t, out)
	if err != nil {
		t.Fatalf("--config refuses what --print-config printed: %v\n%s", err, out)
	}
	if again.w.Concurrency != 7 || again.etcd.username != "root" || again.w.Token != "" || again.etcd.password != "" {
		t.Errorf("read back: concurrency %d, user %q, token %q, password %q; want 7, root and no secrets", again.w.Concurrency, again.etcd.username, again.w.Token, again.etcd.password)
	}
	if strings.Count(out2, "\n") != strings.Count(out, "\n") || !strings.Contains(out2, "\ntoken: \"\"\n") || !strings.Contains(out2, "\netcd-password: \"\"\n") {
		t.Errorf("printed again: want the same keys, the secrets unset:\n%s", out2)
	}
}

// TestPrintConfigReadsBack: for dev, orchestrator and worker, what
// --print-config prints (with settings from every source) is a config
// file that --config reads back to the same settings.
func TestPrintConfigReadsBack(t *testing.T) {
	t.Setenv("JOBFLEET_LEASE_TTL", "7s")
	t.Setenv("JOBFLEET_CONCURRENCY", "0") // 0: printed as the default it stands for
	t.Run("orchestrator", func(t *testing.T) {
		checkReadsBack(t, orchestratorUnderTest(), nil, "history-max-runs: 7\nnotify-on: [failed, dead]\netcd-quota-bytes: 8GiB\n", "--loads-in-flight=-1", "--delete-after=0")
	})
	t.Run("dev", func(t *testing.T) {
		checkReadsBack(t, devUnderTest(), nil, "workers: 0\nexamples: false\n", "--history-budget=2GiB")
	})
	t.Run("worker", func(t *testing.T) {
		checkReadsBack(t, workerUnderTest(), func(out string) {
			if !strings.Contains(out, "\nconcurrency: 4  # from JOBFLEET_CONCURRENCY\n") {
				t.Errorf("JOBFLEET_CONCURRENCY=0 is not printed as the default, 4:\n%s", out)
			}
		}, "http-allow: [10.0.0.0/8, '*.internal']\n", "--orchestrators=http://a:1,http://b:2")
	})
}

// checkReadsBack runs u with the config file and args, hands what it
// printed to inspect (if not nil), runs u again with that as its config
// file, and checks that both printed the same settings (comments aside),
// at least 20 of them.
func checkReadsBack[C any](t *testing.T, u commandUnderTest[C], inspect func(out string), file string, args ...string) {
	t.Helper()
	_, out, err := u.run(t, file, args...)
	if err != nil {
		t.Fatal(err)
	}
	if inspect != nil {
		inspect(out)
	}
	_, again, err := u.run(t, out)
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	a, b := settingsOnly(out), settingsOnly(again)
	if len(a) < 20 || !slices.Equal(a, b) {
		t.Errorf("read back differently:\nfirst  %q\nsecond %q", a, b)
	}
}

// settingsOnly returns the lines of a --print-config output that are
// settings, without their "# from" comments.
func settingsOnly(out string) []string {
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

// checkFileValues checks, for every number, size, duration and boolean
// setting of the command: a config file value the flag does not take is
// refused saying what the flag takes, in words ("is not an integer", "is
// not a size such as 64MiB"), never the flag's type name ("is not a
// int"); a number not written in decimal is refused, in the file as
// given to the flag; and a negative value of a flag marked unbounded is
// printed by --print-config as given (-1s, not -1ns), durations without
// the zero units Go adds (24h, not 24h0m0s).
func (u commandUnderTest[C]) checkFileValues(t *testing.T) {
	u.command(u.defaults()).Flags().VisitAll(func(f *pflag.Flag) {
		typ := f.Value.Type()
		if !fileKey(f) || !slices.Contains([]string{"int", "float64", "duration", "bytes", "bool"}, typ) {
			return
		}
		row := u.rows[f.Name]
		t.Run(f.Name, func(t *testing.T) {
			_, _, err := u.run(t, f.Name+": lots\n", row.with...)
			if err == nil || !strings.Contains(err.Error(), `key `+f.Name+`: "lots" is not `+settings.Kind(f)) || regexp.MustCompile(`is not an? (int|float64|bytes)\b`).MatchString(err.Error()) {
				t.Errorf("%s: lots: got %v, want it refused as not %s", f.Name, err, settings.Kind(f))
			}
			if typ == "int" || typ == "float64" {
				for _, args := range [][]string{{"--" + f.Name + "=0x10"}} {
					if _, _, err := u.run(t, "", append(slices.Clone(row.with), args...)...); err == nil || !strings.Contains(err.Error(), "decimal") {
						t.Errorf("%s: got %v, want it refused as not decimal", args, err)
					}
				}
			}
			if _, unbounded := settings.NegativeMeaning(f); unbounded {
				given := map[string]string{"int": "-1", "float64": "-1", "duration": `"-90m"`, "bytes": `"-1"`}[typ]
				want := map[string]string{"int": "-1", "float64": "-1", "duration": `"-1h30m"`, "bytes": `"-1"`}[typ]
				_, out, err := u.run(t, f.Name+": "+given+"\n", row.with...)
				if err != nil {
					t.Fatalf("%s: %s: %v", f.Name, given, err)
				}
				if line := f.Name + ": " + want + "  # from "; !strings.Contains(out, "\n"+line) {
					t.Errorf("--print-config of %s: %s lacks %q:\n%s", f.Name, given, line, out)
				}
			}
		})
	})
	_, out, err := u.run(t, "", u.rows["id"].with...)
	if err != nil {
		t.Fatal(err)
	}
	if zeros := regexp.MustCompile(`(?m)^[a-z-]+: "-?[0-9.hms]*(h0m|m0s)"`).FindAllString(out, -1); len(zeros) > 0 {
		t.Errorf("--print-config writes durations with zero units: %q", zeros)
	}
}

// TestConfigFileValues: see checkFileValues.
func TestConfigFileValues(t *testing.T) {
	t.Run("orchestrator", orchestratorUnderTest().checkFileValues)
	t.Run("dev", devUnderTest().checkFileValues)
	t.Run("worker", workerUnderTest().checkFileValues)
}

// TestStrayVariables: a JOBFLEET_* variable that no setting of the
// command reads (a misspelt one, one of another command) is reported, in
// one warning line at start and in --print-config, with the nearest
// variable the command reads; the client commands' variables and those a
// worker gives its shell jobs are not, as are the command's own.
func TestStrayVariables(t *testing.T) {
	// Only the variables set here: the caller's JOBFLEET_* variables (CI
	// sets some for the tests) would be reported too.
	for _, kv := range os.Environ() {
		if name, _, _ := strings.Cut(kv, "="); strings.HasPrefix(name, "JOBFLEET_") {
			t.Setenv(name, "") // restored after the test
			os.Unsetenv(name)
		}
	}
	for k, v := range map[string]string{"JOBFLEET_HISTROY_MAX_RUNS": "5", "JOBFLEET_CONCURRENCY": "3", "JOBFLEET_SERVER": "http://x:1", "JOBFLEET_TOKEN": "t",
		"JOBFLEET_CONTEXT": "dev", "JOBFLEET_REQUEST_TIMEOUT": "3s", "JOBFLEET_RUN_ID": "r1", "JOBFLEET_JOB_ID": "j", "JOBFLEET_LEASE_TTL": "7s"} {
		t.Setenv(k, v)
	}
	_, out, err := orchestratorUnderTest().run(t, "")
	if err != nil {
		t.Fatal(err)
	}
	var comments []string
	for line := range strings.Lines(out) {
		if strings.HasPrefix(line, "# JOBFLEET_") {
			comments = append(comments, strings.TrimSpace(line))
		}
	}
	want := []string{
		"# JOBFLEET_CONCURRENCY: a setting of jobfleet bench items, bench limits, bench steps, worker, not of this command; ignored",
		"# JOBFLEET_HISTROY_MAX_RUNS: matches no setting of this command (the nearest: JOBFLEET_HISTORY_MAX_RUNS); ignored",
	}
	if !slices.Equal(comments, want) {
		t.Errorf("--print-config reports the variables %q, want %q", comments, want)
	}

	core, logs := observer.New(zapcore.DebugLevel)
	warnStrayVariables(orchestratorCommand(defaultOrchestratorOptions()), os.Environ(), zap.New(core))
	entries := logs.AllUntimed()
	if len(entries) != 2 {
		t.Fatalf("logged %v, want two warnings", entries)
	}
	if e := entries[1]; e.Level != zapcore.WarnLevel || e.ContextMap()["variable"] != "JOBFLEET_HISTROY_MAX_RUNS" || e.ContextMap()["nearest"] != "JOBFLEET_HISTORY_MAX_RUNS" {
		t.Errorf("logged %+v, want a warning naming JOBFLEET_HISTROY_MAX_RUNS and JOBFLEET_HISTORY_MAX_RUNS", e)
	}
}
