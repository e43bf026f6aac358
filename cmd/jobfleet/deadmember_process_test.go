package main

// Process tests of the dead member detector (membership/deathwatch): a
// killed member's lease is revoked by a peer before it could expire; a
// paused one keeps it; a member restarted on the same address, or whose
// port another process took, is never revoked. And of the workers'
// presence streams: a killed worker's registration is revoked at once.

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/jobfleet/jobfleet/api"
	"github.com/jobfleet/jobfleet/internal/chaos"
	"github.com/jobfleet/jobfleet/internal/testkit/etcdtest"
	"github.com/jobfleet/jobfleet/internal/testkit/proctest"
)

// failoverKills is how many times TestKilledOrchestratorIsRevokedAtOnce
// kills a member: a few in CI; 20 in a row with -failover-kills=20.
var failoverKills = flag.Int("failover-kills", 3, "kill -9 rounds of TestKilledOrchestratorIsRevokedAtOnce (20 for the full check)")

// revokeTTL is the lease TTL of the members whose revocation is tested:
// long enough that a failover within revokeWithin cannot be an expiry.
const (
	revokeTTL    = 30 * time.Second
	revokeWithin = 15 * time.Second
)

// startOrchestratorAt starts a member on listen address addr (which must
// be free) and returns once its API answers or it exited.
func startOrchestratorAt(t *testing.T, ns, id, addr string, extra ...string) *orch {
	t.Helper()
	o := launchOrchestrator(t, ns, id, addr, extra...)
	if o.Exited() {
		t.Fatalf("%s exited at start-up with %v", id, o.Cmd.ProcessState)
	}
	return o
}

// startFleetWith is startFleet with extra flags for every member.
func startFleetWith(t *testing.T, ns string, ids []string, extra ...string) []*orch {
	t.Helper()
	fleet := make([]*orch, len(ids))
	for i, id := range ids {
		fleet[i] = startOrchestrator(t, ns, id, extra...)
		if fleet[i].Exited() {
			t.Fatalf("%s exited at start-up with %v", id, fleet[i].Cmd.ProcessState)
		}
	}
	took := waitSettled(t, fleet[0], ids, 30*time.Second)
	t.Logf("fleet %v settled %v after the last process started", ids, took.Round(time.Millisecond))
	return fleet
}

// memberLease returns the lease of id's registration as o's member view
// shows it, 0 if it is not registered.
func memberLease(t *testing.T, o *orch, id string) int64 {
	t.Helper()
	var v api.View
	if code, err := getJSON(o.url+"/v1/cluster/members", &v); err != nil || code != http.StatusOK {
		t.Fatalf("GET /v1/cluster/members: %d %v", code, err)
	}
	for _, m := range v.Members {
		if m.ID == id {
			return m.LeaseID
		}
	}
	return 0
}

// leaseTTLLeft returns the seconds lease has left on the server, -1 if it
// is gone.
func leaseTTLLeft(t *testing.T, c *clientv3.Client, lease int64) int64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	resp, err := c.TimeToLive(ctx, clientv3.LeaseID(lease))
	if err != nil {
		t.Fatal(err)
	}
	return resp.TTL
}

