package items

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/jobfleet/jobfleet/api"
	"github.com/jobfleet/jobfleet/auth"
	"github.com/jobfleet/jobfleet/bench"
	"github.com/jobfleet/jobfleet/bench/child"
	"github.com/jobfleet/jobfleet/client"
	"github.com/jobfleet/jobfleet/dispatch/worker"
	"github.com/jobfleet/jobfleet/internal/etcdserver"
	"github.com/jobfleet/jobfleet/shard"
	"github.com/jobfleet/jobfleet/store"
)

const namespace = "/jobfleet-items/"

// fleet is the benchmark's etcd, orchestrator, workers and endpoint.
type fleet struct {
	cfg     Config
	etcd    *bench.Etcd
	client  *clientv3.Client
	api     *client.Client
	url     string // the orchestrator's API
	orch    *child.Process
	workers []*child.Process
	rec     *receiver
	srv     *http.Server
	srvDone chan struct{}
}

func startFleet(ctx context.Context, cfg Config) (f *fleet, err error) {
	f = &fleet{cfg: cfg}
	defer func() {
		if err != nil {
			f.stop()
		}
	}()
	if err := os.MkdirAll(filepath.Join(cfg.Dir, "logs"), 0o755); err != nil {
		return f, err
	}
	if f.etcd, err = bench.StartEtcd(cfg.Fsync); err != nil {
		return f, err
	}
	if f.client, err = clientv3.New(clientv3.Config{Endpoints: f.etcd.Endpoints(), DialTimeout: 5 * time.Second}); err != nil {
		return f, err
	}
	creds := auth.NewStore(f.client, namespace, nil)
	cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	adm, _, err := creds.Create(cctx, api.CreateRequest{Role: api.RoleAdmin, Description: "bench items"}, "")
	if err == nil {
		var wk api.Created
		wk, _, err = creds.Create(cctx, api.CreateRequest{Role: api.RoleWorker, Description: "bench items workers"}, "")
		if err == nil {
			err = os.WriteFile(filepath.Join(cfg.Dir, "worker.token"), []byte(wk.Secret+"\n"), 0o600)
		}
	}
	cancel()
	if err != nil {
		return f, fmt.Errorf("items: credentials: %w", err)
	}

	// The endpoint the items' executor calls.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return f, err
	}
	f.rec = &receiver{itemTime: cfg.ItemTime, jobs: map[string]*jobExecs{}}
	f.srv = &http.Server{Handler: f.rec, ReadHeaderTimeout: 10 * time.Second}
	f.srvDone = make(chan struct{})
	go func() { defer close(f.srvDone); _ = f.srv.Serve(ln) }()

	addr, err := etcdserver.FreeAddr()
	if err != nil {
		return f, err
	}
	f.url = "http://" + addr
	if f.api, err = client.New(client.Config{Server: f.url, Token: adm.Secret}); err != nil {
		return f, err
	}
	f.orch = &child.Process{Name: "orchestrator", Log: filepath.Join(cfg.Dir, "logs", "orchestrator.log")}
	args := []string{"orchestrator", "--etcd-endpoints=" + f.etcd.Endpoints()[0], "--listen=" + addr, "--id=orch-1", "--namespace=" + namespace,
		"--partitions=" + strconv.Itoa(cfg.Partitions), "--api-rate=-1", "--log-format=json", "--log-level=warn"}
	if cfg.WorkerTTL > 0 {
		args = append(args, "--worker-ttl="+cfg.WorkerTTL.String())
	}
	if err := f.orch.Start(cfg.Binary, args); err != nil {
		return f, err
	}
	if err := f.waitFor(ctx, "the orchestrator to be ready", 2*time.Minute, func() bool { return f.api.Ready(ctx) == nil }); err != nil {
		return f, err
	}
	for i := range cfg.Workers {
		w := &child.Process{Name: fmt.Sprintf("worker-%d", i+1), Log: filepath.Join(cfg.Dir, "logs", fmt.Sprintf("worker-%d.log", i+1))}
		f.workers = append(f.workers, w)
		args := []string{"worker", "--orchestrators=" + f.url, "--token-file=" + filepath.Join(cfg.Dir, "worker.token"),
			"--id=" + w.Name, "--concurrency=" + strconv.Itoa(cfg.Concurrency), "--poll-wait=2s", "--http-allow=127.0.0.1",
			"--log-format=json", "--log-level=warn"}
		if cfg.Pools > 0 {
			args = append(args, "--labels=pool="+poolOf(i, cfg.Pools))
		}
		if err := w.Start(cfg.Binary, args); err != nil {
			return f, err
		}
	}
	f.rec.url = "http://" + ln.Addr().String() + "/item"
	return f, nil
}

