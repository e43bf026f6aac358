package scale

import (
	"bufio"
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
	"sync/atomic"
	"syscall"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/jobfleet/jobfleet/api"
	"github.com/jobfleet/jobfleet/auth"
	"github.com/jobfleet/jobfleet/bench/child"
	"github.com/jobfleet/jobfleet/internal/etcdserver"
)

// member is one `jobfleet orchestrator` process; restarts keep its ID and
// port. Its child.Process's Name is the ID; its Log is appended to by
// every incarnation.
type member struct {
	child.Process
	id   string
	addr string // host:port of its HTTP API
	args []string
}

func (m *member) url() string { return "http://" + m.addr }

// start starts a new incarnation of m; the previous one must have exited.
func (m *member) start(binary string) error {
	if err := m.Start(binary, m.args); err != nil {
		return fmt.Errorf("scale: %w", err)
	}
	return nil
}

// fleet is one measurement's etcd and orchestrators, and the bench's
// clients of them.
type fleet struct {
	cfg     Config
	dir     string
	ns      string
	etcd    *etcdserver.Server
	client  *clientv3.Client
	http    *http.Client
	members []*member
	next    atomic.Int64 // round robin over members for API calls
}

// startFleet starts an etcd (fsync as configured) in dir and members
// orchestrator processes, and waits until every one is ready.
func startFleet(ctx context.Context, cfg Config, dir string, members int) (f *fleet, err error) {
	f = &fleet{cfg: cfg, dir: dir, ns: "/jobfleet-scale/"}
	defer func() {
		if err != nil {
			f.stop()
		}
	}()
	ec := etcdserver.Config{Dir: filepath.Join(dir, "etcd"), NoFsync: !cfg.Fsync, QuotaBackendBytes: cfg.Quota}
	if cfg.PortBase > 0 {
		ec.ClientAddr = "127.0.0.1:" + strconv.Itoa(cfg.PortBase)
		ec.PeerAddr = "127.0.0.1:" + strconv.Itoa(cfg.PortBase+1)
	}
	if f.etcd, err = etcdserver.Start(ec); err != nil {
		return f, fmt.Errorf("scale: start etcd: %w", err)
	}
	f.client, err = clientv3.New(clientv3.Config{Endpoints: f.etcd.Endpoints(), DialTimeout: 5 * time.Second, MaxCallRecvMsgSize: 256 << 20})
	if err != nil {
		return f, fmt.Errorf("scale: etcd client: %w", err)
	}
	cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	adm, _, err := auth.NewStore(f.client, f.ns, nil).Create(cctx, api.CreateRequest{Role: api.RoleAdmin, Description: "bench scale"}, "")
	cancel()
	if err != nil {
		return f, fmt.Errorf("scale: admin credential: %w", err)
	}
	tr := &http.Transport{MaxIdleConnsPerHost: 64, MaxConnsPerHost: 128}
	f.http = &http.Client{Timeout: 2 * time.Minute, Transport: &auth.BearerTransport{Token: adm.Secret, Base: tr}}
	if err := os.MkdirAll(filepath.Join(dir, "logs"), 0o755); err != nil {
		return f, err
	}
	for i := range members {
		m := &member{id: fmt.Sprintf("orch-%d", i+1)}
		m.Name = m.id
		if cfg.PortBase > 0 {
			m.addr = "127.0.0.1:" + strconv.Itoa(cfg.PortBase+10+i)
		} else if m.addr, err = etcdserver.FreeAddr(); err != nil {
			return f, err
		}
		m.Log = filepath.Join(dir, "logs", m.id+".log")
		m.args = []string{"orchestrator",
			"--etcd-endpoints=" + strings.Join(f.etcd.Endpoints(), ","),
			"--listen=" + m.addr,
			"--id=" + m.id,
			"--namespace=" + f.ns,
			// The bench is one credential sending thousands of requests
			// per second: the per-credential rate limit is lifted.
			"--api-rate=-1",
			"--log-format=json",
			"--log-level=warn",
		}
		if cfg.Partitions > 0 {
			m.args = append(m.args, "--partitions="+strconv.Itoa(cfg.Partitions))
		}
		if cfg.LeaseTTL > 0 {
			m.args = append(m.args, "--lease-ttl="+cfg.LeaseTTL.String())
		}
		f.members = append(f.members, m)
		if err := m.start(cfg.Binary); err != nil {
			return f, err
		}
	}
	if _, err := f.waitReady(ctx, "", 2*time.Minute); err != nil {
		return f, err
	}
	return f, nil
}

// stop stops the members, the client and etcd. Idempotent.
func (f *fleet) stop() {
	f.stopMembers()
	if f.client != nil {
		f.client.Close()
		f.client = nil
	}
	if f.etcd != nil {
		f.etcd.Close()
		f.etcd = nil
	}
}

// stopMembers stops the members: SIGTERM, then SIGKILL after 10 s.
func (f *fleet) stopMembers() {
	var wg sync.WaitGroup
	for _, m := range f.members {
		wg.Go(func() { m.Signal(syscall.SIGTERM, 10*time.Second) })
	}
	wg.Wait()
}

