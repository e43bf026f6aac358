package main

// Tests of the jobfleet binary as separate processes sharing one embedded
// etcd: crash (SIGKILL), pause (SIGSTOP/SIGCONT), graceful stop (SIGTERM,
// drain), the dev quick start, and start-up errors.

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/jobfleet/jobfleet/api"
	"github.com/jobfleet/jobfleet/auth"
	"github.com/jobfleet/jobfleet/internal/etcdserver"
	"github.com/jobfleet/jobfleet/internal/testkit/etcdtest"
	"github.com/jobfleet/jobfleet/internal/testkit/proctest"
	"github.com/jobfleet/jobfleet/shard"
)

const (
	// leaseTTL is the --lease-ttl of the orchestrators the tests start.
	leaseTTL = 2 * time.Second
	// partitions is their --partitions.
	partitions = 64
	// pollInterval is how often the tests poll the HTTP API.
	pollInterval = 50 * time.Millisecond
)

// httpClient keeps no idle connections, so no goroutine outlives a
// request; it authenticates with the tests' bootstrap admin secret, which
// every orchestrator process started by startOrchestrator accepts.
var httpClient = &http.Client{Timeout: 2 * time.Second, Transport: &auth.BearerTransport{Token: adminSecret, Base: &http.Transport{DisableKeepAlives: true}}}

// anonClient sends no credential.
var anonClient = &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}

// startProc starts the jobfleet binary with args, without any JOBFLEET_*
// variable of the test's environment.
func startProc(t *testing.T, name string, args ...string) *proctest.Process {
	t.Helper()
	return startCommand(t, name, binary, args...)
}

// startCommand is startProc for program path (a shell that executes the
// binary, for instance). The process is killed when the test ends if it is
// still running, and its output is logged if the test failed.
func startCommand(t *testing.T, name, path string, args ...string) *proctest.Process {
	t.Helper()
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "JOBFLEET_") {
			env = append(env, kv)
		}
	}
	if os.Getenv("XDG_CONFIG_HOME") == testConfigHome {
		env = append(env, "XDG_CONFIG_HOME="+procConfigHome) // the last one counts
	}
	return proctest.Start(t, name, path, args, proctest.Options{
		Env: env,
		// A binary built with -race reports races on stderr (and exits
		// 66, unless it was killed first).
		AtEnd: func(p *proctest.Process) {
			if strings.Contains(p.Stderr.String(), "WARNING: DATA RACE") {
				t.Errorf("%s: the race detector reported a data race", name)
			}
		},
	})
}

// orch is one `jobfleet orchestrator` process.
type orch struct {
	*proctest.Process
	id  string
	url string // of its HTTP API
}

// startOrchestrator starts a member of namespace ns with the tests' lease
// TTL and partition count; extra flags come last and override. It returns
// once the HTTP API answers, or the process has exited (the caller checks
// which). A listen port taken between choosing and binding it is retried
// with another one.
func startOrchestrator(t *testing.T, ns, id string, extra ...string) *orch {
	t.Helper()
	for attempt := 1; ; attempt++ {
		addr, err := etcdserver.FreeAddr()
		if err != nil {
			t.Fatal(err)
		}
		o := launchOrchestrator(t, ns, id, addr, extra...)
		if o.Exited() && strings.Contains(o.Stderr.String(), "address already in use") && attempt < 3 {
			t.Logf("%s: port %s taken meanwhile; retrying on another", id, addr)
			continue
		}
		return o
	}
}

// launchOrchestrator starts a member on listen address addr and returns
// once its API answers or it exited.
func launchOrchestrator(t *testing.T, ns, id, addr string, extra ...string) *orch {
	t.Helper()
	args := append([]string{
		"orchestrator",
		"--etcd-endpoints=" + etcd.Endpoints()[0],
		"--listen=" + addr,
		"--id=" + id,
		"--namespace=" + ns,
		"--lease-ttl=" + leaseTTL.String(),
		"--partitions=" + strconv.Itoa(partitions),
		"--admin-token-file=" + adminSecretFile,
		"--log-format=json",
	}, extra...)
	o := &orch{Process: startProc(t, id, args...), id: id, url: "http://" + addr}
	poll(t, 15*time.Second, id+" serving its API or exited", func() (bool, string) {
		if o.Exited() {
			return true, ""
		}
		code, err := getJSON(o.url+"/healthz", nil)
		return err == nil && code == http.StatusOK, fmt.Sprintf("GET /healthz: %d %v", code, err)
	})
	return o
}