func (f *fleet) stop() {
	var wg sync.WaitGroup
	for _, p := range append(f.workers, f.orch) {
		if p != nil {
			wg.Go(func() { p.Signal(syscall.SIGTERM, 10*time.Second) })
		}
	}
	wg.Wait()
	if f.srv != nil {
		f.srv.Close()
		<-f.srvDone
	}
	if f.client != nil {
		f.client.Close()
	}
	if f.etcd != nil {
		f.etcd.Close()
	}
}

// waitFor polls cond every 50ms until it holds, or fails after within.
func (f *fleet) waitFor(ctx context.Context, what string, within time.Duration, cond func() bool) error {
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			return fmt.Errorf("items: no %s within %v", what, within)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
	return nil
}

// liveWorkers returns how many workers the registry lists, -1 if it
// cannot be read.
func (f *fleet) liveWorkers(ctx context.Context) int {
	l, err := f.api.Workers(ctx)
	if err != nil {
		return -1
	}
	return len(l.Workers)
}

// measure runs one scenario: a sharded job created, its run timed until
// final; with kill, one worker killed once half the items succeeded.
func (f *fleet) measure(ctx context.Context, kill bool) (Scenario, error) {
	cfg := f.cfg
	s := Scenario{Name: "all workers"}
	want := cfg.Workers
	if kill {
		s.Name = "one worker killed halfway"
	}
	if err := f.waitFor(ctx, fmt.Sprintf("%d registered workers", want), time.Minute, func() bool { return f.liveWorkers(ctx) == want }); err != nil {
		return s, err
	}
	id := "items-" + map[bool]string{false: "steady", true: "kill"}[kill]
	execs := f.rec.job(id)
	j := api.Job{ID: id, Executor: api.Executor{Type: api.ExecutorHTTP, URL: f.rec.url}, Shards: &api.Shards{Count: cfg.Items},
		Retry: api.RetryPolicy{MaxAttempts: 3, InitialBackoff: api.Duration(100 * time.Millisecond)}, Timeout: api.Duration(time.Minute)}
	cfg.Progress.Step("%s: %d items of %v over %d workers × %d slots", s.Name, cfg.Items, cfg.ItemTime, cfg.Workers, cfg.Concurrency)
	start := time.Now()
	if _, err := f.api.CreateJob(ctx, j); err != nil {
		return s, err
	}
	var killedAt time.Time
	if kill {
		select {
		case <-execs.half(cfg.Items / 2):
		case <-time.After(cfg.Timeout):
			return s, fmt.Errorf("items: half the items not done within %v", cfg.Timeout)
		}
		killedAt = f.workers[0].Signal(syscall.SIGKILL, 10*time.Second)
		s.KilledAt = killedAt.Sub(start)
	}
	var run api.Run
	done := func() bool {
		runs, err := f.api.ListRuns(ctx, id, 1)
		if err != nil || len(runs) == 0 {
			return false
		}
		run = runs[0]
		c := run.Count()
		cfg.Progress.Update("%s: %d/%d items succeeded, %d running", s.Name, c.Succeeded, len(run.Items), c.Running)
		return run.Status.Final()
	}
	if err := f.waitFor(ctx, "final run", cfg.Timeout, done); err != nil {
		return s, err
	}
	s.Took = time.Since(start)
	slots := cfg.Workers * cfg.Concurrency
	s.Ideal = ideal(cfg.Items, slots, cfg.ItemTime)
	st := execs.stats()
	if kill {
		first := cfg.Items / 2
		s.Lost, s.Redone = lostItems(run, f.workers[0].Name, killedAt)
		s.Ideal = ideal(first, slots, cfg.ItemTime) + ideal(cfg.Items-first+s.Lost, slots-cfg.Concurrency, cfg.ItemTime)
	}
	s.Ratio = float64(s.Took) / float64(s.Ideal)
	s.FirstStart = st.first.Sub(start)
	s.Status, s.Succeeded = string(run.Status), run.Count().Succeeded
	s.Executions, s.Repeated = st.executions, st.repeated
	for _, it := range run.Items {
		if len(it.Attempts) > 1 {
			s.Retried++
		}
	}
	if kv, err := f.client.Get(ctx, store.Keys{NS: namespace}.Run(shard.Partition(id, cfg.Partitions), id, run.ScheduledAt)); err == nil && len(kv.Kvs) == 1 {
		s.MaxRunBytes = len(kv.Kvs[0].Value)
	}
	cfg.Progress.Step("%s: %v (ideal %v, ×%.2f), %s", s.Name, s.Took.Round(time.Millisecond), s.Ideal.Round(time.Millisecond), s.Ratio, s.Status)
	return s, nil
}

