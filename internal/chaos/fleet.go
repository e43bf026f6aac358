package chaos

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/jobfleet/jobfleet/api"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/jobfleet/jobfleet/auth"
	"github.com/jobfleet/jobfleet/dispatch/placement"
	"github.com/jobfleet/jobfleet/internal/etcdserver"
	"github.com/jobfleet/jobfleet/shard"
)

// orchProc is one `jobfleet orchestrator` process. Restarts keep its ID
// and, when it is free, its port.
type orchProc struct {
	*process
	id         string
	addr       string   // host:port of its HTTP API
	host       *netHost // nil on loopback
	offsetFile string   // its clock offset file (see internal/skewclock)
}

func (o *orchProc) url() string { return "http://" + o.addr }

// workerProc is one `jobfleet worker` process. Each incarnation has its own
// worker ID, "w<index>.<incarnation>", so that attempts name the process
// that held them.
type workerProc struct {
	*process
	index int
	host  *netHost // nil on loopback
}

// incarnationID returns the worker ID of incarnation n.
func (w *workerProc) incarnationID(n int) string { return fmt.Sprintf("w%d.%d", w.index, n) }

// WorkerLife is one worker incarnation's lifetime, and what placement
// knows of it: its labels (--labels) and its credential.
type WorkerLife struct {
	ID      string    `json:"id"`
	Started time.Time `json:"started"`
	// Labels are the incarnation's --labels; Credential the ID of the
	// credential it ran with.
	Labels     map[string]string `json:"labels,omitempty"`
	Credential string            `json:"credential,omitempty"`
	// Ended is when the process exited (zero if it ran to the end of the
	// run); Killed says it was SIGKILLed then.
	Ended  time.Time `json:"ended,omitzero"`
	Killed bool      `json:"killed,omitempty"`
}

// fleet is the fleet's processes and the harness's clients of them.
type fleet struct {
	cfg    Config
	ns     string
	etcd   *etcdCluster
	client *clientv3.Client // the harness's etcd client
	http   *http.Client
	hosts  *hostNetwork // nil on loopback
	lg     *zap.Logger

	orchs   []*orchProc
	workers []*workerProc

	// poolCreds are the workers' credentials, one per pool, each limited
	// to its pool's labels (jobfleet token create --worker-labels): the
	// file holding its token (--token-file), its ID and its selector. The
	// harness's own API calls (http) send an admin credential.
	poolCreds map[string]poolCred
	// noisyOperator and noisyWorker are the noisy tenant's credentials,
	// scoped to noisyPrefix (noisy.go); noisyHTTP sends its requests
	// (with no credential of its own).
	noisyOperator, noisyWorker string
	noisyHTTP                  *http.Client

	mu      sync.Mutex // guards the fields below
	lives   map[string]*WorkerLife
	nextAPI int // round robin over orchestrators for API calls
	// avoid are orchestrators the workload's API calls avoid while a
	// fault impairs them (cut from etcd, clock skewed), by ID.
	avoid map[string]bool
}

func newFleet(cfg Config, ns string, etcd *etcdCluster, client *clientv3.Client, hosts *hostNetwork, lg *zap.Logger) *fleet {
	tr := &http.Transport{MaxIdleConnsPerHost: 8}
	if hosts != nil {
		ctl := hosts.host(hostCtl)
		tr.DialContext = ctl.dial
	}
	noisyTr := tr.Clone()
	return &fleet{
		cfg: cfg, ns: ns, etcd: etcd, client: client, hosts: hosts, lg: lg,
		http:      &http.Client{Timeout: 3 * time.Second, Transport: tr},
		noisyHTTP: &http.Client{Timeout: 10 * time.Second, Transport: noisyTr},
		lives:     map[string]*WorkerLife{},
		avoid:     map[string]bool{},
	}
}

// setAvoid marks orchestrator id as one the workload's API calls avoid
// (or not).
func (f *fleet) setAvoid(id string, avoid bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if avoid {
		f.avoid[id] = true
	} else {
		delete(f.avoid, id)
	}
}