// startFleet starts one orchestrator per ID in namespace ns and waits until
// they own every partition as the ring assigns it.
func startFleet(t *testing.T, ns string, ids ...string) []*orch {
	t.Helper()
	fleet := make([]*orch, len(ids))
	for i, id := range ids {
		fleet[i] = startOrchestrator(t, ns, id)
		if fleet[i].Exited() {
			t.Fatalf("%s exited at start-up with %v", id, fleet[i].Cmd.ProcessState)
		}
	}
	took := waitSettled(t, fleet[0], ids, 20*time.Second)
	t.Logf("fleet %v settled %v after the last process started", ids, took.Round(time.Millisecond))
	return fleet
}

// getJSON GETs url as the tests' admin and decodes a 200 reply into out
// (if not nil).
func getJSON(url string, out any) (int, error) { return getJSONWith(httpClient, url, out) }

// getJSONWith is getJSON with client c.
func getJSONWith(c *http.Client, url string, out any) (int, error) {
	resp, err := c.Get(url)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK || out == nil {
		return resp.StatusCode, nil
	}
	return resp.StatusCode, json.NewDecoder(resp.Body).Decode(out)
}

// settled reports whether every one of want partitions is owned by its ring
// target and owners and targets are exactly the members ids; if not, it
// says why.
func settled(tbl api.PartitionTable, want int, ids []string) (bool, string) {
	if tbl.Partitions != want || len(tbl.Rows) != want {
		return false, fmt.Sprintf("%d partitions with %d assignments, want %d", tbl.Partitions, len(tbl.Rows), want)
	}
	owners, targets := map[string]int{}, map[string]int{}
	unowned, misplaced := 0, 0
	for _, a := range tbl.Rows {
		owners[a.Owner]++
		targets[a.Target]++
		switch {
		case a.Owner == "":
			unowned++
		case a.Owner != a.Target:
			misplaced++
		}
	}
	if unowned > 0 || misplaced > 0 {
		return false, fmt.Sprintf("%d without owner, %d not on their target; owners %v, targets %v", unowned, misplaced, owners, targets)
	}
	got := make([]string, 0, len(owners))
	for id := range owners {
		got = append(got, id)
	}
	slices.Sort(got)
	wantIDs := slices.Sorted(slices.Values(ids))
	if !slices.Equal(got, wantIDs) {
		return false, fmt.Sprintf("owners are %v, want %v", owners, wantIDs)
	}
	return true, ""
}

// waitSettled polls o's partition table until settled holds for ids with
// the tests' partition count, and returns how long that took.
func waitSettled(t *testing.T, o *orch, ids []string, timeout time.Duration) time.Duration {
	t.Helper()
	return poll(t, timeout, fmt.Sprintf("every partition owned by its target among %v (as %s sees it)", ids, o.id), func() (bool, string) {
		return settledNow(o, ids)
	})
}

func settledNow(o *orch, ids []string) (bool, string) {
	var tbl api.PartitionTable
	code, err := getJSON(o.url+"/v1/cluster/partitions", &tbl)
	if err != nil || code != http.StatusOK {
		return false, fmt.Sprintf("GET /v1/cluster/partitions: %d %v", code, err)
	}
	return settled(tbl, partitions, ids)
}

// poll calls cond every pollInterval until it holds and returns the time
// that took; after timeout it fails the test with cond's last reason.
func poll(t *testing.T, timeout time.Duration, what string, cond func() (bool, string)) time.Duration {
	t.Helper()
	return proctest.Poll(t, timeout, pollInterval, what, cond)
}

// revision returns etcd's current revision.
func revision(t *testing.T, c *clientv3.Client) int64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	resp, err := c.Get(ctx, "revision-probe")
	if err != nil {
		t.Fatal(err)
	}
	return resp.Header.Revision
}

