package failover

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/jobfleet/jobfleet/api"
	"github.com/jobfleet/jobfleet/bench"
	"github.com/jobfleet/jobfleet/internal/chaos"
	"github.com/jobfleet/jobfleet/internal/etcdserver"
	"github.com/jobfleet/jobfleet/shard"
	"github.com/jobfleet/jobfleet/store"
)

// KillResult is the measurement of member processes killed with SIGKILL
// at the default lease TTL, with the dead member detector on or off.
type KillResult struct {
	// Detector says whether the members ran the dead member detector.
	Detector bool `json:"detector"`
	// TTL is the members' lease TTL (the default).
	TTL time.Duration `json:"ttl_ns"`
	// Kills is how many members were killed.
	Kills int `json:"kills"`
	// Owned is, per kill, the time from the SIGKILL until every partition
	// the killed member owned was owned by a live member.
	Owned bench.Summary `json:"owned"`
	// Firing is, per kill, the time from the SIGKILL until every job of
	// those partitions, triggered right after the kill, had fired under
	// its new owner (its run created).
	Firing bench.Summary `json:"firing"`
	// Fires is how many runs the jobs fired meanwhile, and Violations
	// what the fault suite's checker finds wrong in their history
	// (duplicate or unfenced fires, two owners): always empty.
	Fires      int      `json:"fires"`
	Violations []string `json:"violations,omitempty"`
	// Unsettled, if not empty, says why the kills stopped early.
	Unsettled string `json:"unsettled,omitempty"`
}

// killTTL is the lease TTL of the kill measurement: the orchestrator's
// default.
const killTTL = 5 * time.Second

// measureKills kills a `jobfleet orchestrator` process cfg.Kills times,
// with the detector on or off: a fleet of cfg.KillMembers processes on
// the etcd cluster, cfg.KillJobs jobs firing every second; each kill
// takes another member, which is started again once the survivors own
// everything.
func measureKills(ctx context.Context, cfg Config, etcd *cluster, obs *clientv3.Client, detector bool) (*KillResult, error) {
	res := &KillResult{Detector: detector, TTL: killTTL}
	name := "without-detector"
	if detector {
		name = "with-detector"
	}
	ns := fmt.Sprintf("/jobfleet-bench/kills-%s-%d/", name, time.Now().UnixNano())
	from, err := obs.Get(ctx, "revision-probe")
	if err != nil {
		return nil, err
	}
	rec := chaos.Record(obs, ns, cfg.Partitions, from.Header.Revision, nil)
	fires := watchFires(obs, ns, from.Header.Revision)
	defer fires.stop()
	f, err := startProcFleet(cfg, etcd, ns, name, detector)
	if err != nil {
		rec.Stop(ctx)
		return nil, err
	}
	defer f.stop()
	if _, err := f.settle(ctx, obs, time.Now(), ""); err != nil {
		res.Unsettled = fmt.Sprintf("start: %v", err)
		rec.Stop(ctx)
		return res, nil
	}
	jobs, err := f.createJobs(ctx, cfg.KillJobs)
	if err != nil {
		rec.Stop(ctx)
		return nil, err
	}
	var owned, firing []time.Duration
	for k := range cfg.Kills {
		victim := f.members[k%len(f.members)]
		sleep(ctx, time.Second) // a quiet gap: every detector has reached every member
		parts, err := ownedBy(ctx, obs, ns, cfg.Partitions, victim.id)
		if err != nil {
			return nil, err
		}
		var theirs []string
		for _, id := range jobs {
			if _, ok := parts[shard.Partition(id, cfg.Partitions)]; ok {
				theirs = append(theirs, id)
			}
		}
		killed := victim.kill()
		runs := f.trigger(ctx, victim, theirs)
		o, err := waitMoved(ctx, obs, ns, cfg.Partitions, parts, victim.id, killed, cfg.Timeout)
		if err != nil {
			res.Unsettled = fmt.Sprintf("kill %d: %v", k+1, err)
			break
		}
		if len(runs) == 0 {
			res.Unsettled = fmt.Sprintf("kill %d: none of the killed member's %d jobs could be triggered", k+1, len(theirs))
			break
		}
		fired, err := fires.waitAll(ctx, runs, killed.Add(cfg.Timeout))
		if err != nil {
			res.Unsettled = fmt.Sprintf("kill %d: %v", k+1, err)
			break
		}
		owned, firing = append(owned, o), append(firing, fired.Sub(killed))
		res.Kills++
		cfg.Progress.Step("failover: kills %s: kill %d of %s (%d partitions, %d jobs): owned again after %v, firing again after %v",
			name, k+1, victim.id, len(parts), len(theirs), o.Round(time.Millisecond), fired.Sub(killed).Round(time.Millisecond))
		if err := victim.start(); err != nil {
			return nil, err
		}
		if _, err := f.settle(ctx, obs, time.Now(), ""); err != nil {
			res.Unsettled = fmt.Sprintf("restart after kill %d: %v", k+1, err)
			break
		}
	}
	res.Owned, res.Firing = bench.Summarize(owned), bench.Summarize(firing)
	f.stop()
	h, err := rec.Stop(ctx)
	if err != nil {
		return nil, err
	}
	res.Fires = h.Fires()
	res.Violations = chaos.FireViolations(h)
	return res, nil
}

