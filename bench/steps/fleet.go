package steps

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
)

const namespace = "/jobfleet-steps/"

// fleet is the benchmark's etcd, orchestrator, two workers and endpoint.
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

// pools are the workers' labels: worker-1 pool=a, worker-2 pool=b.
var pools = []string{"a", "b"}

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
	adm, _, err := creds.Create(cctx, api.CreateRequest{Role: api.RoleAdmin, Description: "bench steps"}, "")
	if err == nil {
		var wk api.Created
		wk, _, err = creds.Create(cctx, api.CreateRequest{Role: api.RoleWorker, Description: "bench steps workers"}, "")
		if err == nil {
			err = os.WriteFile(filepath.Join(cfg.Dir, "worker.token"), []byte(wk.Secret+"\n"), 0o600)
		}
	}
	cancel()
	if err != nil {
		return f, fmt.Errorf("steps: credentials: %w", err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return f, err
	}
	f.rec = &receiver{stepTime: cfg.StepTime, execs: map[execKey]execution{}}
	f.rec.url = "http://" + ln.Addr().String() + "/step"
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
		"--partitions=" + strconv.Itoa(cfg.Partitions), "--api-rate=-1", "--trigger-rate=-1", "--log-format=json", "--log-level=warn"}
	if err := f.orch.Start(cfg.Binary, args); err != nil {
		return f, err
	}
	if err := f.waitFor(ctx, "the orchestrator to be ready", 2*time.Minute, func() bool { return f.api.Ready(ctx) == nil }); err != nil {
		return f, err
	}
	for i, pool := range pools {
		w := &child.Process{Name: fmt.Sprintf("worker-%d", i+1), Log: filepath.Join(cfg.Dir, "logs", fmt.Sprintf("worker-%d.log", i+1))}
		f.workers = append(f.workers, w)
		args := []string{"worker", "--orchestrators=" + f.url, "--token-file=" + filepath.Join(cfg.Dir, "worker.token"),
			"--id=" + w.Name, "--concurrency=" + strconv.Itoa(cfg.Concurrency), "--poll-wait=2s", "--http-allow=127.0.0.1",
			"--labels=pool=" + pool, "--log-format=json", "--log-level=warn"}
		if err := w.Start(cfg.Binary, args); err != nil {
			return f, err
		}
	}
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

// waitFor polls cond every 20ms until it holds, or fails after within.
func (f *fleet) waitFor(ctx context.Context, what string, within time.Duration, cond func() bool) error {
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			return fmt.Errorf("steps: no %s within %v", what, within)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(20 * time.Millisecond):
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

// runJob creates job j (it fires once at once), waits for its run to end
// and returns it; a run that did not succeed is an error.
func (f *fleet) runJob(ctx context.Context, j api.Job) (api.Run, error) {
	if _, err := f.api.CreateJob(ctx, benchJob(j)); err != nil {
		return api.Run{}, err
	}
	var run api.Run
	done := func() bool {
		runs, err := f.api.ListRuns(ctx, j.ID, 1)
		if err != nil || len(runs) == 0 {
			return false
		}
		run = runs[0]
		return run.Status.Final()
	}
	if err := f.waitFor(ctx, "final run of "+j.ID, f.cfg.Timeout, done); err != nil {
		return run, err
	}
	if run.Status != api.RunSucceeded {
		return run, fmt.Errorf("steps: run %s ended %s (%s)", run.ID, run.Status, run.Reason)
	}
	return run, nil
}

// benchJob returns j with the benchmark's retry (none) and timeout.
func benchJob(j api.Job) api.Job {
	j.Retry = api.RetryPolicy{MaxAttempts: 1}
	j.Timeout = api.Duration(time.Minute)
	return j
}

// workerOf returns the worker of step id's (first) attempt in r.
func workerOf(r api.Run, id string) string {
	k := r.StepIndex(id)
	if k < 0 {
		return ""
	}
	if as := r.Items[r.Steps[k].First].Attempts; len(as) > 0 {
		return as[len(as)-1].Worker
	}
	return ""
}

// receiver is the steps' endpoint: it answers each request after
// stepTime and records when it came and when it answered.
type receiver struct {
	stepTime time.Duration
	url      string

	mu    sync.Mutex // guards execs
	execs map[execKey]execution
}

// execKey identifies a request: the run and, in a run of steps, the
// step.
type execKey struct{ run, step string }

type execution struct{ start, end time.Time }

func (r *receiver) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	start := time.Now()
	_, _ = io.Copy(io.Discard, req.Body)
	run, _ := url.PathUnescape(req.Header.Get(worker.HeaderRunID))
	k := execKey{run: run, step: req.Header.Get(worker.HeaderStep)}
	t := time.NewTimer(r.stepTime)
	select {
	case <-t.C:
	case <-req.Context().Done():
		t.Stop()
		return
	}
	r.mu.Lock()
	r.execs[k] = execution{start: start, end: time.Now()}
	r.mu.Unlock()
	w.WriteHeader(http.StatusOK)
}

// exec returns the execution of step of run (step "" for a run not
// made of steps), and whether there is one.
func (r *receiver) exec(run, step string) (execution, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	e, ok := r.execs[execKey{run, step}]
	return e, ok
}