// checkOwnerHistory replays etcd's history of namespace ns after revision
// from and fails the test if an owner key was ever written while it
// existed (a PUT on an existing key, or one whose create revision is not
// its mod revision): two owners of one partition. It returns the number of
// owner key events checked.
func checkOwnerHistory(t *testing.T, c *clientv3.Client, ns string, from int64) int {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	prefix := shard.OwnersPrefix(ns)
	owners := map[string]bool{} // owner keys existing at the current revision
	r, err := c.Get(ctx, prefix, clientv3.WithPrefix(), clientv3.WithRev(from))
	if err != nil {
		t.Fatal(err)
	}
	for _, kv := range r.Kvs {
		owners[string(kv.Key)] = true
	}
	// A key of the namespace outside owners/ and members/ marks the end of
	// the history to read.
	end, err := c.Put(ctx, ns+"test/history-end", "")
	if err != nil {
		t.Fatal(err)
	}
	events := 0
	for wr := range c.Watch(ctx, ns, clientv3.WithPrefix(), clientv3.WithRev(from+1)) {
		if err := wr.Err(); err != nil {
			t.Fatalf("history watch: %v", err)
		}
		for _, ev := range wr.Events {
			if ev.Kv.ModRevision >= end.Header.Revision {
				return events
			}
			key := string(ev.Kv.Key)
			if !strings.HasPrefix(key, prefix) {
				continue
			}
			events++
			if ev.Type == mvccpb.Event_DELETE {
				delete(owners, key)
				continue
			}
			if owners[key] || ev.Kv.CreateRevision != ev.Kv.ModRevision {
				t.Errorf("owner key %s overwritten at revision %d (value %q, created at %d): two owners", key, ev.Kv.ModRevision, ev.Kv.Value, ev.Kv.CreateRevision)
			}
			owners[key] = true
		}
	}
	t.Fatalf("history watch ended before revision %d: %v", end.Header.Revision, ctx.Err())
	return events
}

// logLine returns the first line of logs that contains one of subs, or "".
func logLine(logs string, subs ...string) string {
	for line := range strings.Lines(logs) {
		for _, sub := range subs {
			if strings.Contains(line, sub) {
				return strings.TrimSpace(line)
			}
		}
	}
	return ""
}

// ownedBy returns the partitions o's table shows owned by id, with epochs.
func ownedBy(t *testing.T, o *orch, id string) map[int]int64 {
	t.Helper()
	var tbl api.PartitionTable
	if code, err := getJSON(o.url+"/v1/cluster/partitions", &tbl); err != nil || code != http.StatusOK {
		t.Fatalf("GET /v1/cluster/partitions: %d %v", code, err)
	}
	m := map[int]int64{}
	for _, a := range tbl.Rows {
		if a.Owner == id {
			m[a.Partition] = a.Epoch
		}
	}
	return m
}

func TestKilledOrchestratorProcessFailsOver(t *testing.T) {
	ns := etcdtest.Namespace(t)
	client := etcd.Client(t)
	start := revision(t, client)
	fleet := startFleet(t, ns, "orch-a", "orch-b", "orch-c")
	survivor, victim := fleet[0], fleet[2]
	lost := ownedBy(t, survivor, victim.id)
	if len(lost) == 0 {
		t.Fatalf("%s owns no partition before the kill", victim.id)
	}

	killedAt := time.Now()
	victim.Signal(t, syscall.SIGKILL)
	waitSettled(t, survivor, []string{"orch-a", "orch-b"}, 15*time.Second)
	took := time.Since(killedAt)
	t.Logf("failover after SIGKILL: all %d partitions (%d of them %s's) owned by their targets among the survivors %v after the kill (lease TTL %v)",
		partitions, len(lost), victim.id, took.Round(time.Millisecond), leaseTTL)
	if limit := leaseTTL + 3*time.Second; took > limit {
		t.Errorf("failover took %v, want at most lease TTL + 3s = %v", took, limit)
	}
	if code := victim.Wait(t, 5*time.Second); code != -1 {
		t.Errorf("%s exit code %d after SIGKILL, want -1 (killed by a signal)", victim.id, code)
	}

	after := ownedBy(t, survivor, "orch-a")
	for p, e := range ownedBy(t, survivor, "orch-b") {
		after[p] = e
	}
	for p, old := range lost {
		if after[p] <= old {
			t.Errorf("partition %d: epoch %d after the failover, want above the killed owner's %d", p, after[p], old)
		}
	}
	events := checkOwnerHistory(t, client, ns, start)
	t.Logf("owner history since the fleet started: %d owner key events, no overwrite", events)
	if events < partitions+len(lost) {
		t.Errorf("history holds %d owner key events, want at least %d (initial acquisitions and the failover)", events, partitions+len(lost))
	}
}