// procMember is one `jobfleet orchestrator` process; restarts keep its
// ID and address.
type procMember struct {
	id, addr string
	args     []string
	binary   string
	log      string

	mu   sync.Mutex // guards cmd and done
	cmd  *exec.Cmd
	done chan struct{}
}

func (m *procMember) url() string { return "http://" + m.addr }

func (m *procMember) start() error {
	lf, err := os.OpenFile(m.log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	defer lf.Close() // the child has its own descriptor
	cmd := exec.Command(m.binary, m.args...)
	cmd.Stdout, cmd.Stderr = lf, lf
	cmd.SysProcAttr = sysProcAttr()
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "JOBFLEET_") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start %s: %w", m.id, err)
	}
	done := make(chan struct{})
	go func() { // owned by the process: ends when it is reaped
		_ = cmd.Wait()
		close(done)
	}()
	m.mu.Lock()
	m.cmd, m.done = cmd, done
	m.mu.Unlock()
	return nil
}

// kill SIGKILLs the process, waits until it is reaped and returns when
// the signal was sent.
func (m *procMember) kill() time.Time {
	m.mu.Lock()
	cmd, done := m.cmd, m.done
	m.cmd = nil
	m.mu.Unlock()
	at := time.Now()
	if cmd == nil {
		return at
	}
	_ = cmd.Process.Signal(syscall.SIGKILL)
	<-done
	return at
}

// procFleet is a fleet of orchestrator processes in one namespace.
type procFleet struct {
	ns      string
	members []*procMember
	hc      *http.Client
}

func startProcFleet(cfg Config, etcd *cluster, ns, name string, detector bool) (*procFleet, error) {
	logs, err := logDir(cfg.Dir)
	if err != nil {
		return nil, err
	}
	f := &procFleet{ns: ns, hc: &http.Client{Timeout: 5 * time.Second}}
	for i := range cfg.KillMembers {
		addr, err := etcdserver.FreeAddr()
		if err != nil {
			f.stop()
			return nil, err
		}
		id := fmt.Sprintf("member-%d", i+1)
		args := []string{
			"orchestrator",
			"--etcd-endpoints=" + strings.Join(etcd.endpoints(), ","),
			"--listen=" + addr,
			"--id=" + id,
			"--namespace=" + ns,
			"--partitions=" + strconv.Itoa(cfg.Partitions),
			"--lease-ttl=" + killTTL.String(),
			"--insecure-no-auth", // loopback only; the harness creates and triggers jobs
			"--log-format=json",
		}
		if !detector {
			args = append(args, "--dead-member-probe-interval=-1s")
		}
		m := &procMember{id: id, addr: addr, args: args, binary: cfg.Binary, log: filepath.Join(logs, name+"-"+id+".log")}
		f.members = append(f.members, m)
		if err := m.start(); err != nil {
			f.stop()
			return nil, err
		}
	}
	return f, nil
}