// metricValue scrapes o's /metrics and returns the value of the sample
// named exactly sample (with its labels, if any), 0 if absent.
func metricValue(t *testing.T, o *orch, sample string) float64 {
	t.Helper()
	resp, err := httpClient.Get(o.url + "/metrics")
	if err != nil {
		t.Fatalf("GET %s/metrics: %v", o.url, err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		name, value, ok := strings.Cut(sc.Text(), " ")
		if ok && name == sample {
			v, err := strconv.ParseFloat(value, 64)
			if err != nil {
				t.Fatalf("metric %s: %v", sample, err)
			}
			return v
		}
	}
	return 0
}

// createEverySecondJobs creates n jobs firing every second (no worker
// runs them: their runs stay pending, which is all the fire checks need).
func createEverySecondJobs(t *testing.T, o *orch, n int) {
	t.Helper()
	for i := range n {
		body, _ := json.Marshal(map[string]any{
			"id":       fmt.Sprintf("tick-%02d", i),
			"schedule": "@every 1s",
			"executor": map[string]any{"type": "http", "url": "http://127.0.0.1:9/"},
		})
		req, _ := http.NewRequest(http.MethodPost, o.url+"/v1/jobs", bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		resp, err := httpClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusCreated {
			t.Fatalf("POST /v1/jobs: status %d, want 201", resp.StatusCode)
		}
	}
}

// TestKilledOrchestratorIsRevokedAtOnce kills a member owning partitions
// with SIGKILL, -failover-kills times in a row (each time another one,
// restarted after): every time, a survivor's detector revokes the dead
// member's lease, and the survivors own every partition, while the lease
// still had most of its 30 s TTL left: the failover did not wait for it.
// Meanwhile jobs fire every second; their history, recorded as the fault
// suite records it, has no duplicate or unfenced fire and no two owners.
func TestKilledOrchestratorIsRevokedAtOnce(t *testing.T) {
	ns := etcdtest.Namespace(t)
	client := etcd.Client(t)
	rec := chaos.Record(client, ns, partitions, revision(t, client), nil)
	ids := []string{"orch-a", "orch-b", "orch-c"}
	flags := []string{"--lease-ttl=" + revokeTTL.String()}
	fleet := startFleetWith(t, ns, ids, flags...)
	createEverySecondJobs(t, fleet[0], 16)

	var took []time.Duration
	for k := range *failoverKills {
		vi := k % len(fleet)
		victim, survivor := fleet[vi], fleet[(vi+1)%len(fleet)]
		var survivors []string
		for _, id := range ids {
			if id != victim.id {
				survivors = append(survivors, id)
			}
		}
		if len(ownedBy(t, survivor, victim.id)) == 0 {
			t.Fatalf("kill %d: %s owns no partition", k+1, victim.id)
		}
		lease := memberLease(t, survivor, victim.id)
		left := time.Duration(leaseTTLLeft(t, client, lease)) * time.Second
		if left < revokeTTL/2 {
			t.Fatalf("kill %d: %s's lease has %v left before the kill, want most of %v", k+1, victim.id, left, revokeTTL)
		}
		killedAt := time.Now()
		victim.Signal(t, syscall.SIGKILL)
		waitSettled(t, survivor, survivors, revokeWithin)
		d := time.Since(killedAt)
		took = append(took, d)
		// The lease had `left` to live at the kill and is gone already:
		// revoked, not expired.
		if d >= left {
			t.Fatalf("kill %d: the failover took %v, as long as the lease had left (%v): the test cannot tell a revocation from an expiry", k+1, d, left)
		}
		if ttl := leaseTTLLeft(t, client, lease); ttl != -1 {
			t.Errorf("kill %d: %s's lease has %ds left after its partitions moved, want it revoked", k+1, victim.id, ttl)
		}
		if revokedBy(fleet, lease) == "" {
			t.Errorf("kill %d: no survivor logged revoking %s's lease %x", k+1, victim.id, lease)
		}
		if code := victim.Wait(t, 5*time.Second); code != -1 {
			t.Errorf("kill %d: %s exit code %d after SIGKILL, want -1", k+1, victim.id, code)
		}
		t.Logf("kill %d of %s: every partition owned by the survivors %v after the kill (lease %x had %v left)", k+1, victim.id, d.Round(time.Millisecond), lease, left)

		fleet[vi] = startOrchestrator(t, ns, victim.id, flags...)
		waitSettled(t, fleet[0], ids, 30*time.Second)
	}
	t.Logf("kill → every partition owned by a survivor, %d kills: %v", len(took), took)

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	h, err := rec.Stop(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range chaos.FireViolations(h) {
		t.Error(v)
	}
	if h.Fires() == 0 {
		t.Error("the history holds no fire: the check checked nothing")
	}
	t.Logf("history: %d fires, %d owner key events; no duplicate or unfenced fire, no two owners", h.Fires(), h.OwnerEvents)
}

// TestPausedOrchestratorKeepsItsLease pauses a member (SIGSTOP) past its
// lease TTL: nobody revokes it (its listening socket still accepts
// connections), its lease expires, its partitions move after it, and on
// waking it fences itself.
func TestPausedOrchestratorKeepsItsLease(t *testing.T) {
	ns := etcdtest.Namespace(t)
	client := etcd.Client(t)
	ids := []string{"orch-a", "orch-b", "orch-c"}
	fleet := startFleet(t, ns, ids...)
	survivor, victim := fleet[0], fleet[2]
	lease := memberLease(t, survivor, victim.id)

	stoppedAt := time.Now()
	victim.Signal(t, syscall.SIGSTOP)
	waitSettled(t, survivor, ids[:2], 15*time.Second)
	took := time.Since(stoppedAt)
	// Lower bounds hold however slow the machine: the partitions could
	// move only once the lease expired, at least TTL less one renew
	// interval after the pause.
	if min := leaseTTL * 3 / 4; took < min {
		t.Errorf("a paused member's partitions moved %v after the pause, before its lease could expire (%v)", took, min)
	}
	if ttl := leaseTTLLeft(t, client, lease); ttl != -1 {
		t.Errorf("the paused member's lease has %ds left after its partitions moved", ttl)
	}
	for _, o := range fleet[:2] {
		if n := metricValue(t, o, "jobfleet_dead_member_detections_total"); n != 0 {
			t.Errorf("%s detected %v dead members; a paused one is not dead", o.id, n)
		}
		if n := metricValue(t, o, `jobfleet_dead_member_probes_total{result="connected"}`); n == 0 {
			t.Errorf("%s never reached a peer: the test checked nothing", o.id)
		}
		if l := logLine(o.Stderr.String(), "revoked a dead peer's lease", "refuses connections"); l != "" {
			t.Errorf("%s: %s", o.id, l)
		}
	}
	victim.Signal(t, syscall.SIGCONT)
	var fenced string
	// Whichever it notices first: its keep-alive's deadline passed, etcd
	// answers that the lease is gone, or its watch of the members shows
	// its registration gone (all three fence it).
	poll(t, 10*time.Second, victim.id+" logs that its session ended", func() (bool, string) {
		fenced = logLine(victim.Stderr.String(), "lease not renewed within the renew deadline", "lease expired or revoked on the server",
			"registration is gone though it did not leave")
		return fenced != "", "no such log line yet"
	})
	t.Logf("%s paused %v, then after SIGCONT logged: %s", victim.id, took.Round(time.Millisecond), fenced)
	waitSettled(t, survivor, ids, 20*time.Second)
}

// TestPortTakenByAnotherProcessIsNotRevoked kills a member and at once
// listens on its port from another process (this test's): probes of its
// address connect, so nobody revokes the dead member's lease, and its
// partitions move only when the lease expires. The detector's evidence
// is a refusal; a port that answers is none.
func TestPortTakenByAnotherProcessIsNotRevoked(t *testing.T) {
	ns := etcdtest.Namespace(t)
	client := etcd.Client(t)
	ids := []string{"orch-a", "orch-b", "orch-c"}
	fleet := startFleet(t, ns, ids...)
	survivor, victim := fleet[0], fleet[2]
	lease := memberLease(t, survivor, victim.id)
	addr := strings.TrimPrefix(victim.url, "http://")

	killedAt := time.Now()
	victim.Signal(t, syscall.SIGKILL)
	victim.Wait(t, 5*time.Second)
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatalf("listen on the killed member's address %s: %v", addr, err)
	}
	defer ln.Close()
	go func() { // holds what it accepts until ln closes
		var held []net.Conn
		defer func() {
			for _, c := range held {
				c.Close()
			}
		}()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			held = append(held, c)
		}
	}()
	waitSettled(t, survivor, ids[:2], 15*time.Second)
	took := time.Since(killedAt)
	// At most one refusal can have come between the kill and the listen;
	// one is no evidence.
	for _, o := range fleet[:2] {
		if n := metricValue(t, o, "jobfleet_dead_member_revocations_total"); n != 0 {
			t.Errorf("%s revoked %v leases; the address answered", o.id, n)
		}
	}
	if min := leaseTTL * 3 / 4; took < min {
		t.Errorf("the partitions moved %v after the kill, before the lease could expire (%v): someone revoked it", took, min)
	}
	if ttl := leaseTTLLeft(t, client, lease); ttl != -1 {
		t.Errorf("the dead member's lease has %ds left after its partitions moved", ttl)
	}
	t.Logf("port taken at once: partitions moved %v after the kill, with the lease %x's expiry", took.Round(time.Millisecond), lease)
}

// TestRestartedOnTheSameAddressIsNotRevoked kills a member and restarts
// it at once on the same address under the same ID: its predecessor's
// lease goes (revoked if a survivor saw the address refuse twice before
// the restart listened, else expired), the new incarnation registers
// under a new lease, and no lease of the new incarnation is ever revoked.
// (A loaded machine may make it fence itself and register again: each of
// its leases is checked.)
func TestRestartedOnTheSameAddressIsNotRevoked(t *testing.T) {
	ns := etcdtest.Namespace(t)
	client := etcd.Client(t)
	ids := []string{"orch-a", "orch-b", "orch-c"}
	flags := []string{"--lease-ttl=5s"}
	fleet := startFleetWith(t, ns, ids, flags...)
	survivor, victim := fleet[0], fleet[2]
	old := memberLease(t, survivor, victim.id)
	addr := strings.TrimPrefix(victim.url, "http://")

	victim.Signal(t, syscall.SIGKILL)
	victim.Wait(t, 5*time.Second)
	next := startOrchestratorAt(t, ns, victim.id, addr, flags...)
	var lease int64
	poll(t, 30*time.Second, victim.id+" registered again under a new lease", func() (bool, string) {
		lease = memberLease(t, survivor, victim.id)
		return lease != 0 && lease != old, fmt.Sprintf("lease %x", lease)
	})
	waitSettled(t, survivor, ids, 30*time.Second)
	// A few probe rounds of both survivors at the new incarnation: the
	// fault's length, not a synchronisation.
	time.Sleep(10 * 200 * time.Millisecond)
	leases := registeredLeases(next.Stderr.String())
	if len(leases) == 0 {
		t.Fatalf("the new incarnation logged no registration")
	}
	for _, l := range leases {
		if by := revokedBy(fleet[:2], l); by != "" {
			t.Errorf("%s revoked the new incarnation's lease %x", by, l)
		}
	}
	if now := memberLease(t, survivor, victim.id); leaseTTLLeft(t, client, now) <= 0 {
		t.Errorf("%s's current lease %x is gone", victim.id, now)
	}
	how := "expired"
	if by := revokedBy(fleet[:2], old); by != "" {
		how = "revoked by " + by
	}
	t.Logf("restart on %s: old lease %x %s; the new incarnation's leases %x, none revoked", addr, old, how, leases)
}

// registeredLeases returns the leases a member's logs say it registered
// under, in order.
func registeredLeases(logs string) []int64 {
	var out []int64
	for _, l := range logLines(logs, `"msg":"registered"`) {
		var line struct {
			Lease string `json:"lease"`
		}
		if json.Unmarshal([]byte(l), &line) != nil {
			continue
		}
		if v, err := strconv.ParseInt(line.Lease, 16, 64); err == nil {
			out = append(out, v)
		}
	}
	return out
}

// logLines returns the lines of logs that contain sub.
func logLines(logs, sub string) []string {
	var out []string
	for line := range strings.Lines(logs) {
		if strings.Contains(line, sub) {
			out = append(out, strings.TrimSpace(line))
		}
	}
	return out
}

// revoked reports whether one of fleet logged revoking lease, and which.
func revokedBy(fleet []*orch, lease int64) string {
	hex := fmt.Sprintf(`"lease":"%x"`, lease)
	for _, o := range fleet {
		for _, l := range logLines(o.Stderr.String(), "revoked a dead peer's lease") {
			if strings.Contains(l, hex) {
				return o.id
			}
		}
	}
	return ""
}

// TestKilledWorkerProcessIsRevokedAtOnce: a `jobfleet worker` process
// holding an attempt is killed (SIGKILL). Its presence stream breaks
// without its end, it does not come back, and the orchestrator revokes
// its registration: the attempt is handed to another worker although
// neither the registration's 60 s TTL nor the 60 s run lease could have
// ended it yet.
func TestKilledWorkerProcessIsRevokedAtOnce(t *testing.T) {
	ns := etcdtest.Namespace(t)
	o := startOrchestrator(t, ns, "orch-w", "--worker-ttl=60s", "--run-lease=60s")
	if o.Exited() {
		t.Fatalf("orchestrator exited at start-up: %v", o.Cmd.ProcessState)
	}
	waitSettled(t, o, []string{"orch-w"}, 20*time.Second)

	hook := newAttemptHook(t)
	startWorker := func(id string) *proctest.Process { return startHTTPWorker(t, o, id) }
	doomed := startWorker("doomed")
	poll(t, 15*time.Second, "the worker's presence stream open", func() (bool, string) {
		n := metricValue(t, o, "jobfleet_worker_presence_streams")
		return n == 1, fmt.Sprintf("%v presence streams", n)
	})
	job := api.Job{ID: "survives-its-worker", Executor: api.Executor{Type: "http", URL: hook.URL},
		Retry: api.RetryPolicy{MaxAttempts: 3, InitialBackoff: api.Duration(10 * time.Millisecond)}}
	createJob(t, o, job)
	runs := func() []api.Run { return jobRuns(o, job.ID) }
	poll(t, 15*time.Second, "attempt 1 reached the hook", func() (bool, string) {
		attempts := hook.executions()
		return attempts["1"] == 1, fmt.Sprintf("executions by attempt %v", attempts)
	})
	startWorker("rescuer")
	poll(t, 15*time.Second, "the rescuer registered", func() (bool, string) {
		var ws api.WorkerList
		code, err := getJSON(o.url+"/v1/cluster/workers", &ws)
		return err == nil && code == http.StatusOK && len(ws.Workers) == 2, fmt.Sprintf("GET /v1/cluster/workers: %d %v %+v", code, err, ws)
	})

	killedAt := time.Now()
	doomed.Signal(t, syscall.SIGKILL)
	doomed.Wait(t, 5*time.Second)
	var run api.Run
	// Within 30 s: the registration, refreshed every 20 s, had at least
	// 40 s to live, the run lease 60 s.
	poll(t, 30*time.Second, "the run succeeded on the rescuer", func() (bool, string) {
		if rs := runs(); len(rs) == 1 {
			run = rs[0]
		}
		return run.Status == api.RunSucceeded, fmt.Sprintf("run %+v", run)
	})
	if len(run.Attempts) != 2 || run.Attempts[1].Worker != "rescuer" || !strings.Contains(run.Attempts[0].Error, `worker "doomed" lost`) {
		t.Fatalf("attempts %+v, want attempt 1 lost with the doomed worker, attempt 2 by the rescuer", run.Attempts)
	}
	if l := logLine(o.Stderr.String(), "revoked a dead worker's registration"); !strings.Contains(l, `"worker":"doomed"`) {
		t.Fatalf("the orchestrator did not log revoking the doomed worker's registration (got %q)", l)
	}
	t.Logf("attempt 2 handed out %v after the worker was killed (worker TTL 60s, run lease 60s, presence grace 500ms)",
		run.Attempts[1].StartedAt.Sub(killedAt).Round(time.Millisecond))
	if attempts := hook.executions(); attempts["1"] != 1 || attempts["2"] != 1 || len(attempts) != 2 {
		t.Fatalf("executions by attempt %v, want attempt 1 and attempt 2 once each", attempts)
	}
}
