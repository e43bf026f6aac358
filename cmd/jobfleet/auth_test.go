package main

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jobfleet/jobfleet/api"

	"github.com/spf13/cobra"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/jobfleet/jobfleet/auth"
)

// recordingAPI answers GET /v1/cluster/members and records the
// Authorization header of each request.
type recordingAPI struct {
	srv  *httptest.Server
	mu   sync.Mutex
	auth []string
}

func newRecordingAPI(t *testing.T) *recordingAPI {
	r := &recordingAPI{}
	r.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		r.mu.Lock()
		r.auth = append(r.auth, req.Header.Get("Authorization"))
		r.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		w.Write([]byte(`{"revision":1,"members":[]}`))
	}))
	t.Cleanup(r.srv.Close)
	return r
}

// last returns the Authorization header of the latest request, and
// forgets the requests.
func (r *recordingAPI) last() (string, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.auth) == 0 {
		return "", false
	}
	a := r.auth[len(r.auth)-1]
	r.auth = nil
	return a, true
}

// cli runs jobfleet args in process and returns its output and error.
func cli(t *testing.T, args ...string) (string, error) {
	t.Helper()
	c := &cliEnv{t: t}
	return c.runCmd("", args...)
}

func TestContextsAndCredentialPrecedence(t *testing.T) {
	t.Setenv("XDG_CONFIG_HOME", t.TempDir())
	a, b := newRecordingAPI(t), newRecordingAPI(t)
	tokenFile := writeFile(t, "tok", "tok-from-file\n")
	if out, err := cli(t, "context", "set", "ctx-a", "--server", a.srv.URL, "--token", "tok-a"); err != nil {
		t.Fatalf("context set: %v %s", err, out)
	}
	if out, err := cli(t, "context", "set", "ctx-b", "--server", b.srv.URL, "--token-file", tokenFile); err != nil {
		t.Fatalf("context set: %v %s", err, out)
	}
	// The first context made is current; the file is private.
	path := filepath.Join(os.Getenv("XDG_CONFIG_HOME"), "jobfleet", "config.json")
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var cfg cliConfig
	if err := json.Unmarshal(raw, &cfg); err != nil || cfg.CurrentContext != "ctx-a" || cfg.Contexts["ctx-b"].TokenFile != tokenFile || cfg.Contexts["ctx-a"].Token != "tok-a" {
		t.Fatalf("config %s (%v)", raw, err)
	}
	for p, want := range map[string]os.FileMode{path: 0o600, filepath.Dir(path): 0o700} {
		if fi, err := os.Stat(p); err != nil || fi.Mode().Perm() != want {
			t.Errorf("%s: mode %v (%v), want %v", p, fi.Mode().Perm(), err, want)
		}
	}

	tests := []struct {
		name string
		env  map[string]string
		args []string
		api  *recordingAPI
		want string
	}{
		{"current context", nil, nil, a, "Bearer tok-a"},
		{"--token beats the context", nil, []string{"--token", "tok-flag"}, a, "Bearer tok-flag"},
		{"JOBFLEET_TOKEN beats the context", map[string]string{"JOBFLEET_TOKEN": "tok-env"}, nil, a, "Bearer tok-env"},
		{"--token beats JOBFLEET_TOKEN", map[string]string{"JOBFLEET_TOKEN": "tok-env"}, []string{"--token", "tok-flag"}, a, "Bearer tok-flag"},
		{"--token-file beats JOBFLEET_TOKEN", map[string]string{"JOBFLEET_TOKEN": "tok-env"}, []string{"--token-file", tokenFile}, a, "Bearer tok-from-file"},
		{"--context", nil, []string{"--context", "ctx-b"}, b, "Bearer tok-from-file"},
		{"JOBFLEET_CONTEXT", map[string]string{"JOBFLEET_CONTEXT": "ctx-b"}, nil, b, "Bearer tok-from-file"},
		{"--context beats JOBFLEET_CONTEXT", map[string]string{"JOBFLEET_CONTEXT": "ctx-b"}, []string{"--context", "ctx-a"}, a, "Bearer tok-a"},
		{"--server beats the context's server, with its token", nil, []string{"--server", b.srv.URL}, b, "Bearer tok-a"},
		{"JOBFLEET_SERVER beats the context", map[string]string{"JOBFLEET_SERVER": b.srv.URL}, []string{"--token", "t"}, b, "Bearer t"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for k, v := range tt.env {
				t.Setenv(k, v)
			}
			if out, err := cli(t, append([]string{"cluster", "members"}, tt.args...)...); err != nil {
				t.Fatalf("%v %s", err, out)
			}
			got, ok := tt.api.last()
			if !ok || got != tt.want {
				t.Fatalf("server got Authorization %q (asked: %v), want %q", got, ok, tt.want)
			}
		})
	}
	if _, err := cli(t, "cluster", "members", "--context", "nope"); err == nil || !strings.Contains(err.Error(), `no context "nope"`) {
		t.Errorf("unknown context: %v", err)
	}
	if _, err := cli(t, "cluster", "members", "--token", "x", "--token-file", tokenFile); err == nil || !strings.Contains(err.Error(), "not both") {
		t.Errorf("--token and --token-file: %v", err)
	}

	// ls marks the current context and never prints a token.
	out, err := cli(t, "context", "ls")
	if err != nil || !strings.Contains(out, "*        ctx-a") || strings.Contains(out, "tok-a") || !strings.Contains(out, "file "+tokenFile) {
		t.Errorf("context ls: %v\n%s", err, out)
	}
	if _, err := cli(t, "context", "use", "ctx-b"); err != nil {
		t.Fatal(err)
	}
	cli(t, "cluster", "members")
	if got, _ := b.last(); got != "Bearer tok-from-file" {
		t.Errorf("after use ctx-b: %q", got)
	}
	// context set stores only flags given on its command line.
	t.Setenv("JOBFLEET_TOKEN", "must-not-be-stored")
	if _, err := cli(t, "context", "set", "ctx-b", "--server", a.srv.URL); err != nil {
		t.Fatal(err)
	}
	if raw, _ := os.ReadFile(path); strings.Contains(string(raw), "must-not-be-stored") {
		t.Errorf("context set stored the environment's token: %s", raw)
	}
	if _, err := cli(t, "context", "rm", "ctx-b"); err != nil {
		t.Fatal(err)
	}
	if raw, _ := os.ReadFile(path); strings.Contains(string(raw), "ctx-b") || !strings.Contains(string(raw), `"current_context": ""`) {
		t.Errorf("after rm of the current context: %s", raw)
	}
	if _, err := cli(t, "context", "use", "ctx-b"); err == nil {
		t.Error("use of a removed context succeeded")
	}
	if _, err := cli(t, "context", "set", "bad/name", "--server", a.srv.URL); err == nil {
		t.Error("a context name with '/' was accepted")
	}
}