func (f *procFleet) stop() {
	for _, m := range f.members {
		m.kill()
	}
}

// settle waits until every partition is owned by its ring target among
// the members, but except, and returns the time since start.
func (f *procFleet) settle(ctx context.Context, obs *clientv3.Client, start time.Time, except string) (time.Duration, error) {
	var ids []string
	for _, m := range f.members {
		if m.id != except {
			ids = append(ids, m.id)
		}
	}
	deadline := start.Add(2 * time.Minute)
	for {
		t, p, err := ownerTable(ctx, obs, f.ns)
		if err == nil && p > 0 {
			ring, err := shard.NewRing(ids, shard.DefaultRingConfig(p))
			if err != nil {
				return 0, err
			}
			right := 0
			for part, owner := range t {
				if ring.Target(part) == owner.Member {
					right++
				}
			}
			if right == p {
				return time.Since(start), nil
			}
		}
		if time.Now().After(deadline) {
			return 0, fmt.Errorf("fleet %v not settled after 2m", ids)
		}
		sleep(ctx, 20*time.Millisecond)
		if ctx.Err() != nil {
			return 0, ctx.Err()
		}
	}
}

// createJobs creates n jobs firing every second (concurrency_policy
// forbid: no worker runs them, so each later fire is recorded skipped)
// and returns their IDs.
func (f *procFleet) createJobs(ctx context.Context, n int) ([]string, error) {
	var ids []string
	for i := range n {
		id := fmt.Sprintf("tick-%04d", i)
		body := map[string]any{
			"id": id, "schedule": "@every 1s", "concurrency_policy": "forbid",
			"executor": map[string]any{"type": "http", "url": "http://127.0.0.1:9/"},
		}
		if _, err := f.post(ctx, f.members[0], "/v1/jobs", body, http.StatusCreated); err != nil {
			return nil, err
		}
		ids = append(ids, id)
	}
	return ids, nil
}

// trigger triggers every job of ids through members other than victim,
// at once, and returns the IDs of the runs the triggers ask for (those
// the API accepted).
func (f *procFleet) trigger(ctx context.Context, victim *procMember, ids []string) []string {
	var via []*procMember
	for _, m := range f.members {
		if m != victim {
			via = append(via, m)
		}
	}
	var (
		mu   sync.Mutex
		runs []string
		wg   sync.WaitGroup
	)
	for i, id := range ids {
		wg.Go(func() {
			b, err := f.post(ctx, via[i%len(via)], "/v1/jobs/"+id+"/trigger", nil, http.StatusAccepted)
			var t api.Triggered
			if err != nil || json.Unmarshal(b, &t) != nil {
				return
			}
			mu.Lock()
			runs = append(runs, t.RunID)
			mu.Unlock()
		})
	}
	wg.Wait()
	return runs
}

func (f *procFleet) post(ctx context.Context, m *procMember, path string, body any, want int) ([]byte, error) {
	var b []byte
	if body != nil {
		var err error
		if b, err = json.Marshal(body); err != nil {
			return nil, err
		}
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, m.url()+path, bytes.NewReader(b))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := f.hc.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	var out bytes.Buffer
	_, _ = out.ReadFrom(resp.Body)
	if resp.StatusCode != want {
		return nil, fmt.Errorf("POST %s: status %d: %s", path, resp.StatusCode, bytes.TrimSpace(out.Bytes()))
	}
	return out.Bytes(), nil
}

// ownerTable reads the owner keys and the partition count.
func ownerTable(ctx context.Context, obs *clientv3.Client, ns string) ([]shard.OwnerInfo, int, error) {
	rctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	resp, err := obs.Get(rctx, shard.PartitionsKey(ns))
	if err != nil || len(resp.Kvs) == 0 {
		return nil, 0, errors.Join(err, errors.New("no partition count yet"))
	}
	p, err := strconv.Atoi(string(resp.Kvs[0].Value))
	if err != nil {
		return nil, 0, err
	}
	t, _, err := shard.ReadOwners(rctx, obs, ns, p)
	return t, p, err
}

