package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/jobfleet/jobfleet/dispatch/worker"
	"github.com/jobfleet/jobfleet/internal/etcdserver"
	"github.com/jobfleet/jobfleet/internal/httpserver"
)

func newDevCmd() *cobra.Command {
	var (
		mem           memberOptions
		srv           serverOptions
		logs          logOptions
		orchestrators int
		dataDir       string
		etcdListen    string
		etcdPeer      string
		workers       int
		examples      bool
	)
	cmd := &cobra.Command{
		Use:   "dev",
		Short: "Quick start: an embedded etcd, orchestrators, workers and example jobs in one process",
		Long: `dev starts a single-node etcd in --data-dir, --orchestrators fleet members
(each serving the HTTP API on its own port: the first on --listen, the
others on the following ports), --workers workers (with the shell executor
enabled), a built-in echo endpoint, and three example jobs: example-echo
(HTTP, every 5s), example-shell (every 10s) and example-flaky (fails twice,
then succeeds on its third attempt), created when absent (a restart on the
same --data-dir keeps them as you left them). Stop it with Ctrl-C: the workers finish
their attempts, the members hand their partitions over and leave.

The API needs a credential. dev makes an admin and a worker credential,
writes their tokens to <data-dir>/admin.token and worker.token (mode
0600), and writes a "dev" CLI context (the first member, the admin token)
and makes it current, so client commands need no flags. A restart with the
same --data-dir reuses them.

Other processes can join the same fleet through the embedded etcd's
client address (--etcd-listen, 127.0.0.1:2379 unless changed):
  jobfleet orchestrator --etcd-endpoints=http://127.0.0.1:2379 --listen=127.0.0.1:8090
  jobfleet worker --etcd-endpoints=http://127.0.0.1:2379 --token-file=<data-dir>/worker.token`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if orchestrators < 1 || orchestrators > 64 {
				return fmt.Errorf("--orchestrators must be 1..64, got %d", orchestrators)
			}
			host, portStr, err := net.SplitHostPort(mem.listen)
			if err != nil {
				return fmt.Errorf("--listen %q: %w", mem.listen, err)
			}
			port, err := strconv.Atoi(portStr)
			if err != nil || port < 1 || port+orchestrators-1 > 65535 {
				return fmt.Errorf("--listen %q: need %d consecutive ports from a port in 1..65535", mem.listen, orchestrators)
			}
			if workers < 0 || workers > 64 {
				return fmt.Errorf("--workers must be 0..64, got %d", workers)
			}
			if mem.id != "" && orchestrators > 1 {
				return errors.New("--id names one member; with several orchestrators the IDs are derived (orchestrator-1, …)")
			}
			if err := mem.checkFlags(); err != nil {
				return err
			}
			lg, err := logs.build()
			if err != nil {
				return err
			}
			defer lg.Sync()
			// The members and the echo endpoint share what the embedded
			// etcd and the workers leave of the open-file limit.
			budget, err := fileBudget(lg, devReserve)
			if err != nil {
				return err
			}
			listeners := orchestrators
			if examples {
				listeners++
			}
			maxConns, err := srv.connectionCap(cmd, lg, budget, listeners, 0)
			if err != nil {
				return err
			}
			return runDev(cmd.Context(), lg, devConfig{
				mem: mem, host: host, port: port, n: orchestrators,
				dataDir: dataDir, etcdListen: etcdListen, etcdPeer: etcdPeer,
				workers: workers, examples: examples,
				server: srv.apiConfig(lg, "api", maxConns, nil),
			})
		},
	}
	mem.register(cmd)
	srv.register(cmd, false)
	logs.register(cmd.Flags(), "console")
	fs := cmd.Flags()
	fs.IntVar(&orchestrators, "orchestrators", 3, "number of orchestrators to run")
	fs.IntVar(&workers, "workers", 2, "number of workers to run (with the shell executor enabled)")
	fs.BoolVar(&examples, "examples", true, "load the example jobs and serve their built-in echo endpoint")
	fs.StringVar(&dataDir, "data-dir", filepath.Join(os.TempDir(), "jobfleet-dev"), "embedded etcd's data directory (kept across runs)")
	fs.StringVar(&etcdListen, "etcd-listen", "127.0.0.1:2379", "HOST:PORT for the embedded etcd's clients")
	fs.StringVar(&etcdPeer, "etcd-peer-listen", "127.0.0.1:2380", "HOST:PORT recorded as the embedded etcd's peer URL (a single member: nothing listens on it)")
	return cmd
}

type devConfig struct {
	mem                           memberOptions
	host                          string
	port, n                       int
	dataDir, etcdListen, etcdPeer string
	workers                       int
	examples                      bool
	// server configures each member's API listener and the echo
	// endpoint's.
	server httpserver.Config
}

// etcdStartHint names the flag to change when the embedded etcd could not
// start because its client address is taken: it tries to listen on it.
// (A single-member etcd has no peer listener.)
func etcdStartHint(client string) string {
	ln, err := net.Listen("tcp", client)
	if err != nil {
		return fmt.Sprintf(" (its client address %s is taken: is another etcd running? choose another with --etcd-listen)", client)
	}
	ln.Close()
	return ""
}