// TestContextShow checks what scripts read from a context: --field
// server and token print the value alone (the token from the context's
// file, as jobfleet dev writes it), the plain form never prints a token,
// and unknown contexts and fields are refused.
func TestContextShow(t *testing.T) {
	t.Setenv("XDG_CONFIG_HOME", t.TempDir())
	tokenFile := writeFile(t, "tok", "tok-from-file\n")
	if _, err := cli(t, "context", "show"); err == nil || !strings.Contains(err.Error(), "no current context") {
		t.Errorf("context show without contexts: %v", err)
	}
	if out, err := cli(t, "context", "set", "dev", "--server", "http://127.0.0.1:8080", "--token-file", tokenFile); err != nil {
		t.Fatalf("context set: %v %s", err, out)
	}
	if out, err := cli(t, "context", "set", "prod", "--server", "https://jobfleet.example:8443", "--token", "tok-inline", "--ca", "/etc/ca.pem"); err != nil {
		t.Fatalf("context set: %v %s", err, out)
	}
	// Variables of client flags with the same names change nothing here.
	t.Setenv("JOBFLEET_SERVER", "http://elsewhere:1")
	t.Setenv("JOBFLEET_TOKEN", "tok-env")
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"--field", "server"}, "http://127.0.0.1:8080\n"},
		{[]string{"--field", "token"}, "tok-from-file\n"},
		{[]string{"prod", "--field", "server"}, "https://jobfleet.example:8443\n"},
		{[]string{"prod", "--field", "token"}, "tok-inline\n"},
	} {
		out, err := cli(t, append([]string{"context", "show"}, tt.args...)...)
		if err != nil || out != tt.want {
			t.Errorf("context show %v: got %q (%v), want %q", tt.args, out, err, tt.want)
		}
	}
	out, err := cli(t, "context", "show", "prod")
	if err != nil || strings.Contains(out, "tok-inline") || !strings.Contains(out, "https://jobfleet.example:8443") || !strings.Contains(out, "/etc/ca.pem") {
		t.Errorf("context show prod: %v\n%s", err, out)
	}
	out, err = cli(t, "context", "show")
	if err != nil || !strings.Contains(out, "dev (current)") || !strings.Contains(out, "token file "+tokenFile) || strings.Contains(out, "tok-from-file") {
		t.Errorf("context show: %v\n%s", err, out)
	}
	if _, err := cli(t, "context", "show", "nope"); err == nil || !strings.Contains(err.Error(), `no context "nope"`) {
		t.Errorf("context show nope: %v", err)
	}
	if _, err := cli(t, "context", "show", "--field", "password"); err == nil || !strings.Contains(err.Error(), "--field") {
		t.Errorf("context show --field password: %v", err)
	}
}