// receiver is the items' endpoint: it answers each request after
// itemTime and records it by job.
type receiver struct {
	itemTime time.Duration
	url      string

	mu   sync.Mutex // guards jobs
	jobs map[string]*jobExecs
}

// jobExecs are one job's executions.
type jobExecs struct {
	mu       sync.Mutex // guards the fields below
	execs    []execution
	done     int
	halfAt   int
	halfDone chan struct{}
}

type execution struct {
	item       int
	start, end time.Time
	aborted    bool // the worker went away before the answer
}

func (r *receiver) job(id string) *jobExecs {
	r.mu.Lock()
	defer r.mu.Unlock()
	j := r.jobs[id]
	if j == nil {
		j = &jobExecs{}
		r.jobs[id] = j
	}
	return j
}

func (r *receiver) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	_, _ = io.Copy(io.Discard, req.Body)
	id, _ := url.PathUnescape(req.Header.Get(worker.HeaderJobID))
	item, _ := strconv.Atoi(req.Header.Get(worker.HeaderShardIndex))
	e := execution{item: item, start: time.Now()}
	t := time.NewTimer(r.itemTime)
	select {
	case <-t.C:
	case <-req.Context().Done():
		e.aborted = true
	}
	t.Stop()
	e.end = time.Now()
	r.job(id).add(e)
	if !e.aborted {
		w.WriteHeader(http.StatusOK)
	}
}

func (j *jobExecs) add(e execution) {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.execs = append(j.execs, e)
	if !e.aborted {
		j.done++
	}
	if j.halfDone != nil && j.done >= j.halfAt {
		close(j.halfDone)
		j.halfDone = nil
	}
}

// half returns a channel closed once n executions were answered.
func (j *jobExecs) half(n int) <-chan struct{} {
	j.mu.Lock()
	defer j.mu.Unlock()
	ch := make(chan struct{})
	if j.done >= n {
		close(ch)
		return ch
	}
	j.halfAt, j.halfDone = n, ch
	return ch
}

type execStats struct {
	first      time.Time
	executions int
	repeated   int // items answered more than once
}

// stats sums the executions.
func (j *jobExecs) stats() execStats {
	j.mu.Lock()
	defer j.mu.Unlock()
	var st execStats
	answered := map[int]int{}
	for _, e := range j.execs {
		if st.first.IsZero() || e.start.Before(st.first) {
			st.first = e.start
		}
		if !e.aborted {
			answered[e.item]++
		}
	}
	st.executions = len(j.execs)
	for _, n := range answered {
		if n > 1 {
			st.repeated++
		}
	}
	return st
}

// lostItems counts the items of run r whose attempt by worker (killed at
// killed) did not succeed, and returns how long after the kill the last of
// them started again.
func lostItems(r api.Run, worker string, killed time.Time) (lost int, redone time.Duration) {
	for _, it := range r.Items {
		for k, a := range it.Attempts {
			if a.Worker != worker || a.Error == "" {
				continue
			}
			lost++
			if k+1 < len(it.Attempts) {
				redone = max(redone, it.Attempts[k+1].StartedAt.Sub(killed))
			}
			break
		}
	}
	return lost, redone
}
