package walkthrough

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/tls"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/coreos/go-systemd/v22/unit"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/goleak"
	"go.uber.org/zap"

	"github.com/jobfleet/jobfleet/internal/etcdserver"
	"github.com/jobfleet/jobfleet/internal/testkit/proctest"
	"github.com/jobfleet/jobfleet/internal/testkit/tlstest"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

const (
	// repo is the repository's root, from this package's directory.
	repo = "../../.."
	// buildVersion is the version the walkthrough builds with.
	buildVersion = "v0.0.0-walkthrough"
	// installed is where the docs install the binary.
	installed = "/usr/local/bin/jobfleet"
)

// startProc starts path with args, env and working directory dir (""
// for the test's); its output, stdout and stderr together, is logged (the
// last 60 lines) if the test failed.
func startProc(t *testing.T, name, path string, args, env []string, dir string) *proctest.Process {
	t.Helper()
	return proctest.Start(t, name, path, args, proctest.Options{Env: env, Dir: dir, Combined: true, LogLines: 60})
}

// poll calls cond until it holds or timeout passes (then the test fails
// with cond's last reason), and returns the time it took.
func poll(t *testing.T, timeout time.Duration, what string, cond func() (bool, string)) time.Duration {
	t.Helper()
	return proctest.Poll(t, timeout, 100*time.Millisecond, what, cond)
}