func runDev(ctx context.Context, lg *zap.Logger, cfg devConfig) error {
	if err := ensurePrivateDir(cfg.dataDir); err != nil {
		return err
	}
	unlock, err := lockDataDir(cfg.dataDir)
	if err != nil {
		return err
	}
	defer unlock()
	etcd, err := etcdserver.Start(etcdserver.Config{
		Dir: cfg.dataDir, ClientAddr: cfg.etcdListen, PeerAddr: cfg.etcdPeer, Logger: lg,
	})
	if err != nil {
		return fmt.Errorf("embedded etcd%s: %w", etcdStartHint(cfg.etcdListen), err)
	}
	defer etcd.Close()
	lg.Info("embedded etcd ready", zap.Strings("endpoints", etcd.Endpoints()), zap.String("data_dir", cfg.dataDir))

	client, err := clientv3.New(clientv3.Config{
		Endpoints: etcd.Endpoints(), DialTimeout: 5 * time.Second,
		Logger: lg.Named("etcd-client").WithOptions(zap.IncreaseLevel(zap.ErrorLevel)),
	})
	if err != nil {
		return fmt.Errorf("etcd client: %w", err)
	}
	defer client.Close()

	urls := make([]string, cfg.n)
	for i := range cfg.n {
		urls[i] = "http://" + net.JoinHostPort(cfg.host, strconv.Itoa(cfg.port+i))
	}
	workerToken := ""
	if cfg.mem.insecureNoAuth {
		writeDevContext(lg, urls[0], "")
	} else if workerToken, err = devAuth(ctx, lg, client, cfg.mem.namespace, cfg.dataDir, urls[0]); err != nil {
		return err
	}

	var members []*member
	defer func() {
		var wg sync.WaitGroup
		for _, m := range members {
			wg.Add(1)
			go func() { defer wg.Done(); m.shutdown() }()
		}
		wg.Wait()
	}()
	for i := range cfg.n {
		opts := cfg.mem
		if cfg.n > 1 || opts.id == "" {
			opts.id = fmt.Sprintf("orchestrator-%d", i+1)
		}
		listen := net.JoinHostPort(cfg.host, strconv.Itoa(cfg.port+i))
		m, err := startMember(lg, client, opts, listen, memberServing{api: cfg.server})
		if err != nil {
			return err
		}
		members = append(members, m)
	}

	var echo *httpserver.Server
	if cfg.examples {
		if echo, err = startEchoServer(lg, cfg.host, cfg.server); err != nil {
			return err
		}
		defer echo.Shutdown()
	}

	// On Ctrl-C the workers stop first (finishing or handing back their
	// attempts), then the orchestrators hand their partitions over.
	orchCtx, stopOrchs := context.WithCancel(context.Background())
	defer stopOrchs()
	errs := make([]error, len(members)+1)
	var wg sync.WaitGroup
	for i, m := range members {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = m.orch.Run(orchCtx)
			m.shutdown() // drained or stopped: it no longer serves
		}()
	}
	for i, m := range members {
		urls[i] = m.http.URL()
	}
	if echo != nil {
		wg.Add(1)
		go func() {
			defer wg.Done()
			loadExamples(ctx, lg, members[0].orch, echo.URL())
		}()
	}
	workersDone := make(chan struct{})
	go func() {
		defer close(workersDone)
		if cfg.workers > 0 {
			errs[len(members)] = runDevWorkers(ctx, lg, cfg.workers, worker.EtcdOrchestrators(client, cfg.mem.namespace),
				append(etcd.Endpoints(), "http://"+cfg.etcdPeer), workerToken)
		}
		<-ctx.Done()
		stopOrchs()
	}()
	api := urls[0]
	lg.Info("jobfleet dev is up", zap.Strings("api", urls), zap.Int("workers", cfg.workers),
		zap.String("try", "jobfleet cluster partitions; jobfleet job ls; jobfleet job runs example-flaky; curl -H \"Authorization: Bearer $(cat "+filepath.Join(cfg.dataDir, "admin.token")+")\" "+api+"/v1/jobs"))
	tokenFile := filepath.Join(cfg.dataDir, "admin.token")
	lg.Info("the console: open "+api+"/ui/ and sign in with the dev admin token (print it: cat "+tokenFile+")",
		zap.String("console", api+"/ui/"), zap.String("token_file", tokenFile))
	wg.Wait()
	stopOrchs()
	<-workersDone
	return errors.Join(errs...)
}

// lockDataDir takes an exclusive lock on dir for this process, so a second
// `jobfleet dev` on the same data fails at once instead of blocking on
// etcd's own database lock.
// ensurePrivateDir creates dir (mode 0700) if missing, and refuses one
// that is not this user's own: dev keeps its etcd data and its admin
// token there, and the default lives in a shared temporary directory,
// where another user could have created it first.
func ensurePrivateDir(dir string) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("--data-dir: %w", err)
	}
	fi, err := os.Lstat(dir)
	if err != nil {
		return fmt.Errorf("--data-dir: %w", err)
	}
	if !fi.IsDir() {
		return fmt.Errorf("--data-dir %s is not a directory (%s); give a directory of your own", dir, fi.Mode().Type())
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok && int(st.Uid) != os.Geteuid() {
		return fmt.Errorf("--data-dir %s is owned by uid %d, not by you (uid %d): another user may have created it to read or plant dev's data; remove it or choose another --data-dir", dir, st.Uid, os.Geteuid())
	}
	if perm := fi.Mode().Perm(); perm&0o022 != 0 {
		return fmt.Errorf("--data-dir %s can be written by other users (mode %04o): chmod 700 it, or choose another --data-dir", dir, perm)
	}
	return nil
}

func lockDataDir(dir string) (unlock func(), err error) {
	f, err := os.OpenFile(filepath.Join(dir, "jobfleet-dev.lock"), os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, fmt.Errorf("--data-dir: %w", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		return nil, fmt.Errorf("--data-dir %s is in use by another jobfleet dev; stop it or choose another --data-dir", dir)
	}
	return func() { f.Close() }, nil
}