func TestTokenCommands(t *testing.T) {
	t.Setenv("XDG_CONFIG_HOME", t.TempDir())
	c := newCLIEnv(t)
	tok := func(args ...string) (string, error) {
		return c.runCmd("", append([]string{"token", "--server", c.url, "--token", c.token}, args...)...)
	}
	out, err := tok("create", "--role", "operator", "--prefix", "team/", "--ttl", "1h", "--description", "team CI")
	if err != nil {
		t.Fatalf("token create: %v", err)
	}
	secret := strings.TrimSpace(out)
	id, _, err := auth.ParseToken(secret)
	if err != nil || strings.Count(out, "\n") != 1 {
		t.Fatalf("token create printed %q (stdout holds only the token): %v", out, err)
	}
	// The new token works, within its scope.
	if out, err := c.runCmd("", "job", "--server", c.url, "--token", secret, "create", "--id", "team/x", "--http-url", "http://127.0.0.1:9/"); err != nil {
		t.Fatalf("job create with the new token: %v %s", err, out)
	}
	if _, err := c.runCmd("", "job", "--server", c.url, "--token", secret, "create", "--id", "other/x", "--http-url", "http://127.0.0.1:9/"); err == nil || !strings.Contains(err.Error(), "403") {
		t.Fatalf("job create outside the scope: %v", err)
	}

	out, err = tok("create", "--role", "viewer", "-o", "json")
	if err != nil {
		t.Fatal(err)
	}
	var created api.Created
	if err := json.Unmarshal([]byte(out), &created); err != nil || created.Role != api.RoleViewer || created.Secret == "" {
		t.Fatalf("token create -o json: %s (%v)", out, err)
	}
	// A viewer cannot make credentials.
	if _, err := c.runCmd("", "token", "--server", c.url, "--token", created.Secret, "create", "--role", "admin"); err == nil || !strings.Contains(err.Error(), "403") {
		t.Fatalf("viewer creating a token: %v", err)
	}

	out, err = tok("ls")
	if err != nil || !strings.Contains(out, id) || !strings.Contains(out, "team/") || !strings.Contains(out, "team CI") || strings.Contains(out, secret[len(secret)-43:]) {
		t.Fatalf("token ls: %v\n%s", err, out)
	}
	if _, err := tok("revoke", id); err != nil {
		t.Fatal(err)
	}
	if _, err := c.runCmd("", "job", "--server", c.url, "--token", secret, "ls"); err == nil || !strings.Contains(err.Error(), "401") || !strings.Contains(err.Error(), "token sent was refused") {
		t.Fatalf("revoked token: %v (want 401 with a hint saying the token sent was refused)", err)
	}
	if _, err := c.runCmd("", "job", "--server", c.url, "ls"); err == nil || !strings.Contains(err.Error(), "401") || !strings.Contains(err.Error(), "give a credential") {
		t.Fatalf("no token: %v (want 401 with a hint on how to give a credential)", err)
	}
	if _, err := tok("revoke", id); err == nil || !strings.Contains(err.Error(), "404") {
		t.Fatalf("revoking twice: %v", err)
	}

	before := keyCount(t, c.client, c.ns)
	if _, err := tok("create", "--role", "root"); err == nil || !strings.Contains(err.Error(), "role") {
		t.Fatalf("bad role: %v", err)
	}
	if _, err := tok("create", "--role", "admin", "--prefix", "x/"); err == nil || !strings.Contains(err.Error(), "prefix") {
		t.Fatalf("scoped admin: %v", err)
	}
	if after := keyCount(t, c.client, c.ns); after != before {
		t.Fatalf("refused creates stored %d keys", after-before)
	}

	// Recovery: straight into etcd, no credential needed.
	out, err = c.runCmd("", "token", "create", "--role", "admin", "--etcd-endpoints", etcd.Endpoints()[0], "--namespace", c.ns)
	if err != nil {
		t.Fatalf("token create --etcd-endpoints: %v", err)
	}
	recovered := strings.TrimSpace(out)
	poll(t, 5*time.Second, "the recovered admin token accepted", func() (bool, string) {
		_, err := c.runCmd("", "token", "--server", c.url, "--token", recovered, "ls")
		return err == nil, "not yet"
	})
}

func keyCount(t *testing.T, c *clientv3.Client, ns string) int64 {
	t.Helper()
	resp, err := c.Get(context.Background(), ns, clientv3.WithPrefix(), clientv3.WithCountOnly())
	if err != nil {
		t.Fatal(err)
	}
	return resp.Count
}

// TestServerDefault: without --server and without a context the client
// commands talk to defaultServer, and the help says so once, not with a
// second "(default ...)" that contradicts "default: the context's".
func TestServerDefault(t *testing.T) {
	t.Setenv("XDG_CONFIG_HOME", t.TempDir())
	help, err := cli(t, "job", "ls", "--help")
	if err != nil {
		t.Fatal(err)
	}
	line := ""
	for l := range strings.Lines(help) {
		if strings.Contains(l, "--server string") {
			line = strings.TrimSpace(l)
		}
	}
	if !strings.Contains(line, "default: the context's, else "+defaultServer+")") || strings.Contains(line, `(default "`) {
		t.Errorf("--server's help: %q, want one default, the context's, else %s", line, defaultServer)
	}
	o := &clientOptions{}
	o.register(&cobra.Command{Use: "x"})
	if err := o.prepare(); err != nil {
		t.Fatal(err)
	}
	if o.server != defaultServer {
		t.Errorf("no --server, no context: server %q, want %q", o.server, defaultServer)
	}
}