func TestPausedOrchestratorProcessFencesItself(t *testing.T) {
	ns := etcdtest.Namespace(t)
	client := etcd.Client(t)
	start := revision(t, client)
	ids := []string{"orch-a", "orch-b", "orch-c"}
	fleet := startFleet(t, ns, ids...)
	survivor, victim := fleet[0], fleet[2]
	survivors := ids[:2]

	stoppedAt := time.Now()
	victim.Signal(t, syscall.SIGSTOP)
	waitSettled(t, survivor, survivors, 15*time.Second)
	took := time.Since(stoppedAt)
	t.Logf("%s paused: its partitions owned by the survivors %v after SIGSTOP (lease TTL %v)", victim.id, took.Round(time.Millisecond), leaseTTL)
	// The fault injected is a pause of 2×TTL; the wait is its length, not
	// a synchronisation.
	time.Sleep(2*leaseTTL - time.Since(stoppedAt))
	if ok, why := settledNow(survivor, survivors); !ok {
		t.Fatalf("after a pause of %v, the survivors do not own every partition: %s", time.Since(stoppedAt).Round(time.Millisecond), why)
	}
	if victim.Exited() {
		t.Fatalf("%s exited while stopped: %v", victim.id, victim.Cmd.ProcessState)
	}

	victim.Signal(t, syscall.SIGCONT)
	resumedAt := time.Now()
	var fenced string
	poll(t, 10*time.Second, victim.id+" logs that its session ended", func() (bool, string) {
		fenced = logLine(victim.Stderr.String(), "lease not renewed within the renew deadline", "session ended")
		return fenced != "", "no such log line yet"
	})
	t.Logf("%s after SIGCONT logged: %s", victim.id, fenced)
	waitSettled(t, survivor, ids, 20*time.Second)
	t.Logf("%s rejoined: all 3 own their targets %v after SIGCONT", victim.id, time.Since(resumedAt).Round(time.Millisecond))
	if victim.Exited() {
		t.Errorf("%s exited after SIGCONT: %v", victim.id, victim.Cmd.ProcessState)
	}

	events := checkOwnerHistory(t, client, ns, start)
	t.Logf("owner history since the fleet started: %d owner key events, no overwrite", events)
}

func TestGracefulStopHandsOver(t *testing.T) {
	ns := etcdtest.Namespace(t)
	client := etcd.Client(t)
	start := revision(t, client)
	fleet := startFleet(t, ns, "orch-a", "orch-b", "orch-c")
	survivor, leaver := fleet[0], fleet[2]

	stoppedAt := time.Now()
	leaver.Signal(t, syscall.SIGTERM)
	waitSettled(t, survivor, []string{"orch-a", "orch-b"}, 10*time.Second)
	took := time.Since(stoppedAt)
	t.Logf("graceful stop: every partition owned by its target among the others %v after SIGTERM", took.Round(time.Millisecond))
	if took > 3*time.Second {
		t.Errorf("handoff after SIGTERM took %v, want under 3s", took)
	}
	if code := leaver.Wait(t, 10*time.Second); code != 0 {
		t.Errorf("%s exit code %d after SIGTERM, want 0", leaver.id, code)
	}
	if logs := leaver.Stderr.String(); !strings.Contains(logs, "left the fleet") {
		t.Errorf("%s did not log that it left the fleet", leaver.id)
	}
	checkOwnerHistory(t, client, ns, start)
}