func (f *fleet) logPath(name string) string { return filepath.Join(f.cfg.Dir, "logs", name+".log") }

// poolCred is the worker credential of one pool.
type poolCred struct {
	file, id, selector string
}

// makeCredentials stores an admin credential, which the harness's API
// calls send, and a worker credential per pool of workers, limited to the
// pool's labels, which the pool's workers read from a file (0600) of the
// run's directory.
func (f *fleet) makeCredentials(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	s := auth.NewStore(f.client, f.ns, nil)
	adm, _, err := s.Create(ctx, api.CreateRequest{Role: api.RoleAdmin, Description: "chaos harness"}, "")
	if err != nil {
		return fmt.Errorf("admin credential: %w", err)
	}
	f.poolCreds = map[string]poolCred{}
	for i := range f.cfg.Workers {
		pool := workerPool(i+1, f.cfg.Workers)
		if _, ok := f.poolCreds[pool]; ok {
			continue
		}
		sel := "pool=" + pool
		wrk, _, err := s.Create(ctx, api.CreateRequest{Role: api.RoleWorker, WorkerLabels: sel, Description: "chaos workers of pool " + pool}, "")
		if err != nil {
			return fmt.Errorf("worker credential: %w", err)
		}
		file := filepath.Join(f.cfg.Dir, "worker-"+pool+".token")
		if err := os.WriteFile(file, []byte(wrk.Secret+"\n"), 0o600); err != nil {
			return err
		}
		f.poolCreds[pool] = poolCred{file: file, id: wrk.ID, selector: sel}
	}
	if f.cfg.NoisyTenant {
		op, _, err := s.Create(ctx, api.CreateRequest{Role: api.RoleOperator, Prefix: noisyPrefix, Description: "chaos noisy tenant"}, "")
		if err != nil {
			return fmt.Errorf("noisy operator credential: %w", err)
		}
		nw, _, err := s.Create(ctx, api.CreateRequest{Role: api.RoleWorker, Prefix: noisyPrefix, Description: "chaos noisy tenant's worker"}, "")
		if err != nil {
			return fmt.Errorf("noisy worker credential: %w", err)
		}
		f.noisyOperator, f.noisyWorker = op.Secret, nw.Secret
	}
	f.http.Transport = &auth.BearerTransport{Token: adm.Secret, Base: f.http.Transport}
	return nil
}

// workerCredentials returns the worker credentials' label selectors, by
// credential ID.
func (f *fleet) workerCredentials() map[string]string {
	out := map[string]string{}
	for _, c := range f.poolCreds {
		out[c.id] = c.selector
	}
	return out
}

// orchArgs returns the command line of o listening on addr.
func (f *fleet) orchArgs(o *orchProc) []string {
	return []string{
		"orchestrator",
		"--etcd-endpoints=" + strings.Join(f.etcd.endpoints(), ","),
		"--listen=" + o.addr,
		"--id=" + o.id,
		"--namespace=" + f.ns,
		"--lease-ttl=" + f.cfg.LeaseTTL.String(),
		"--run-lease=" + f.cfg.RunLease.String(),
		"--partitions=" + strconv.Itoa(f.cfg.Partitions),
		"--test-clock-offset-file=" + o.offsetFile,
		"--log-format=json",
		// Each credential may write 1 MiB a second through each member
		// (the default, sized from etcd's 2 GiB quota, is 25.6 MiB/s:
		// more than this machine's etcd writes, so a flooder would take
		// most of it); the noisy tenant floods at that. History is
		// compacted on the clock only: the harness's history watch must
		// never fall behind a compaction (one by history size keeps a
		// second).
		"--api-write-bytes=" + strconv.Itoa(writeBytes),
		"--compaction-bytes=1GiB",
	}
}

// writeBytes is the orchestrators' --api-write-bytes.
const writeBytes = 1 << 20