// live returns the members whose process runs.
func (f *fleet) live() []*member {
	var out []*member
	for _, m := range f.members {
		if m.PID() != 0 {
			out = append(out, m)
		}
	}
	return out
}

// pick returns a live member for an API call, round robin.
func (f *fleet) pick() *member {
	live := f.live()
	if len(live) == 0 {
		return f.members[0]
	}
	return live[int(f.next.Add(1))%len(live)]
}

// errStatus is a reply with an unexpected HTTP status.
type errStatus struct {
	code int
	body string
}

func (e *errStatus) Error() string { return fmt.Sprintf("HTTP %d: %s", e.code, e.body) }

// do sends a request with a JSON body (nil: none) to base+path and decodes
// a 2xx reply into out (nil: discarded). Other statuses are *errStatus.
func (f *fleet) do(ctx context.Context, method, base, path string, body, out any) error {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, base+path, rd)
	if err != nil {
		return err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := f.http.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 2048))
		return &errStatus{code: resp.StatusCode, body: strings.TrimSpace(string(b))}
	}
	if out == nil {
		_, err = io.Copy(io.Discard, resp.Body)
		return err
	}
	return json.NewDecoder(resp.Body).Decode(out)
}

// retryable reports whether a request may be sent again: the member was
// busy, not ready, or gone (a restart), not a refusal of the request.
func retryable(err error) bool {
	var st *errStatus
	if errors.As(err, &st) {
		return st.code == http.StatusTooManyRequests || st.code == http.StatusServiceUnavailable ||
			st.code == http.StatusBadGateway || st.code == http.StatusGatewayTimeout
	}
	var ne net.Error
	return errors.As(err, &ne) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.ECONNRESET)
}

// call is do on a live member, sent again (on another member, after a
// pause) while the error is retryable, up to a minute. It returns the
// number of retries with the error.
func (f *fleet) call(ctx context.Context, method, path string, body, out any) (int, error) {
	deadline := time.Now().Add(time.Minute)
	for retries := 0; ; retries++ {
		err := f.do(ctx, method, f.pick().url(), path, body, out)
		if err == nil || !retryable(err) || time.Now().After(deadline) || ctx.Err() != nil {
			return retries, err
		}
		select {
		case <-ctx.Done():
			return retries, ctx.Err()
		case <-time.After(time.Duration(min(retries+1, 10)) * 20 * time.Millisecond):
		}
	}
}

// ready reports whether m answers 200 on /readyz.
func (f *fleet) ready(ctx context.Context, m *member) bool {
	return f.do(ctx, http.MethodGet, m.url(), "/readyz", nil, nil) == nil
}

// waitReady waits until every live member is ready and the partition table
// (read from one of them) gives every partition an owner that is live and
// not except. It returns when that was first seen.
func (f *fleet) waitReady(ctx context.Context, except string, timeout time.Duration) (time.Time, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var why string
	for {
		if ok, reason := f.settled(ctx, except); ok {
			return time.Now(), nil
		} else {
			why = reason
		}
		select {
		case <-ctx.Done():
			return time.Time{}, fmt.Errorf("scale: fleet not ready after %v: %s", timeout, why)
		case <-time.After(25 * time.Millisecond):
		}
	}
}

// settled is one look of waitReady.
func (f *fleet) settled(ctx context.Context, except string) (bool, string) {
	live := map[string]bool{}
	for _, m := range f.live() {
		if m.id == except {
			continue
		}
		if !f.ready(ctx, m) {
			return false, m.id + " not ready"
		}
		live[m.id] = true
	}
	owned, err := f.owners(ctx)
	if err != nil {
		return false, err.Error()
	}
	for p, o := range owned {
		if !live[o] {
			return false, fmt.Sprintf("partition %d owned by %q", p, o)
		}
	}
	return true, ""
}

// owners reads the partition table from a live member: the owner of each
// partition ("" for none).
func (f *fleet) owners(ctx context.Context) ([]string, error) {
	var t api.PartitionTable
	if err := f.do(ctx, http.MethodGet, f.pick().url(), "/v1/cluster/partitions", nil, &t); err != nil {
		return nil, err
	}
	out := make([]string, len(t.Rows))
	for i, r := range t.Rows {
		out[i] = r.Owner
	}
	return out, nil
}