// freeAddr returns a free loopback HOST:PORT.
func freeAddr(t *testing.T) string {
	t.Helper()
	a, err := etcdserver.FreeAddr()
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// host is one machine of the walkthrough, with a file system of its own
// under root: what the docs install in /etc/jobfleet goes to
// root/etc/jobfleet.
type host struct {
	name string
	root string
}

func newHost(t *testing.T, name string) host {
	t.Helper()
	return host{name: name, root: filepath.Join(t.TempDir(), name)}
}

// path returns where absolute path p of the machine is.
func (h host) path(p string) string { return filepath.Join(h.root, p) }

// install writes data to the machine's path p with mode, as
// `install -m MODE` does.
func (h host) install(t *testing.T, p string, data []byte, mode os.FileMode) {
	t.Helper()
	full := h.path(p)
	if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(full, data, mode); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(full, mode); err != nil {
		t.Fatal(err)
	}
}

// unitFile is what a systemd unit file says about how its service runs.
type unitFile struct {
	name        string
	execStart   []string
	environment map[string]string // Environment=
	configFile  string            // ExecStart's --config=
	credentials map[string]string // LoadCredential= NAME -> source path
	killSignal  syscall.Signal
	stopTimeout time.Duration
	workDir     string
	stateDir    string
}

// readUnit reads deploy/systemd/name the way systemd would, for the
// directives the walkthrough emulates; it fails on any other kind of
// ExecStart or Environment= than plain words.
func readUnit(t *testing.T, name string) unitFile {
	t.Helper()
	f, err := os.Open(filepath.Join(repo, "deploy", "systemd", name))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	opts, err := unit.DeserializeOptions(f)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	u := unitFile{name: name, environment: map[string]string{}, credentials: map[string]string{}, killSignal: syscall.SIGTERM, stopTimeout: 90 * time.Second}
	for _, o := range opts {
		if o.Section != "Service" {
			continue
		}
		switch o.Name {
		case "ExecStart":
			u.execStart = strings.Fields(o.Value)
			for _, w := range u.execStart {
				if path, ok := strings.CutPrefix(w, "--config="); ok {
					u.configFile = path
				}
			}
		case "Environment":
			k, v, _ := strings.Cut(o.Value, "=")
			u.environment[k] = v
		case "EnvironmentFile":
			t.Fatalf("%s: EnvironmentFile=%s: the walkthrough reads the settings from the config file", name, o.Value)
		case "LoadCredential":
			n, src, _ := strings.Cut(o.Value, ":")
			u.credentials[n] = src
		case "KillSignal":
			sig, ok := map[string]syscall.Signal{"SIGTERM": syscall.SIGTERM, "SIGINT": syscall.SIGINT}[o.Value]
			if !ok {
				t.Fatalf("%s: KillSignal=%s", name, o.Value)
			}
			u.killSignal = sig
		case "TimeoutStopSec":
			if u.stopTimeout, err = time.ParseDuration(o.Value); err != nil {
				t.Fatalf("%s: TimeoutStopSec=%s: %v", name, o.Value, err)
			}
		case "WorkingDirectory":
			u.workDir = o.Value
		case "StateDirectory":
			u.stateDir = o.Value
		}
	}
	if len(u.execStart) == 0 || u.execStart[0] != installed {
		t.Fatalf("%s: ExecStart %q does not run %s", name, u.execStart, installed)
	}
	return u
}

// settingLine matches a setting of a config file, set or commented out
// ("#key: ..."), written on one line.
var settingLine = regexp.MustCompile(`^(#?)([a-z0-9-]+):\s*(.*)$`)

// installConfig installs the unit's config file (--config) on h: the
// file from deploy/systemd with the settings in set replaced (each must
// be in the file, set or commented out: the walkthrough changes only what
// the file offers) and the paths under /etc moved to h's root. It
// returns the settings the installed file sets.
func installConfig(t *testing.T, h host, u unitFile, set map[string]string) map[string]string {
	t.Helper()
	if u.configFile == "" {
		t.Fatalf("%s: ExecStart gives no --config", u.name)
	}
	data, err := os.ReadFile(filepath.Join(repo, "deploy", "systemd", filepath.Base(u.configFile)))
	if err != nil {
		t.Fatal(err)
	}
	settings := map[string]string{}
	offered := map[string]bool{}
	var out strings.Builder
	for line := range strings.Lines(string(data)) {
		m := settingLine.FindStringSubmatch(strings.TrimRight(line, "\n"))
		if m == nil {
			out.WriteString(line)
			continue
		}
		key, value := m[2], m[3]
		offered[key] = true
		if v, ok := set[key]; ok {
			value = v
		} else if m[1] == "#" {
			out.WriteString(line)
			continue
		}
		if strings.HasPrefix(value, "/etc/") {
			value = h.path(value)
		}
		settings[key] = value
		fmt.Fprintf(&out, "%s: %s\n", key, value)
	}
	for key := range set {
		if !offered[key] {
			t.Fatalf("%s: the walkthrough sets %s, which %s does not offer", u.name, key, u.configFile)
		}
	}
	h.install(t, u.configFile, []byte(out.String()), 0o644)
	return settings
}

// service is a unit running on a host, started and stopped the way
// systemd does it for the directives the unit uses.
type service struct {
	h        host
	u        unitFile
	settings map[string]string // of the installed config file
	proc     *proctest.Process
	runs     int
}

// start starts the service: the credentials copied to a private
// directory (mode 0400), the environment of Environment= (with %d, the
// credentials directory), ExecStart with the binary and the config file
// installed on the host.
func (s *service) start(t *testing.T) {
	t.Helper()
	s.runs++
	creds := filepath.Join(s.h.root, "run", "credentials", fmt.Sprintf("%s-%d", s.u.name, s.runs))
	if err := os.MkdirAll(creds, 0o700); err != nil {
		t.Fatal(err)
	}
	for name, src := range s.u.credentials {
		data, err := os.ReadFile(s.h.path(src))
		if err != nil {
			t.Fatalf("%s: LoadCredential=%s:%s: %v", s.u.name, name, src, err)
		}
		if err := os.WriteFile(filepath.Join(creds, name), data, 0o400); err != nil {
			t.Fatal(err)
		}
	}
	env := []string{"PATH=" + os.Getenv("PATH"), "HOME=" + s.h.path("/nonexistent"), "CREDENTIALS_DIRECTORY=" + creds}
	for k, v := range s.u.environment {
		env = append(env, k+"="+strings.ReplaceAll(v, "%d", creds))
	}
	dir := ""
	if s.u.workDir != "" {
		dir = s.h.path(s.u.workDir)
		if err := os.MkdirAll(dir, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	var args []string
	for _, a := range s.u.execStart[1:] {
		if path, ok := strings.CutPrefix(a, "--config="); ok {
			a = "--config=" + s.h.path(path)
		}
		args = append(args, a)
	}
	s.proc = startProc(t, s.h.name+" "+s.u.name, s.h.path(installed), args, env, dir)
}

// stop stops the service as `systemctl stop` does: KillSignal, then
// TimeoutStopSec to exit (the test fails past it); it returns the exit
// code.
func (s *service) stop(t *testing.T) int {
	t.Helper()
	return s.proc.Stop(t, s.u.killSignal, s.u.stopTimeout)
}

// etcdMember is one member of a real etcd cluster.
type etcdMember struct {
	name, client, peer string // addresses
	dataDir            string
	proc               *proctest.Process
}

// etcdFiles are the certificate files of the etcd cluster.
type etcdFiles struct {
	ca, cert, key string // of the members (server and peer)
}

// startEtcd starts members as docs/deploy.md shows (client and peer
// certificates required, the quota), as a new cluster named token.
func startEtcd(t *testing.T, bin string, members []*etcdMember, f etcdFiles, token string) {
	t.Helper()
	var cluster []string
	for _, m := range members {
		cluster = append(cluster, m.name+"=https://"+m.peer)
	}
	for _, m := range members {
		args := []string{
			"--name=" + m.name, "--data-dir=" + m.dataDir,
			"--listen-client-urls=https://" + m.client, "--advertise-client-urls=https://" + m.client,
			"--listen-peer-urls=https://" + m.peer, "--initial-advertise-peer-urls=https://" + m.peer,
			"--initial-cluster=" + strings.Join(cluster, ","),
			"--initial-cluster-state=new", "--initial-cluster-token=" + token,
			"--client-cert-auth", "--trusted-ca-file=" + f.ca, "--cert-file=" + f.cert, "--key-file=" + f.key,
			"--peer-client-cert-auth", "--peer-trusted-ca-file=" + f.ca, "--peer-cert-file=" + f.cert, "--peer-key-file=" + f.key,
			"--quota-backend-bytes=8589934592",
		}
		m.proc = startProc(t, "etcd "+m.name, bin, args, append(os.Environ(), "ETCD_UNSUPPORTED_ARCH="), "")
	}
}

// endpoints returns the client URLs of members, comma separated.
func endpoints(members []*etcdMember) string {
	var urls []string
	for _, m := range members {
		urls = append(urls, "https://"+m.client)
	}
	return strings.Join(urls, ",")
}

// waitEtcd waits until every member answers a client with the client
// certificate.
func waitEtcd(t *testing.T, members []*etcdMember, tc *tls.Config) {
	t.Helper()
	for _, m := range members {
		c, err := clientv3.New(clientv3.Config{Endpoints: []string{"https://" + m.client}, TLS: tc, DialTimeout: 2 * time.Second, Logger: zap.NewNop()})
		if err != nil {
			t.Fatal(err)
		}
		poll(t, 60*time.Second, "etcd member "+m.name+" serving", func() (bool, string) {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			defer cancel()
			_, err := c.Get(ctx, "health")
			return err == nil, fmt.Sprint(err)
		})
		c.Close()
	}
}

// api is a client of the fleet's API over TLS with the admin credential.
type api struct {
	client *http.Client
	token  string
}

func (a api) get(u string, out any) (int, error) {
	req, err := http.NewRequest(http.MethodGet, u, nil)
	if err != nil {
		return 0, err
	}
	if a.token != "" {
		req.Header.Set("Authorization", "Bearer "+a.token)
	}
	resp, err := a.client.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err == nil && resp.StatusCode != http.StatusOK {
		err = fmt.Errorf("%s", bytes.TrimSpace(body))
	}
	if err != nil || out == nil {
		return resp.StatusCode, err
	}
	return resp.StatusCode, json.Unmarshal(body, out)
}

// run is the part of a run document the walkthrough reads.
type run struct {
	RunID       string    `json:"run_id"`
	ScheduledAt time.Time `json:"scheduled_at"`
	FiredAt     time.Time `json:"fired_at"`
	Status      string    `json:"status"`
}

// flags lists the binary's commands and their flags (`jobfleet flags`).
func flags(t *testing.T, bin string) map[string]map[string]bool {
	t.Helper()
	out, err := exec.Command(bin, "flags").Output()
	if err != nil {
		t.Fatalf("jobfleet flags: %v", err)
	}
	var list []struct {
		Command string `json:"command"`
		Flags   []struct {
			Name string `json:"name"`
		} `json:"flags"`
	}
	if err := json.Unmarshal(out, &list); err != nil {
		t.Fatal(err)
	}
	m := map[string]map[string]bool{}
	for _, c := range list {
		m[c.Command] = map[string]bool{}
		for _, f := range c.Flags {
			m[c.Command][f.Name] = true
		}
	}
	return m
}

func TestWalkthrough(t *testing.T) {
	etcdBin, err := exec.LookPath("etcd")
	if err != nil {
		t.Skip("no etcd binary on PATH (Debian: apt-get install etcd-server etcd-client; .ci/run does): the deployment walkthrough needs a real etcd cluster")
	}
	etcdctl, err := exec.LookPath("etcdctl")
	if err != nil {
		t.Fatal("etcd is installed but etcdctl is not (Debian: etcd-client): the walkthrough backs etcd up with it")
	}
	restoreTool := etcdctl // etcd v3.4; from v3.5 on, etcdutl restores
	if p, err := exec.LookPath("etcdutl"); err == nil {
		restoreTool = p
	}
	started := time.Now()

	// Certificates (docs/tls.md makes them with openssl; these are the
	// same kinds): etcd's members (server and peer), jobfleet's client
	// certificate for etcd, the API's certificate.
	ca := tlstest.NewCA(t, "walkthrough CA")
	pki := t.TempDir()
	file := func(name string, data []byte) string {
		p := filepath.Join(pki, name)
		tlstest.WriteFile(t, p, data)
		return p
	}
	caPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: ca.Cert.Raw})
	caFile := file("ca.crt", caPEM)
	etcdPair := ca.Peer(t, "127.0.0.1", "localhost")
	etcdCerts := etcdFiles{ca: caFile, cert: file("etcd.crt", etcdPair.CertPEM), key: file("etcd.key", etcdPair.KeyPEM)}
	etcdClient := ca.Client(t, "jobfleet")
	apiPair := ca.Server(t, "127.0.0.1", "localhost")
	adminSecret := make([]byte, 32)
	if _, err := rand.Read(adminSecret); err != nil {
		t.Fatal(err)
	}
	admin := hex.EncodeToString(adminSecret) // openssl rand -hex 32
	adminFile := file("admin.token", []byte(admin+"\n"))
	testTLS := &tls.Config{RootCAs: ca.Pool(), Certificates: []tls.Certificate{etcdClient.TLS(t)}}

	// The etcd cluster.
	members := make([]*etcdMember, 3)
	for i := range members {
		members[i] = &etcdMember{name: fmt.Sprintf("etcd-%d", i+1), client: freeAddr(t), peer: freeAddr(t), dataDir: filepath.Join(t.TempDir(), "etcd")}
	}
	startEtcd(t, etcdBin, members, etcdCerts, "jobfleet-etcd")
	waitEtcd(t, members, testTLS)
	t.Logf("etcd: 3 members with client and peer certificates ready %v after start", time.Since(started).Round(time.Millisecond))

	// 1. Build the binary and install it on every machine.
	build := t.TempDir()
	bin := filepath.Join(build, "jobfleet")
	cmd := exec.Command("sh", filepath.Join(repo, "deploy", "build.sh"))
	cmd.Env = append(os.Environ(), "VERSION="+buildVersion, "OUT="+bin)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("sh deploy/build.sh: %v\n%s", err, out)
	}
	binData, err := os.ReadFile(bin)
	if err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(bin, "version").Output(); err != nil || !strings.Contains(string(out), buildVersion) {
		t.Fatalf("jobfleet version: %v %s", err, out)
	}
	have := flags(t, bin)
	withAuth := have["token create"] != nil && have["orchestrator"]["admin-token-file"]
	if !withAuth {
		t.Logf("this build has no credentials yet (jobfleet token create, --admin-token-file): the walkthrough runs without them")
	}
	a := api{client: &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{DisableKeepAlives: true, TLSClientConfig: &tls.Config{RootCAs: ca.Pool()}}}}
	if withAuth {
		a.token = admin
	}
	// cli runs a client command from the operator's machine with the
	// admin credential.
	cli := func(args ...string) string {
		t.Helper()
		if have[args[0]+" "+args[1]]["token-file"] && withAuth {
			args = append(args, "--token-file="+adminFile)
		}
		out, err := exec.Command(bin, args...).Output()
		if err != nil {
			var stderr []byte
			if ee, ok := err.(*exec.ExitError); ok {
				stderr = ee.Stderr
			}
			t.Fatalf("jobfleet %q: %v\n%s", args, err, stderr)
		}
		return string(out)
	}

	// 2.-3. Three orchestrator machines, each with its files installed as
	// the docs say, started through the unit file.
	orchUnit := readUnit(t, "jobfleet-orchestrator.service")
	var orchs []*service
	var apiURLs, metricsURLs []string
	for i := 1; i <= 3; i++ {
		h := newHost(t, fmt.Sprintf("node-%d", i))
		h.install(t, installed, binData, 0o755)
		h.install(t, "/etc/jobfleet/tls/etcd-ca.crt", caPEM, 0o644)
		h.install(t, "/etc/jobfleet/tls/etcd-client.crt", etcdClient.CertPEM, 0o644)
		h.install(t, "/etc/jobfleet/tls/api.crt", apiPair.CertPEM, 0o644)
		h.install(t, "/etc/jobfleet/tls/ca.crt", caPEM, 0o644)
		h.install(t, "/etc/jobfleet/tls/api.key", apiPair.KeyPEM, 0o600)
		h.install(t, "/etc/jobfleet/credentials/etcd-client.key", etcdClient.KeyPEM, 0o600)
		h.install(t, "/etc/jobfleet/credentials/admin.token", []byte(admin+"\n"), 0o600)
		listen, metrics := freeAddr(t), freeAddr(t)
		settings := installConfig(t, h, orchUnit, map[string]string{
			"id":             h.name,
			"listen":         listen,
			"advertise":      "https://" + listen,
			"metrics-listen": metrics,
			"etcd-endpoints": endpoints(members),
		})
		s := &service{h: h, u: orchUnit, settings: settings}
		s.start(t)
		orchs = append(orchs, s)
		apiURLs = append(apiURLs, "https://"+listen)
		metricsURLs = append(metricsURLs, "http://"+metrics)
	}
	waitReady := func(i int, timeout time.Duration) time.Duration {
		t.Helper()
		return poll(t, timeout, orchs[i].h.name+" ready", func() (bool, string) {
			if orchs[i].proc.Exited() {
				t.Fatalf("%s exited: %v", orchs[i].h.name, orchs[i].proc.Cmd.ProcessState)
			}
			code, err := a.get(apiURLs[i]+"/readyz", nil)
			if code == http.StatusOK {
				return true, ""
			}
			return false, fmt.Sprintf("GET /readyz: %d %v; %s", code, err, handoffs(a, apiURLs[i]))
		})
	}
	for i := range orchs {
		waitReady(i, 60*time.Second)
	}
	t.Logf("3 orchestrators ready over TLS %v after start", time.Since(started).Round(time.Millisecond))
	for i, u := range metricsURLs {
		resp, err := http.Get(u + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if want := `jobfleet_build_info{commit="`; !strings.Contains(string(body), want) || !strings.Contains(string(body), `version="`+buildVersion+`"`) {
			t.Errorf("%s: metrics lack jobfleet_build_info with version %s", orchs[i].h.name, buildVersion)
		}
	}
	if withAuth {
		if code, _ := (api{client: a.client}).get(apiURLs[0]+"/v1/jobs", nil); code != http.StatusUnauthorized {
			t.Errorf("GET /v1/jobs without a credential: %d, want 401", code)
		}
	}

	// 4. The workers' credential.
	workerToken := "no-credentials-in-this-build"
	if withAuth {
		workerToken = strings.TrimSpace(cli("token", "create", "--role=worker", "--description=workers", "--server="+apiURLs[0], "--ca="+caFile))
	}

	// 5. A worker machine.
	target := newTarget(t)
	workerUnit := readUnit(t, "jobfleet-worker.service")
	wh := newHost(t, "worker-1")
	wh.install(t, installed, binData, 0o755)
	wh.install(t, "/etc/jobfleet/tls/ca.crt", caPEM, 0o644)
	wh.install(t, "/etc/jobfleet/credentials/worker.token", []byte(workerToken+"\n"), 0o600)
	wsettings := installConfig(t, wh, workerUnit, map[string]string{
		"orchestrators":  strings.Join(apiURLs, ","),
		"metrics-listen": freeAddr(t),
		"http-allow":     target.addr,
	})
	worker := &service{h: wh, u: workerUnit, settings: wsettings}
	worker.start(t)

	// 6. Jobs: one every second (the rolling restart is checked on it)
	// and two more (the restore is checked on all three).
	jobs := []string{"every-second", "every-2s", "every-3s"}
	for i, id := range jobs {
		every := []string{"1s", "2s", "3s"}[i]
		cli("job", "create", "--id="+id, "--schedule=@every "+every, "--http-url=http://"+target.addr+"/"+id, "--server="+apiURLs[i], "--ca="+caFile)
	}
	runsOf := func(server, id string) []run {
		t.Helper()
		var reply struct {
			Runs []run `json:"runs"`
		}
		if code, err := a.get(server+"/v1/jobs/"+url.PathEscape(id)+"/runs?limit=500", &reply); err != nil || code != http.StatusOK {
			t.Fatalf("GET /v1/jobs/%s/runs: %d %v", id, code, err)
		}
		return reply.Runs
	}
	poll(t, 30*time.Second, "the worker running every-second's runs", func() (bool, string) {
		n := target.count("every-second")
		return n >= 3, fmt.Sprintf("%d requests", n)
	})

	// Upgrade: a rolling restart, one member at a time, the next once the
	// restarted one is ready.
	from := time.Now().Truncate(time.Second).Add(time.Second)
	time.Sleep(2 * time.Second) // fires before the restart, to compare
	for i, s := range orchs {
		stoppedAt := time.Now()
		if code := s.stop(t); code != 0 {
			t.Fatalf("%s exit code %d after systemctl stop (%v), want 0", s.h.name, code, s.u.killSignal)
		}
		stopTook := time.Since(stoppedAt)
		s.start(t)
		ready := waitReady(i, 60*time.Second)
		t.Logf("rolling restart: %s stopped in %v, ready again %v after its start", s.h.name, stopTook.Round(time.Millisecond), ready.Round(time.Millisecond))
	}
	time.Sleep(2 * time.Second) // fires after the restart, to compare
	until := time.Now().Truncate(time.Second).Add(-time.Second)

	// Every second of the window has exactly one run, fired on time (a
	// handoff takes well under a second; a member that crashed instead
	// would leave its partitions without owner for the lease TTL, and
	// their runs would be fired that late), and each succeeds.
	const onTime = 2 * time.Second
	var (
		missing []string
		maxLag  time.Duration
	)
	poll(t, 40*time.Second, "every run of every-second in the window succeeded", func() (bool, string) {
		missing = missing[:0]
		bySecond := map[time.Time]run{}
		for _, r := range runsOf(apiURLs[0], "every-second") {
			if _, dup := bySecond[r.ScheduledAt]; dup {
				t.Fatalf("two runs scheduled at %v", r.ScheduledAt)
			}
			bySecond[r.ScheduledAt] = r
		}
		notDone := 0
		for s := from; !s.After(until); s = s.Add(time.Second) {
			r, ok := bySecond[s.UTC()]
			if !ok {
				missing = append(missing, s.Format("15:04:05"))
				continue
			}
			if r.Status != "succeeded" {
				notDone++
			}
			lag := r.FiredAt.Sub(r.ScheduledAt)
			maxLag = max(maxLag, lag)
			if lag > onTime {
				t.Fatalf("rolling restart: the run scheduled at %s fired %v late (status %s): a fire missed its time", s.Format("15:04:05"), lag, r.Status)
			}
		}
		if len(missing) > 0 {
			t.Fatalf("rolling restart: no run for %d of the %d seconds from %s to %s: %v",
				len(missing), int(until.Sub(from)/time.Second)+1, from.Format("15:04:05"), until.Format("15:04:05"), missing)
		}
		return notDone == 0, fmt.Sprintf("%d runs not succeeded yet", notDone)
	})
	t.Logf("rolling restart of 3 members: every one of the %d seconds from %s to %s has one run, fired at most %v late, all succeeded",
		int(until.Sub(from)/time.Second)+1, from.Format("15:04:05"), until.Format("15:04:05"), maxLag.Round(time.Millisecond))

	// Backup: an etcd snapshot, as the docs take it.
	snapshot := filepath.Join(t.TempDir(), "jobfleet.db")
	save := exec.Command(etcdctl, "--endpoints=https://"+members[0].client,
		"--cacert="+caFile, "--cert="+file("etcd-client.crt", etcdClient.CertPEM), "--key="+file("etcd-client.key", etcdClient.KeyPEM),
		"snapshot", "save", snapshot)
	save.Env = append(os.Environ(), "ETCDCTL_API=3")
	if out, err := save.CombinedOutput(); err != nil {
		t.Fatalf("etcdctl snapshot save: %v\n%s", err, out)
	}

	// The disaster: the fleet stops and the etcd cluster is lost.
	for _, s := range orchs {
		if code := s.stop(t); code != 0 {
			t.Errorf("%s exit code %d after stop", s.h.name, code)
		}
	}
	for _, m := range members {
		m.proc.Stop(t, syscall.SIGTERM, 30*time.Second)
	}

	// Restore into a new cluster: new members, new addresses, new data
	// directories.
	restored := make([]*etcdMember, 3)
	var cluster []string
	for i := range restored {
		restored[i] = &etcdMember{name: fmt.Sprintf("etcd-%d", i+1), client: freeAddr(t), peer: freeAddr(t), dataDir: filepath.Join(t.TempDir(), "etcd")}
		cluster = append(cluster, restored[i].name+"=https://"+restored[i].peer)
	}
	for _, m := range restored {
		r := exec.Command(restoreTool, "snapshot", "restore", snapshot, "--name="+m.name, "--data-dir="+m.dataDir,
			"--initial-cluster="+strings.Join(cluster, ","), "--initial-advertise-peer-urls=https://"+m.peer,
			"--initial-cluster-token=jobfleet-etcd-restored")
		r.Env = append(os.Environ(), "ETCDCTL_API=3")
		if out, err := r.CombinedOutput(); err != nil {
			t.Fatalf("%s snapshot restore: %v\n%s", filepath.Base(restoreTool), err, out)
		}
	}
	restoredAt := time.Now()
	startEtcd(t, etcdBin, restored, etcdCerts, "jobfleet-etcd-restored")
	waitEtcd(t, restored, testTLS)
	for _, s := range orchs {
		// The docs: etcd-endpoints pointing at the new cluster.
		s.settings = installConfig(t, s.h, s.u, map[string]string{
			"id":             s.settings["id"],
			"listen":         s.settings["listen"],
			"advertise":      s.settings["advertise"],
			"metrics-listen": s.settings["metrics-listen"],
			"etcd-endpoints": endpoints(restored),
		})
		s.start(t)
	}
	for i := range orchs {
		waitReady(i, 60*time.Second)
	}
	t.Logf("restore: the fleet is ready on the restored etcd cluster %v after its start", time.Since(restoredAt).Round(time.Millisecond))

	// Every job of the snapshot is there and fires again.
	var list struct {
		Jobs []struct {
			ID string `json:"id"`
		} `json:"jobs"`
	}
	if code, err := a.get(apiURLs[1]+"/v1/jobs?limit=100", &list); err != nil || code != http.StatusOK {
		t.Fatalf("GET /v1/jobs: %d %v", code, err)
	}
	var ids []string
	for _, j := range list.Jobs {
		ids = append(ids, j.ID)
	}
	slices.Sort(ids)
	if want := slices.Sorted(slices.Values(jobs)); !slices.Equal(ids, want) {
		t.Fatalf("jobs after the restore: %v, want %v", ids, want)
	}
	for _, id := range jobs {
		poll(t, 30*time.Second, id+" fired after the restore", func() (bool, string) {
			for _, r := range runsOf(apiURLs[2], id) {
				if r.ScheduledAt.After(restoredAt) && r.Status == "succeeded" {
					return true, ""
				}
			}
			return false, "no succeeded run scheduled after the restore yet"
		})
	}
	t.Logf("restore: all %d jobs of the snapshot fire again on the restored cluster; walkthrough took %v", len(jobs), time.Since(started).Round(time.Second))

	if code := worker.stop(t); code != 0 {
		t.Errorf("worker exit code %d after stop", code)
	}
	for _, s := range orchs {
		s.stop(t)
	}
	for _, m := range restored {
		m.proc.Stop(t, syscall.SIGTERM, 30*time.Second)
	}
}