// startOrchestrators starts the configured number of orchestrators.
func (f *fleet) startOrchestrators() error {
	if err := os.MkdirAll(filepath.Join(f.cfg.Dir, "clock"), 0o755); err != nil {
		return err
	}
	for i := range f.cfg.Orchestrators {
		o := &orchProc{id: fmt.Sprintf("orch-%d", i+1)}
		o.offsetFile = filepath.Join(f.cfg.Dir, "clock", o.id)
		if f.hosts != nil {
			o.host = f.hosts.host(o.id)
			o.addr = net.JoinHostPort(o.host.ip(), "8080")
		} else {
			addr, err := etcdserver.FreeAddr()
			if err != nil {
				return err
			}
			o.addr = addr
		}
		o.process = newProcess(o.id, f.logPath(o.id), nil)
		if o.host != nil {
			o.wrap = o.host.wrap()
		}
		f.orchs = append(f.orchs, o)
		if err := f.startOrch(o); err != nil {
			return err
		}
	}
	return nil
}

// startOrch starts (or restarts) o and waits until its API answers. If its
// port was taken meanwhile, it moves to another.
func (f *fleet) startOrch(o *orchProc) error {
	for attempt := 1; ; attempt++ {
		o.setArgs(f.orchArgs(o))
		if err := o.start(f.cfg.Binary); err != nil {
			return err
		}
		deadline := time.Now().Add(20 * time.Second)
		for o.running() && time.Now().Before(deadline) {
			if code, _ := f.get(o.url()+"/healthz", nil); code == http.StatusOK {
				return nil
			}
			time.Sleep(50 * time.Millisecond)
		}
		if o.running() {
			return fmt.Errorf("%s: API not answering 20s after start", o.id)
		}
		if attempt < 3 && o.host == nil && logTail(o.logPath, 4096, "address already in use") {
			addr, err := etcdserver.FreeAddr()
			if err != nil {
				return err
			}
			f.lg.Warn("orchestrator's port was taken; moving it", zap.String("member", o.id), zap.String("from", o.addr), zap.String("to", addr))
			o.addr = addr
			continue
		}
		return fmt.Errorf("%s exited at start-up: %s", o.id, o.exitState())
	}
}

// logTail reports whether the last n bytes of the file at path contain s.
func logTail(path string, n int64, s string) bool {
	fh, err := os.Open(path)
	if err != nil {
		return false
	}
	defer fh.Close()
	st, err := fh.Stat()
	if err != nil {
		return false
	}
	off := max(st.Size()-n, 0)
	b := make([]byte, st.Size()-off)
	if _, err := fh.ReadAt(b, off); err != nil && !errors.Is(err, io.EOF) {
		return false
	}
	return bytes.Contains(b, []byte(s))
}

// startWorkers starts the configured number of workers.
func (f *fleet) startWorkers() error {
	for i := range f.cfg.Workers {
		w := &workerProc{index: i + 1}
		name := fmt.Sprintf("worker-%d", i+1)
		w.process = newProcess(name, f.logPath(name), nil)
		if f.hosts != nil {
			w.host = f.hosts.host(name)
			w.wrap = w.host.wrap()
		}
		f.workers = append(f.workers, w)
		if err := f.startWorker(w); err != nil {
			return err
		}
	}
	return nil
}

