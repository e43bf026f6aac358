package procfleet

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/jobfleet/jobfleet/api"
	"github.com/jobfleet/jobfleet/auth"
	"github.com/jobfleet/jobfleet/bench"
	"github.com/jobfleet/jobfleet/bench/child"
	"github.com/jobfleet/jobfleet/client"
	"github.com/jobfleet/jobfleet/internal/etcdserver"
)

// Config configures a fleet.
type Config struct {
	// Name names the benchmark: it prefixes errors ("items: …"), names
	// the credentials and the namespace (/jobfleet-<Name>/).
	Name string
	// Binary is the jobfleet binary every child runs; Dir holds their
	// logs (Dir/logs/<child>.log) and the worker credential's file.
	Binary string
	Dir    string
	// Fsync makes etcd sync its WAL (it does in production).
	Fsync bool
	// Orchestrators is N, the `jobfleet orchestrator` processes (at
	// least 1), named orch-1 … orch-N; Partitions is P (0: the
	// orchestrators' default).
	Orchestrators int
	Partitions    int
	// OrchestratorFlags are added to every orchestrator's command line
	// (for example --worker-ttl=2s).
	OrchestratorFlags []string
	// Workers are the `jobfleet worker` processes, named worker-1 …
	// worker-M in this order.
	Workers []Worker
	// Hold is how long the Receiver takes to answer each request (at
	// least 0).
	Hold time.Duration
	// Path is the Receiver's URL path ("/": none given).
	Path string
	// PollEvery is how often WaitFor looks (0: 50 ms).
	PollEvery time.Duration
}

// Worker is one worker process's settings.
type Worker struct {
	// Concurrency is its slots (--concurrency), at least 1.
	Concurrency int
	// Labels is its --labels (k=v,…), "" for none.
	Labels string
}

// Workers returns n workers of concurrency slots each; labels, if not
// nil, gives worker i (0-based) its labels.
func Workers(n, concurrency int, labels func(i int) string) []Worker {
	ws := make([]Worker, n)
	for i := range ws {
		ws[i].Concurrency = concurrency
		if labels != nil {
			ws[i].Labels = labels(i)
		}
	}
	return ws
}

// Validate checks cfg.
func (c Config) Validate() error {
	switch {
	case c.Name == "" || c.Binary == "" || c.Dir == "":
		return errors.New("procfleet: Name, Binary and Dir are required")
	case c.Orchestrators < 1:
		return fmt.Errorf("%s: %d orchestrators; want at least 1", c.Name, c.Orchestrators)
	case c.Partitions < 0 || c.Hold < 0 || c.PollEvery < 0:
		return fmt.Errorf("%s: Partitions, Hold and PollEvery must not be negative", c.Name)
	}
	for i, w := range c.Workers {
		if w.Concurrency < 1 {
			return fmt.Errorf("%s: worker %d: concurrency %d; want at least 1", c.Name, i+1, w.Concurrency)
		}
	}
	return nil
}

// Fleet is a running fleet. Its fields are set by Start and read-only
// after; the API clients and the Receiver are safe for concurrent use.
type Fleet struct {
	cfg Config
	// Etcd is the embedded etcd, Client the benchmark's client of it.
	Etcd   *bench.Etcd
	Client *clientv3.Client
	// Namespace is the fleet's etcd namespace.
	Namespace string
	// APIs are the admin clients of the orchestrators, APIs[i] of
	// Orchestrators[i]; API is APIs[0].
	APIs []*client.Client
	API  *client.Client
	// Orchestrators and Workers are the child processes.
	Orchestrators []*child.Process
	Workers       []*child.Process
	// Receiver is the endpoint the jobs' http executors call, at URL.
	Receiver *Receiver
	URL      string

	srv      *http.Server
	srvDone  chan struct{}
	stopOnce sync.Once
}

// Start starts etcd, the credentials, the Receiver, the orchestrators
// (and waits until each is ready and every partition owned by its ring
// target) and the workers (without waiting: WaitWorkers). On an error
// everything started is stopped.
func Start(ctx context.Context, cfg Config) (f *Fleet, err error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.PollEvery == 0 {
		cfg.PollEvery = 50 * time.Millisecond
	}
	f = &Fleet{cfg: cfg, Namespace: "/jobfleet-" + cfg.Name + "/"}
	defer func() {
		if err != nil {
			f.Stop()
		}
	}()
	if err := os.MkdirAll(filepath.Join(cfg.Dir, "logs"), 0o755); err != nil {
		return f, err
	}
	if f.Etcd, err = bench.StartEtcd(cfg.Fsync); err != nil {
		return f, err
	}
	if f.Client, err = clientv3.New(clientv3.Config{Endpoints: f.Etcd.Endpoints(), DialTimeout: 5 * time.Second}); err != nil {
		return f, err
	}
	admin, tokenFile, err := f.credentials(ctx)
	if err != nil {
		return f, err
	}
	if err := f.serve(); err != nil {
		return f, err
	}
	var urls []string
	for i := range cfg.Orchestrators {
		addr, err := etcdserver.FreeAddr()
		if err != nil {
			return f, err
		}
		api, err := client.New(client.Config{Server: "http://" + addr, Token: admin})
		if err != nil {
			return f, err
		}
		f.APIs = append(f.APIs, api)
		urls = append(urls, api.Server())
		name := fmt.Sprintf("orch-%d", i+1)
		p := &child.Process{Name: name, Log: filepath.Join(cfg.Dir, "logs", name+".log")}
		f.Orchestrators = append(f.Orchestrators, p)
		args := []string{"orchestrator", "--etcd-endpoints=" + strings.Join(f.Etcd.Endpoints(), ","), "--listen=" + addr, "--id=" + name,
			"--namespace=" + f.Namespace, "--api-rate=-1", "--log-format=json", "--log-level=warn"}
		if cfg.Partitions > 0 {
			args = append(args, "--partitions="+strconv.Itoa(cfg.Partitions))
		}
		if err := p.Start(cfg.Binary, append(args, cfg.OrchestratorFlags...)); err != nil {
			return f, err
		}
	}
	f.API = f.APIs[0]
	if err := f.WaitFor(ctx, "ready orchestrators owning every partition", 2*time.Minute, func() bool { return f.settled(ctx) }); err != nil {
		return f, err
	}
	for i, w := range cfg.Workers {
		name := fmt.Sprintf("worker-%d", i+1)
		p := &child.Process{Name: name, Log: filepath.Join(cfg.Dir, "logs", name+".log")}
		f.Workers = append(f.Workers, p)
		args := []string{"worker", "--orchestrators=" + strings.Join(urls, ","), "--token-file=" + tokenFile,
			"--id=" + name, "--concurrency=" + strconv.Itoa(w.Concurrency), "--poll-wait=2s", "--http-allow=127.0.0.1",
			"--log-format=json", "--log-level=warn"}
		if w.Labels != "" {
			args = append(args, "--labels="+w.Labels)
		}
		if err := p.Start(cfg.Binary, args); err != nil {
			return f, err
		}
	}
	return f, nil
}