// target is the HTTP endpoint the walkthrough's jobs call.
type target struct {
	addr string
	mu   sync.Mutex
	hits map[string]int // requests by path
}

func newTarget(t *testing.T) *target {
	t.Helper()
	tg := &target{hits: map[string]int{}}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		tg.mu.Lock()
		tg.hits[strings.TrimPrefix(r.URL.Path, "/")]++
		tg.mu.Unlock()
	}))
	t.Cleanup(srv.Close)
	tg.addr = strings.TrimPrefix(srv.URL, "http://")
	return tg
}

func (tg *target) count(id string) int {
	tg.mu.Lock()
	defer tg.mu.Unlock()
	return tg.hits[id]
}

// handoffs summarises the partitions whose owner is not their target, as
// the member at server sees them (for failure messages).
func handoffs(a api, server string) string {
	var tbl struct {
		Assignments []struct {
			Partition int    `json:"partition"`
			Owner     string `json:"owner"`
			Target    string `json:"target"`
		} `json:"assignments"`
	}
	if code, err := a.get(server+"/v1/cluster/partitions", &tbl); err != nil || code != http.StatusOK {
		return fmt.Sprintf("partitions: %d %v", code, err)
	}
	moves := map[string][]int{}
	for _, as := range tbl.Assignments {
		if as.Owner != as.Target {
			k := fmt.Sprintf("owner %q target %q", as.Owner, as.Target)
			moves[k] = append(moves[k], as.Partition)
		}
	}
	return fmt.Sprintf("partitions not on their target: %v", moves)
}