// ownedBy returns the partitions member owns, with their epochs.
func ownedBy(ctx context.Context, obs *clientv3.Client, ns string, p int, member string) (map[int]int64, error) {
	t, _, err := shard.ReadOwners(ctx, obs, ns, p)
	if err != nil {
		return nil, err
	}
	out := map[int]int64{}
	for part, o := range t {
		if o.Member == member {
			out[part] = o.Epoch
		}
	}
	return out, nil
}

// waitMoved polls the owner keys every 5 ms until every partition of old
// has an owner other than victim with a newer epoch, and returns the
// time since killed.
func waitMoved(ctx context.Context, obs *clientv3.Client, ns string, p int, old map[int]int64, victim string, killed time.Time, timeout time.Duration) (time.Duration, error) {
	last := "no answer from etcd"
	for {
		t, _, err := shard.ReadOwners(ctx, obs, ns, p)
		if err == nil {
			moved := 0
			for part, epoch := range old {
				if o := t[part]; o.Member != "" && o.Member != victim && o.Epoch > epoch {
					moved++
				}
			}
			if moved == len(old) {
				return time.Since(killed), nil
			}
			last = fmt.Sprintf("%d of the killed member's %d partitions owned again", moved, len(old))
		}
		if time.Since(killed) > timeout {
			return 0, fmt.Errorf("not owned again %v after the kill: %s", timeout, last)
		}
		sleep(ctx, 5*time.Millisecond)
		if ctx.Err() != nil {
			return 0, ctx.Err()
		}
	}
}

// fireWatch records when each run key of a namespace was created.
type fireWatch struct {
	cancel context.CancelFunc
	done   chan struct{}

	mu      sync.Mutex
	created map[string]time.Time // run ID → when the watch saw its creation
	changed chan struct{}
}

func watchFires(obs *clientv3.Client, ns string, from int64) *fireWatch {
	ctx, cancel := context.WithCancel(context.Background())
	w := &fireWatch{cancel: cancel, done: make(chan struct{}), created: map[string]time.Time{}, changed: make(chan struct{})}
	prefix := store.Keys{NS: ns}.AllRunsPrefix()
	go func() {
		defer close(w.done)
		rev := from + 1
		for ctx.Err() == nil {
			for wr := range obs.Watch(ctx, prefix, clientv3.WithPrefix(), clientv3.WithRev(rev)) {
				if wr.Err() != nil {
					break
				}
				now := time.Now()
				w.mu.Lock()
				for _, ev := range wr.Events {
					rev = ev.Kv.ModRevision + 1
					if ev.Type != clientv3.EventTypePut || ev.Kv.CreateRevision != ev.Kv.ModRevision {
						continue
					}
					var r api.Run
					if json.Unmarshal(ev.Kv.Value, &r) == nil {
						w.created[r.ID] = now
					}
				}
				close(w.changed)
				w.changed = make(chan struct{})
				w.mu.Unlock()
			}
			sleep(ctx, 100*time.Millisecond)
		}
	}()
	return w
}

func (w *fireWatch) stop() {
	w.cancel()
	<-w.done
}

// waitAll waits until every run of ids was created and returns when the
// last one was; an error after deadline.
func (w *fireWatch) waitAll(ctx context.Context, ids []string, deadline time.Time) (time.Time, error) {
	for {
		w.mu.Lock()
		var last time.Time
		missing := 0
		for _, id := range ids {
			at, ok := w.created[id]
			if !ok {
				missing++
			}
			if at.After(last) {
				last = at
			}
		}
		ch := w.changed
		w.mu.Unlock()
		if missing == 0 {
			return last, nil
		}
		t := time.NewTimer(time.Until(deadline))
		select {
		case <-ch:
			t.Stop()
		case <-t.C:
			return time.Time{}, fmt.Errorf("%d of %d triggered runs not fired by the deadline", missing, len(ids))
		case <-ctx.Done():
			t.Stop()
			return time.Time{}, ctx.Err()
		}
	}
}