// startWorker starts a new incarnation of w.
func (f *fleet) startWorker(w *workerProc) error {
	id := w.incarnationID(w.Incarnation() + 1)
	labels := workerLabels(w.index, f.cfg.Workers)
	cred := f.poolCreds[labels["pool"]]
	w.setArgs([]string{
		"worker",
		"--etcd-endpoints=" + strings.Join(f.etcd.endpoints(), ","),
		"--namespace=" + f.ns,
		"--id=" + id,
		"--concurrency=" + strconv.Itoa(f.cfg.WorkerConcurrency),
		"--token-file=" + cred.file,
		"--labels=" + placement.FormatLabels(labels),
		"--poll-wait=2s",
		"--http-allow=" + f.recorderHost(), // the recorder the jobs call: on loopback, or on its host
		"--shutdown-timeout=" + (f.cfg.SlowFor + 2*time.Second).String(),
		"--log-format=json",
	})
	if err := w.start(f.cfg.Binary); err != nil {
		return err
	}
	life := &WorkerLife{ID: id, Started: time.Now(), Labels: labels, Credential: cred.id}
	f.mu.Lock()
	f.lives[id] = life
	f.mu.Unlock()
	inc := w.Incarnation()
	_, done := w.state()
	go func() {
		<-done
		// This incarnation's exit: the process may have been started
		// again (a rolling restart) before this goroutine ran.
		ended := w.exitedAtOf(inc)
		f.mu.Lock()
		life.Ended = ended
		f.mu.Unlock()
	}()
	return nil
}

// recorderHost returns the address the recorder listens on.
func (f *fleet) recorderHost() string {
	if f.hosts != nil {
		return f.hosts.host(hostRecorder).ip()
	}
	return "127.0.0.1"
}

// killWorker SIGKILLs w and records it.
func (f *fleet) killWorker(w *workerProc) time.Time {
	id := w.incarnationID(w.Incarnation())
	f.mu.Lock()
	if l := f.lives[id]; l != nil {
		l.Killed = true
	}
	f.mu.Unlock()
	return w.kill()
}

// workerLives returns every worker incarnation's lifetime.
func (f *fleet) workerLives() map[string]WorkerLife {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := map[string]WorkerLife{}
	for id, l := range f.lives {
		out[id] = *l
	}
	return out
}

// workerByID returns the worker process running incarnation id, if it
// runs.
func (f *fleet) workerByID(id string) *workerProc {
	for _, w := range f.workers {
		if w.running() && w.incarnationID(w.Incarnation()) == id {
			return w
		}
	}
	return nil
}

// liveOrchs returns the orchestrators running and not paused.
func (f *fleet) liveOrchs() []*orchProc {
	var out []*orchProc
	for _, o := range f.orchs {
		if o.live() {
			out = append(out, o)
		}
	}
	return out
}

// apiOrchs returns the live orchestrators the workload's API calls may
// use: those no fault impairs, or every live one if none is left.
func (f *fleet) apiOrchs() []*orchProc {
	live := f.liveOrchs()
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []*orchProc
	for _, o := range live {
		if !f.avoid[o.id] {
			out = append(out, o)
		}
	}
	if len(out) == 0 {
		return live
	}
	return out
}

// stopAll stops workers (gracefully), then orchestrators (gracefully),
// then etcd; whatever does not stop in time is killed.
func (f *fleet) stopAll() {
	var wg sync.WaitGroup
	for _, w := range f.workers {
		wg.Go(func() { w.terminate(f.cfg.SlowFor + 5*time.Second) })
	}
	wg.Wait()
	for _, o := range f.orchs {
		wg.Go(func() { o.terminate(15 * time.Second) })
	}
	wg.Wait()
}

// killAll kills every process the fleet started and closes the API
// client's idle connections. Idempotent.
func (f *fleet) killAll() {
	defer f.http.CloseIdleConnections()
	var wg sync.WaitGroup
	for _, w := range f.workers {
		wg.Go(func() { w.kill() })
	}
	for _, o := range f.orchs {
		wg.Go(func() { o.kill() })
	}
	wg.Wait()
}

// get GETs url and decodes a 200 reply into out, if not nil.
func (f *fleet) get(url string, out any) (int, error) {
	resp, err := f.http.Get(url)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK || out == nil {
		_, _ = io.Copy(io.Discard, resp.Body)
		return resp.StatusCode, nil
	}
	return resp.StatusCode, json.NewDecoder(resp.Body).Decode(out)
}

// apiResult is the outcome of an API call made through any orchestrator.
type apiResult struct {
	Status int
	Body   []byte
	// Ambiguous: some try failed in a way that leaves unknown whether it
	// was applied (a network error after sending, a 5xx).
	Ambiguous bool
	Err       error
}