// credentials creates the admin credential (its secret returned) and the
// workers' (its secret written to a file in Dir, whose path is returned).
func (f *Fleet) credentials(ctx context.Context) (admin, tokenFile string, err error) {
	creds := auth.NewStore(f.Client, f.Namespace, nil)
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	adm, _, err := creds.Create(ctx, api.CreateRequest{Role: api.RoleAdmin, Description: "bench " + f.cfg.Name}, "")
	if err != nil {
		return "", "", fmt.Errorf("%s: credentials: %w", f.cfg.Name, err)
	}
	wk, _, err := creds.Create(ctx, api.CreateRequest{Role: api.RoleWorker, Description: "bench " + f.cfg.Name + " workers"}, "")
	if err != nil {
		return "", "", fmt.Errorf("%s: credentials: %w", f.cfg.Name, err)
	}
	tokenFile = filepath.Join(f.cfg.Dir, "worker.token")
	if err := os.WriteFile(tokenFile, []byte(wk.Secret+"\n"), 0o600); err != nil {
		return "", "", err
	}
	return adm.Secret, tokenFile, nil
}

// serve starts the Receiver on a loopback port.
func (f *Fleet) serve() error {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	path := f.cfg.Path
	if path == "" {
		path = "/"
	}
	f.Receiver = NewReceiver(f.cfg.Hold)
	f.URL = "http://" + ln.Addr().String() + path
	f.srv = &http.Server{Handler: f.Receiver, ReadHeaderTimeout: 10 * time.Second}
	f.srvDone = make(chan struct{})
	go func() { defer close(f.srvDone); _ = f.srv.Serve(ln) }() // owned by Stop
	return nil
}

// settled tells whether every orchestrator is ready and every partition
// is owned by its ring target, one of them.
func (f *Fleet) settled(ctx context.Context) bool {
	for _, a := range f.APIs {
		if a.Ready(ctx) != nil {
			return false
		}
	}
	t, err := f.API.Partitions(ctx)
	if err != nil || len(t.Rows) == 0 {
		return false
	}
	for _, r := range t.Rows {
		if r.Owner == "" || r.Owner != r.Target {
			return false
		}
	}
	return true
}

// Stop stops the workers and orchestrators (SIGTERM, SIGKILL after
// 10 s, all at once), the Receiver, the etcd client and etcd. Idempotent.
func (f *Fleet) Stop() {
	f.stopOnce.Do(func() {
		var wg sync.WaitGroup
		for _, p := range append(append([]*child.Process{}, f.Workers...), f.Orchestrators...) {
			wg.Go(func() { p.Signal(syscall.SIGTERM, 10*time.Second) })
		}
		wg.Wait()
		for _, a := range f.APIs {
			a.Close()
		}
		if f.srv != nil {
			f.srv.Close()
			<-f.srvDone
		}
		if f.Client != nil {
			f.Client.Close()
		}
		if f.Etcd != nil {
			f.Etcd.Close()
		}
	})
}

// WaitFor polls cond every PollEvery until it holds, or fails after
// within (an error naming what) or when ctx ends.
func (f *Fleet) WaitFor(ctx context.Context, what string, within time.Duration, cond func() bool) error {
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			return fmt.Errorf("%s: no %s within %v", f.cfg.Name, what, within)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(f.cfg.PollEvery):
		}
	}
	return nil
}

// LiveWorkers returns how many workers the registry lists, -1 if it
// cannot be read.
func (f *Fleet) LiveWorkers(ctx context.Context) int {
	l, err := f.API.Workers(ctx)
	if err != nil {
		return -1
	}
	return len(l.Workers)
}

// WaitWorkers waits until the registry lists every worker process of
// the fleet, at most within.
func (f *Fleet) WaitWorkers(ctx context.Context, within time.Duration) error {
	n := len(f.Workers)
	return f.WaitFor(ctx, fmt.Sprintf("%d registered workers", n), within, func() bool { return f.LiveWorkers(ctx) == n })
}

// Slots returns the workers' slots in all.
func (f *Fleet) Slots() int {
	n := 0
	for _, w := range f.cfg.Workers {
		n += w.Concurrency
	}
	return n
}