func TestDrainEndpoint(t *testing.T) {
	ns := etcdtest.Namespace(t)
	client := etcd.Client(t)
	start := revision(t, client)
	fleet := startFleet(t, ns, "orch-a", "orch-b", "orch-c")
	survivor, leaver := fleet[0], fleet[2]

	drainedAt := time.Now()
	resp, err := httpClient.Post(leaver.url+"/v1/cluster/drain", "application/json", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusAccepted {
		t.Fatalf("POST /v1/cluster/drain: got status %d, want 202", resp.StatusCode)
	}
	waitSettled(t, survivor, []string{"orch-a", "orch-b"}, 10*time.Second)
	t.Logf("drain: every partition owned by its target among the others %v after the request", time.Since(drainedAt).Round(time.Millisecond))
	if code := leaver.Wait(t, 10*time.Second); code != 0 {
		t.Errorf("%s exit code %d after drain, want 0", leaver.id, code)
	}
	if logs := leaver.Stderr.String(); !strings.Contains(logs, "drain requested over the API") || !strings.Contains(logs, "left the fleet") {
		t.Errorf("%s did not log the drain request and leaving the fleet", leaver.id)
	}
	checkOwnerHistory(t, client, ns, start)
}

// freePortPair returns a loopback port p such that p and p+1 were both
// free a moment ago.
func freePortPair(t *testing.T) int {
	t.Helper()
	for range 50 {
		l1, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		p := l1.Addr().(*net.TCPAddr).Port
		l2, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(p+1)))
		l1.Close()
		if err == nil {
			l2.Close()
			return p
		}
	}
	t.Fatal("no two consecutive free ports found")
	return 0
}

// runCLIProc runs a jobfleet client command as a process (with the test's
// XDG_CONFIG_HOME, no JOBFLEET_* variable) and returns its standard output
// and error; it fails the test unless the command exits 0.
func runCLIProc(t *testing.T, args ...string) (stdout, stderr string) {
	t.Helper()
	p := startProc(t, "jobfleet "+strings.Join(args, " "), args...)
	if code := p.Wait(t, 20*time.Second); code != 0 {
		t.Fatalf("jobfleet %q: exit code %d\n%s%s", args, code, p.Stdout.String(), p.Stderr.String())
	}
	return p.Stdout.String(), p.Stderr.String()
}