// api sends a request to the live orchestrators in turn until one gives a
// definite answer (not a network error, not 5xx), or ctx ends.
func (f *fleet) api(ctx context.Context, method, path string, body any) apiResult {
	var payload []byte
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return apiResult{Err: err}
		}
		payload = b
	}
	var res apiResult
	for try := 0; ; try++ {
		orchs := f.apiOrchs()
		if len(orchs) > 0 {
			f.mu.Lock()
			o := orchs[f.nextAPI%len(orchs)]
			f.nextAPI++
			f.mu.Unlock()
			status, rb, err := f.do(ctx, method, o.url()+path, payload)
			switch {
			case err == nil && status < 500:
				res.Status, res.Body, res.Err = status, rb, nil
				return res
			case err != nil:
				res.Err = err
				res.Ambiguous = true // cannot tell whether the request was sent
			default:
				res.Status, res.Body = status, rb
				res.Err = fmt.Errorf("%s %s: status %d: %s", method, path, status, bytes.TrimSpace(rb))
				res.Ambiguous = res.Ambiguous || status != http.StatusServiceUnavailable || !bytes.Contains(rb, []byte("not available on this member yet"))
			}
		}
		select {
		case <-ctx.Done():
			if res.Err == nil {
				res.Err = ctx.Err()
			}
			return res
		case <-time.After(min(time.Duration(try+1)*100*time.Millisecond, time.Second)):
		}
	}
}

func (f *fleet) do(ctx context.Context, method, url string, payload []byte) (int, []byte, error) {
	var rd io.Reader
	if payload != nil {
		rd = bytes.NewReader(payload)
	}
	req, err := http.NewRequestWithContext(ctx, method, url, rd)
	if err != nil {
		return 0, nil, err
	}
	if payload != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := f.http.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	if err != nil {
		return 0, nil, err
	}
	return resp.StatusCode, b, nil
}

// ownerTable reads every partition's owner key and every member's lease
// from etcd (a linearizable read).
func (f *fleet) ownerTable(ctx context.Context) (owners []shard.OwnerInfo, members map[string]int64, err error) {
	// A member cut off from the others fails the read (no leader, or no
	// answer): the next try goes to another member.
	var resp *clientv3.TxnResponse
	for try := 0; try < len(f.etcd.members); try++ {
		rctx, cancel := context.WithTimeout(clientv3.WithRequireLeader(ctx), time.Second)
		resp, err = f.client.Txn(rctx).Then(
			clientv3.OpGet(shard.OwnersPrefix(f.ns), clientv3.WithPrefix()),
			clientv3.OpGet(f.ns+"members/", clientv3.WithPrefix()),
		).Commit()
		cancel()
		if err == nil || ctx.Err() != nil {
			break
		}
	}
	if err != nil {
		return nil, nil, err
	}
	owners = make([]shard.OwnerInfo, f.cfg.Partitions)
	for _, kv := range resp.Responses[0].GetResponseRange().Kvs {
		p, err := strconv.Atoi(strings.TrimPrefix(string(kv.Key), shard.OwnersPrefix(f.ns)))
		if err != nil || p < 0 || p >= len(owners) {
			continue
		}
		owners[p] = shard.OwnerInfo{Member: string(kv.Value), Epoch: kv.CreateRevision, Lease: kv.Lease}
	}
	members = map[string]int64{}
	for _, kv := range resp.Responses[1].GetResponseRange().Kvs {
		var m api.Member
		if json.Unmarshal(kv.Value, &m) == nil {
			members[m.ID] = kv.Lease
		}
	}
	return owners, members, nil
}

// partitionsOf returns the partitions member owns, with their epochs.
func (f *fleet) partitionsOf(ctx context.Context, member string) (map[int]int64, error) {
	owners, _, err := f.ownerTable(ctx)
	if err != nil {
		return nil, err
	}
	out := map[int]int64{}
	for p, o := range owners {
		if o.Member == member {
			out[p] = o.Epoch
		}
	}
	return out, nil
}