// heapLive returns m's Go heap live at its last garbage collection, in
// bytes, from its /metrics: the heap goal (go_memstats_next_gc_bytes)
// over 1 + GOGC/100. Unlike the resident set it does not count the
// garbage a collection leaves room for (GOGC=100 lets the heap grow to
// twice what is live before collecting), nor memory the runtime has not
// given back.
func (f *fleet) heapLive(ctx context.Context, m *member) (float64, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, m.url()+"/metrics", nil)
	if err != nil {
		return 0, err
	}
	resp, err := f.http.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return 0, fmt.Errorf("%s /metrics: HTTP %d", m.id, resp.StatusCode)
	}
	goal, gogc := -1.0, -1.0
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		name, value, ok := strings.Cut(sc.Text(), " ")
		if !ok || (name != "go_memstats_next_gc_bytes" && name != "go_gc_gogc_percent") {
			continue
		}
		v, err := strconv.ParseFloat(strings.TrimSpace(value), 64)
		if err != nil {
			return 0, fmt.Errorf("%s /metrics: %s: %w", m.id, name, err)
		}
		if name == "go_gc_gogc_percent" {
			gogc = v
		} else {
			goal = v
		}
	}
	if err := sc.Err(); err != nil {
		return 0, fmt.Errorf("%s /metrics: %w", m.id, err)
	}
	if goal < 0 || gogc <= 0 {
		return 0, fmt.Errorf("%s /metrics: no heap goal or GOGC", m.id)
	}
	return goal / (1 + gogc/100), nil
}

// metrics returns the values of the unlabelled metrics names in m's
// /metrics (absent ones are missing from the map).
func (f *fleet) metrics(ctx context.Context, m *member, names ...string) (map[string]float64, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, m.url()+"/metrics", nil)
	if err != nil {
		return nil, err
	}
	resp, err := f.http.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("%s /metrics: HTTP %d", m.id, resp.StatusCode)
	}
	out := map[string]float64{}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		name, value, ok := strings.Cut(sc.Text(), " ")
		if !ok || !slices.Contains(names, name) {
			continue
		}
		v, err := strconv.ParseFloat(strings.TrimSpace(value), 64)
		if err != nil {
			return nil, fmt.Errorf("%s /metrics: %s: %w", m.id, name, err)
		}
		out[name] = v
	}
	return out, sc.Err()
}

// standbyLoads returns the partition loads the live members with a warm
// standby served from their copies (warm) and from etcd (cold) since they
// started; 0 and 0 without a standby or if a member does not answer.
func (f *fleet) standbyLoads(ctx context.Context) (warm, cold float64) {
	const w, c = `jobfleet_standby_loads_total{source="warm"}`, `jobfleet_standby_loads_total{source="cold"}`
	for _, m := range f.live() {
		v, err := f.metrics(ctx, m, w, c)
		if err != nil {
			return 0, 0
		}
		warm, cold = warm+v[w], cold+v[c]
	}
	return warm, cold
}

// waitLoaded waits until no member has a partition waiting for its load
// or loading, nor a standby copy waiting for its first read or being read
// (jobfleet_dispatch_loads_waiting, _in_flight and
// jobfleet_standby_reading are 0, or absent on members that do not report
// them).
func (f *fleet) waitLoaded(ctx context.Context, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	for {
		pending := 0.0
		var err error
		for _, m := range f.live() {
			var v map[string]float64
			if v, err = f.metrics(ctx, m, "jobfleet_dispatch_loads_waiting", "jobfleet_dispatch_loads_in_flight", "jobfleet_standby_reading"); err != nil {
				break
			}
			pending += v["jobfleet_dispatch_loads_waiting"] + v["jobfleet_dispatch_loads_in_flight"] + v["jobfleet_standby_reading"]
		}
		if err == nil && pending == 0 {
			return nil
		}
		if err == nil {
			f.cfg.Progress.Update("  %v partitions waiting to load or loading", pending)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("partitions not loaded after %v: %w", timeout, ctx.Err())
		case <-time.After(250 * time.Millisecond):
		}
	}
}

// rss returns the resident set size of m's process in bytes (Linux; 0
// elsewhere or when it does not run).
func (m *member) rss() int64 {
	pid := m.PID()
	if pid == 0 {
		return 0
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	for l := range strings.SplitSeq(string(b), "\n") {
		if rest, ok := strings.CutPrefix(l, "VmRSS:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")), 10, 64)
			if err == nil {
				return kb << 10
			}
		}
	}
	return 0
}

// cpuSeconds returns the CPU time (user + system) process pid has used
// ("self" for this process), from /proc (Linux; 0 elsewhere). Clock ticks
// are taken as 100 per second, Linux's USER_HZ.
func cpuSeconds(pid string) float64 {
	b, err := os.ReadFile("/proc/" + pid + "/stat")
	if err != nil {
		return 0
	}
	// The command name (field 2) is in parentheses and may hold spaces:
	// fields are counted after its closing one.
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0
	}
	f := strings.Fields(s[i+1:])
	if len(f) < 13 {
		return 0
	}
	utime, err1 := strconv.ParseFloat(f[11], 64)
	stime, err2 := strconv.ParseFloat(f[12], 64)
	if err1 != nil || err2 != nil {
		return 0
	}
	return (utime + stime) / 100
}

// cpu returns the CPU seconds used so far by the running members together
// and by this process (the embedded etcd, and the bench's own clients).
func (f *fleet) cpu() (members, self float64) {
	for _, m := range f.members {
		if pid := m.PID(); pid != 0 {
			members += cpuSeconds(strconv.Itoa(pid))
		}
	}
	return members, cpuSeconds("self")
}