// TestDevCommandStartsFleet runs the quick start: jobfleet dev, then the
// README's client commands with no flags at all (dev made a credential
// and a current CLI context for them), while an anonymous request is
// refused.
func TestDevCommandStartsFleet(t *testing.T) {
	// dev writes its context into a configuration of this test's own
	// (the processes inherit the variable).
	t.Setenv("XDG_CONFIG_HOME", t.TempDir())
	var (
		dev     *proctest.Process
		urls    []string
		dataDir string
		port    int
	)
	for attempt := 1; ; attempt++ {
		port = freePortPair(t)
		etcdAddr, err := etcdserver.FreeAddr()
		if err != nil {
			t.Fatal(err)
		}
		peerAddr, err := etcdserver.FreeAddr()
		if err != nil {
			t.Fatal(err)
		}
		urls = []string{fmt.Sprintf("http://127.0.0.1:%d", port), fmt.Sprintf("http://127.0.0.1:%d", port+1)}
		startedAt := time.Now()
		dataDir = t.TempDir()
		dev = startProc(t, "dev", "dev",
			"--orchestrators=2",
			"--listen=127.0.0.1:"+strconv.Itoa(port),
			"--etcd-listen="+etcdAddr,
			"--etcd-peer-listen="+peerAddr,
			"--data-dir="+dataDir,
		)
		poll(t, 60*time.Second, "both orchestrators of jobfleet dev ready, or jobfleet dev exited", func() (bool, string) {
			if dev.Exited() {
				return true, ""
			}
			for _, u := range urls {
				code, err := getJSON(u+"/readyz", nil)
				if err != nil || code != http.StatusOK {
					return false, fmt.Sprintf("GET %s/readyz: %d %v", u, code, err)
				}
			}
			return true, ""
		})
		if !dev.Exited() {
			t.Logf("jobfleet dev: both orchestrators ready %v after start", time.Since(startedAt).Round(time.Millisecond))
			break
		}
		if strings.Contains(dev.Stderr.String(), "address already in use") && attempt < 3 {
			t.Logf("a port was taken meanwhile; retrying on others")
			continue
		}
		t.Fatalf("jobfleet dev exited at start-up: %v", dev.Cmd.ProcessState)
	}

	// The log names the echo endpoint (the tutorial's job.json aims at
	// it), which answers with the body it got; on the port after the
	// members' unless that one was taken.
	poll(t, 20*time.Second, "the log line saying dev is up", func() (bool, string) {
		return logLine(dev.Stderr.String(), "jobfleet dev is up") != "", dev.Stderr.String()
	})
	line := logLine(dev.Stderr.String(), "jobfleet dev is up")
	m := regexp.MustCompile(`"echo":\s*"(http://127\.0\.0\.1:[0-9]+)"`).FindStringSubmatch(line)
	if m == nil {
		t.Fatalf("the log line saying dev is up does not name the echo endpoint: %s", line)
	}
	if want := fmt.Sprintf("http://127.0.0.1:%d", port+2); m[1] != want && !strings.Contains(dev.Stderr.String(), "the echo endpoint's port is taken") {
		t.Errorf("echo endpoint %s, want %s (the port after the members')", m[1], want)
	}
	if resp, err := anonClient.Post(m[1]+"/echo", "application/json", strings.NewReader(`{"ping":1}`)); err != nil {
		t.Errorf("POST %s/echo: %v", m[1], err)
	} else {
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || string(body) != `{"ping":1}` {
			t.Errorf("POST %s/echo: %d %q, want the body back", m[1], resp.StatusCode, body)
		}
	}

	// dev's admin token, in a private file of its data directory.
	tokenFile := filepath.Join(dataDir, "admin.token")
	if fi, err := os.Stat(tokenFile); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("admin token file: %v, %v; want mode 0600", fi, err)
	}
	token, err := auth.ReadTokenFile(tokenFile)
	if err != nil {
		t.Fatal(err)
	}
	devClient := &http.Client{Timeout: 2 * time.Second, Transport: &auth.BearerTransport{Token: token, Base: &http.Transport{DisableKeepAlives: true}}}

	// Anonymous requests learn nothing (the README's curl needs the token).
	resp, err := anonClient.Get(urls[0] + "/v1/jobs/example-echo/runs")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized || resp.Header.Get("WWW-Authenticate") != `Bearer realm="jobfleet"` {
		t.Fatalf("anonymous GET /v1/jobs/example-echo/runs: %d %v, want 401", resp.StatusCode, resp.Header)
	}

	// The dev context (its data directory's: see devContextName), current,
	// in the user's configuration (0600).
	ctxName := devContextName(dataDir)
	cfgPath := filepath.Join(os.Getenv("XDG_CONFIG_HOME"), "jobfleet", "config.json")
	raw, err := os.ReadFile(cfgPath)
	if err != nil {
		t.Fatal(err)
	}
	if fi, _ := os.Stat(cfgPath); fi.Mode().Perm() != 0o600 {
		t.Errorf("%s has mode %v, want 0600", cfgPath, fi.Mode().Perm())
	}
	var cfg map[string]any
	if err := json.Unmarshal(raw, &cfg); err != nil || cfg["current_context"] != ctxName {
		t.Fatalf("config %s: %v", raw, err)
	}
	devCtx, _ := cfg["contexts"].(map[string]any)[ctxName].(map[string]any)
	for _, k := range []string{"server", "token", "token_file", "ca", "cert", "key"} {
		if _, ok := devCtx[k]; !ok {
			t.Errorf("dev context lacks %q: %s", k, raw)
		}
	}
	if devCtx["server"] != urls[0] || devCtx["token_file"] != tokenFile {
		t.Errorf("dev context %v, want server %s and token file %s", devCtx, urls[0], tokenFile)
	}

	// The README's curl takes the address and the token from the context.
	if out, _ := runCLIProc(t, "context", "show", "--field", "server"); out != urls[0]+"\n" {
		t.Errorf("jobfleet context show --field server printed %q, want %q", out, urls[0]+"\n")
	}
	if out, _ := runCLIProc(t, "context", "show", "--field", "token"); out != token+"\n" {
		t.Errorf("jobfleet context show --field token printed %d bytes, not dev's admin token", len(out))
	}

	// The README's commands, with no flags.
	out, _ := runCLIProc(t, "cluster", "partitions")
	if !strings.Contains(out, "orchestrator-1") || !strings.Contains(out, "0 without owner") {
		t.Errorf("jobfleet cluster partitions:\n%s", out)
	}
	poll(t, 20*time.Second, "the example jobs listed", func() (bool, string) {
		out, _ = runCLIProc(t, "job", "ls")
		return strings.Contains(out, "example-echo") && strings.Contains(out, "example-flaky") && strings.Contains(out, "example-shell"), out
	})
	runCLIProc(t, "job", "runs", "example-flaky")
	runCLIProc(t, "job", "create", "--id", "hello", "--schedule", "@every 5s", "--http-url", "http://127.0.0.1:9/", "--max-attempts", "3")
	if out, _ = runCLIProc(t, "job", "get", "hello"); !strings.Contains(out, "hello") {
		t.Errorf("jobfleet job get hello:\n%s", out)
	}
	if out, _ = runCLIProc(t, "token", "ls"); !strings.Contains(out, "dev-admin") || !strings.Contains(out, "dev-worker") {
		t.Errorf("jobfleet token ls:\n%s", out)
	}
	var runs struct {
		Runs []struct {
			Status string `json:"status"`
		} `json:"runs"`
	}
	poll(t, 20*time.Second, "a succeeded run of example-echo (the in-process workers use dev's worker credential)", func() (bool, string) {
		code, err := getJSONWith(devClient, urls[0]+"/v1/jobs/example-echo/runs", &runs)
		for _, r := range runs.Runs {
			if r.Status == "succeeded" {
				return true, ""
			}
		}
		return false, fmt.Sprintf("%d %v %+v", code, err, runs)
	})

	// dev's notifications may reach a receiver on this machine, as its
	// workers' http jobs may: one is saved, and delivered.
	notified := make(chan string, 16)
	rcv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case notified <- r.Header.Get("Jobfleet-Notify-Event"):
		default:
		}
	}))
	defer rcv.Close()
	hooked := api.Job{ID: "notify-local", Executor: api.Executor{Type: "http", URL: m[1] + "/echo"},
		Notify: []api.Notification{{On: []api.RunStatus{api.RunSucceeded}, URL: rcv.URL + "/hook"}}}
	body, _ := json.Marshal(hooked)
	resp, err = devClient.Post(urls[0]+"/v1/jobs", "application/json", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	reply, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusCreated {
		t.Fatalf("create a job notifying %s: %d %s, want 201", rcv.URL, resp.StatusCode, reply)
	}
	select {
	case ev := <-notified:
		if ev != "succeeded" {
			t.Errorf("notification event %q, want succeeded", ev)
		}
	case <-time.After(20 * time.Second):
		t.Errorf("no notification at %s within 20s", rcv.URL)
	}

	var view struct {
		Members []struct {
			ID   string `json:"id"`
			Addr string `json:"addr"`
		} `json:"members"`
	}
	if code, err := getJSONWith(devClient, urls[1]+"/v1/cluster/members", &view); err != nil || code != http.StatusOK {
		t.Fatalf("GET /v1/cluster/members: %d %v", code, err)
	}
	var ids []string
	for _, m := range view.Members {
		ids = append(ids, m.ID)
	}
	if want := []string{"orchestrator-1", "orchestrator-2"}; !slices.Equal(ids, want) {
		t.Errorf("members %v, want %v", ids, want)
	}
	var tbl api.PartitionTable
	if code, err := getJSONWith(devClient, urls[0]+"/v1/cluster/partitions", &tbl); err != nil || code != http.StatusOK {
		t.Fatalf("GET /v1/cluster/partitions: %d %v", code, err)
	}
	if ok, why := settled(tbl, shard.DefaultPartitions, ids); !ok {
		t.Errorf("partitions of jobfleet dev: %s", why)
	}

	interruptedAt := time.Now()
	dev.Signal(t, os.Interrupt)
	if code := dev.Wait(t, 10*time.Second); code != 0 {
		t.Errorf("jobfleet dev exit code %d after SIGINT, want 0", code)
	}
	t.Logf("jobfleet dev exited %v after SIGINT", time.Since(interruptedAt).Round(time.Millisecond))
}