// allPartitions returns every partition with its current epoch, or with
// epoch 0 if etcd cannot be read.
func (f *fleet) allPartitions(ctx context.Context) map[int]int64 {
	out := map[int]int64{}
	owners, _, err := f.ownerTable(ctx)
	for p := range f.cfg.Partitions {
		out[p] = 0
		if err == nil {
			out[p] = owners[p].Epoch
		}
	}
	return out
}

// movedOn reports whether every partition in old has an owner whose epoch
// is above the one listed: ownership has moved on from the fault's victim
// (a new owner key, by someone else or by the victim's next incarnation).
func movedOn(owners []shard.OwnerInfo, old map[int]int64) bool {
	for p, e := range old {
		if owners[p].Member == "" || owners[p].Epoch <= e {
			return false
		}
	}
	return true
}

// healthy reports whether the fleet works as a whole: etcd serves, every
// partition is owned under its owner's current registration (its member
// key's lease), and every live orchestrator is ready.
func (f *fleet) healthy(ctx context.Context) (bool, string) { return f.healthyWithout(ctx, nil) }

// healthyWithout is healthy for the fleet without the orchestrators in
// cut (on the losing side of a partition): they may neither own a
// partition nor need to be ready.
func (f *fleet) healthyWithout(ctx context.Context, cut map[string]bool) (bool, string) {
	owners, members, err := f.ownerTable(ctx)
	if err != nil {
		return false, "etcd: " + err.Error()
	}
	for p, o := range owners {
		if o.Member == "" {
			return false, fmt.Sprintf("partition %d has no owner", p)
		}
		if cut[o.Member] {
			return false, fmt.Sprintf("partition %d is still owned by %s, which is cut off", p, o.Member)
		}
		if lease, ok := members[o.Member]; !ok || lease != o.Lease {
			return false, fmt.Sprintf("partition %d is owned by %s under a lease that is not its registration's", p, o.Member)
		}
	}
	for _, o := range f.liveOrchs() {
		if cut[o.id] {
			continue
		}
		if code, err := f.get(o.url()+"/readyz", nil); code != http.StatusOK {
			return false, fmt.Sprintf("%s not ready: %d %v", o.id, code, err)
		}
	}
	return true, ""
}

// settled reports whether every orchestrator runs, is registered and
// ready, and every partition is owned by its ring target.
func (f *fleet) settled(ctx context.Context) (bool, string) {
	var ids []string
	for _, o := range f.orchs {
		if !o.live() {
			return false, o.id + " is not running"
		}
		ids = append(ids, o.id)
	}
	owners, members, err := f.ownerTable(ctx)
	if err != nil {
		return false, "etcd: " + err.Error()
	}
	if len(members) != len(ids) {
		return false, fmt.Sprintf("%d members registered, want %d", len(members), len(ids))
	}
	slices.Sort(ids)
	ring, err := shard.NewRing(ids, shard.DefaultRingConfig(f.cfg.Partitions))
	if err != nil {
		return false, err.Error()
	}
	for p, o := range owners {
		if o.Member != ring.Target(p) {
			return false, fmt.Sprintf("partition %d owned by %q, target %s", p, o.Member, ring.Target(p))
		}
	}
	return f.healthy(ctx)
}

// waitFor polls cond every interval until it holds, ctx ends or timeout
// passes; it returns when cond held (zero time if it did not) and cond's
// last reason.
func waitFor(ctx context.Context, timeout, interval time.Duration, cond func() (bool, string)) (time.Time, string) {
	deadline := time.Now().Add(timeout)
	for {
		ok, why := cond()
		if ok {
			return time.Now(), ""
		}
		if ctx.Err() != nil || time.Now().After(deadline) {
			return time.Time{}, why
		}
		select {
		case <-ctx.Done():
		case <-time.After(interval):
		}
	}
}