func TestPartitionMismatchExitsWithClearError(t *testing.T) {
	ns := etcdtest.Namespace(t)
	first := startOrchestrator(t, ns, "orch-a") // --partitions=64
	poll(t, 10*time.Second, "the cluster created", func() (bool, string) {
		code, err := getJSON(first.url+"/v1/cluster/partitions", nil)
		return err == nil && code == http.StatusOK, fmt.Sprintf("GET /v1/cluster/partitions: %d %v", code, err)
	})

	second := startOrchestrator(t, ns, "orch-b", "--partitions=128")
	if code := second.Wait(t, 15*time.Second); code == 0 {
		t.Fatalf("orchestrator with --partitions=128 in a 64-partition cluster exited 0, want an error")
	}
	stderr := second.Stderr.String()
	for _, want := range []string{"partition count mismatch", "64"} {
		if !strings.Contains(stderr, want) {
			t.Errorf("stderr lacks %q:\n%s", want, stderr)
		}
	}
	if first.Exited() {
		t.Errorf("the first orchestrator exited: %v", first.Cmd.ProcessState)
	}
}

func TestBadFlagsExitWithClearError(t *testing.T) {
	dir := t.TempDir()
	secretFile := func(name, content string, mode os.FileMode) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), mode); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(p, mode); err != nil {
			t.Fatal(err)
		}
		return p
	}
	readable := secretFile("readable", adminSecret, 0o644)
	short := secretFile("short", "too-short", 0o600)
	for _, tt := range []struct {
		name string
		flag string
		want []string
	}{
		{"lease TTL not whole seconds", "--lease-ttl=1500ms", []string{"--lease-ttl 1.5s", "whole number of seconds"}},
		{"lease TTL not a duration", "--lease-ttl=soon", []string{"lease-ttl", "soon"}},
		{"listen without port", "--listen=nonsense", []string{"--listen", "nonsense"}},
		{"log format", "--log-format=xml", []string{"--log-format", "xml"}},
		{"negative partitions", "--partitions=-1", []string{"partitions", "-1"}},
		{"bad member ID", "--id=a/b", []string{"member ID", "a/b"}},
		{"high-water mark above 1", "--storage-high-water=80", []string{"--storage-high-water", "80", "at most 1"}},
		{"quota not a size", "--etcd-quota-bytes=lots", []string{"etcd-quota-bytes", "lots", "2GiB"}},
		{"negative check interval", "--storage-check-interval=-5m", []string{"--storage-check-interval", "-5m", "at least 10ms"}},
		{"compaction interval too short", "--compaction-interval=100ms", []string{"--compaction-interval", "100ms", "at least 1s"}},
		{"https advertised without TLS", "--advertise=https://node-1.example:8443", []string{"--advertise", "https://node-1.example:8443", "plain HTTP", "--tls-cert"}},
		{"TLS certificate without key", "--tls-cert=server.crt", []string{"--tls-cert", "--tls-key"}},
		{"negative connection cap", "--max-connections=-1", []string{"--max-connections", "at least 1"}},
		{"negative history", "--history-max-runs=-1", []string{"--history-max-runs -1", "want 1 to"}},
		{"admin token file readable by others", "--admin-token-file=" + readable, []string{"--admin-token-file", "mode 0644", "chmod 600"}},
		{"admin token file too short", "--admin-token-file=" + short, []string{"--admin-token-file", "needs at least 32"}},
		{"no auth on a wildcard listener", "--insecure-no-auth", []string{"--insecure-no-auth", "loopback"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			addr, err := etcdserver.FreeAddr()
			if err != nil {
				t.Fatal(err)
			}
			// Nothing listens on noEtcd: flags are checked before etcd is
			// needed, so a bad flag is reported at once even when etcd
			// cannot be reached.
			noEtcd, err := etcdserver.FreeAddr()
			if err != nil {
				t.Fatal(err)
			}
			listen := addr
			if tt.flag == "--insecure-no-auth" {
				listen = "0.0.0.0:" + addr[strings.LastIndex(addr, ":")+1:]
			}
			p := startProc(t, "orchestrator", "orchestrator",
				"--etcd-endpoints=http://"+noEtcd,
				"--listen="+listen,
				tt.flag,
			)
			if code := p.Wait(t, 10*time.Second); code == 0 || code == -1 {
				t.Fatalf("%s: exit code %d, want an error exit", tt.flag, code)
			}
			stderr := p.Stderr.String()
			for _, want := range tt.want {
				if !strings.Contains(stderr, want) {
					t.Errorf("%s: stderr lacks %q:\n%s", tt.flag, want, stderr)
				}
			}
			if strings.Count(stderr, "\n") > 5 {
				t.Errorf("%s: want a short error, got:\n%s", tt.flag, stderr)
			}
		})
	}
}
