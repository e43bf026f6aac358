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
	"github.com/spf13/pflag"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/jobfleet/jobfleet/dispatch/worker/etcddiscovery"
	"github.com/jobfleet/jobfleet/internal/etcdserver"
	"github.com/jobfleet/jobfleet/internal/httpserver"
	"github.com/jobfleet/jobfleet/internal/settings"
)

// devOptions is the configuration of `jobfleet dev`: every flag binds
// into one of its fields.
type devOptions struct {
	// mem configures each member; the IDs are orchestrator-1, ... (or
	// --id, with a single orchestrator) and the first listens on
	// --listen, the others on the following ports.
	mem  memberOptions
	srv  serverOptions
	logs logOptions
	// orchestrators and workers are the members and workers to run
	// (counts of processes, not bounds: --workers=0 runs none).
	orchestrators int
	workers       int
	examples      bool
	dataDir       string
	etcdListen    string
	etcdPeer      string
}

func defaultDevOptions() *devOptions {
	mem := defaultMemberOptions()
	// Notifications may reach receivers on this machine, as the dev
	// workers' http jobs may (the fleet's own endpoints stay refused).
	mem.orch.Notify.Policy.Allow = []string{"127.0.0.0/8", "::1"}
	return &devOptions{
		mem: mem, srv: defaultServerOptions(), logs: defaultLogOptions("console"),
		orchestrators: 3, workers: 2, examples: true,
		dataDir:    defaultDevDataDir(),
		etcdListen: "127.0.0.1:2379", etcdPeer: "127.0.0.1:2380",
	}
}

func (c *devOptions) addFlags(fs *pflag.FlagSet) {
	c.mem.register(fs)
	c.srv.register(fs, false)
	c.logs.register(fs)
	fs.IntVar(&c.orchestrators, "orchestrators", c.orchestrators, "number of orchestrators to run (1 to 64)")
	fs.IntVar(&c.workers, "workers", c.workers, "number of workers to run, with the shell executor enabled (0 to 64; 0 runs none)")
	fs.BoolVar(&c.examples, "examples", c.examples, "load the example jobs and serve their built-in echo endpoint")
	fs.StringVar(&c.dataDir, "data-dir", c.dataDir, "embedded etcd's data directory (kept across runs)")
	fs.StringVar(&c.etcdListen, "etcd-listen", c.etcdListen, "HOST:PORT for the embedded etcd's clients")
	fs.StringVar(&c.etcdPeer, "etcd-peer-listen", c.etcdPeer, "HOST:PORT recorded as the embedded etcd's peer URL (a single member: nothing listens on it)")
}

// ports returns the host and first port of --listen, checking that the
// orchestrators' consecutive ports exist.
func (c *devOptions) ports() (host string, port int, err error) {
	host, portStr, err := net.SplitHostPort(c.mem.listen)
	if err != nil {
		return "", 0, settings.Invalid("listen", c.mem.listen, "want HOST:PORT: %v", err)
	}
	port, err = strconv.Atoi(portStr)
	if err != nil || port < 1 || port+c.orchestrators-1 > 65535 {
		return "", 0, settings.Invalid("listen", c.mem.listen, "need %d consecutive ports from a port in 1..65535", c.orchestrators)
	}
	return host, port, nil
}

// memberID is the ID of the i-th member (from 0).
func (c *devOptions) memberID(i int) string {
	if c.orchestrators > 1 || c.mem.orch.ID == "" {
		return fmt.Sprintf("orchestrator-%d", i+1)
	}
	return c.mem.orch.ID
}

func (c *devOptions) validate() error {
	if err := c.logs.validate(); err != nil {
		return err
	}
	if err := c.srv.validate(); err != nil {
		return err
	}
	switch {
	case c.orchestrators < 1 || c.orchestrators > 64:
		return settings.Invalid("orchestrators", c.orchestrators, "want 1 to 64")
	case c.workers < 0 || c.workers > 64:
		return settings.Invalid("workers", c.workers, "want 0 to 64")
	case c.mem.orch.ID != "" && c.orchestrators > 1:
		return settings.Invalid("id", c.mem.orch.ID, "names one member; with several orchestrators the IDs are derived (orchestrator-1, …)")
	case c.dataDir == "":
		return settings.Invalid("data-dir", c.dataDir, "want a directory")
	}
	for _, l := range []struct{ key, addr string }{{"etcd-listen", c.etcdListen}, {"etcd-peer-listen", c.etcdPeer}} {
		if _, _, err := net.SplitHostPort(l.addr); err != nil {
			return settings.Invalid(l.key, l.addr, "want HOST:PORT: %v", err)
		}
	}
	if _, _, err := c.ports(); err != nil {
		return err
	}
	m := c.mem
	m.orch.ID = c.memberID(0)
	return m.validate(c.mem.listen, false, "")
}

func (c *devOptions) withDefaults() settingsOf {
	d := *c
	d.mem, d.srv = c.mem.withDefaults(), c.srv.withDefaults()
	return &d
}

func newDevCmd() *cobra.Command { return devCommand(defaultDevOptions()) }

// devCommand is `jobfleet dev` configured by cfg.
func devCommand(cfg *devOptions) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "dev",
		Short: "Quick start: an embedded etcd, orchestrators, workers and example jobs in one process",
		Long: `dev starts a single-node etcd in --data-dir, --orchestrators fleet members
(each serving the HTTP API on its own port: the first on --listen, the
others on the following ports), --workers workers (with the shell executor
enabled), a built-in echo endpoint (POST /echo on the port after the
members': http://127.0.0.1:8083/echo by default, another port if that one
is taken), and three example jobs: example-echo
(HTTP, every 5s), example-shell (every 10s) and example-flaky (fails twice,
then succeeds on its third attempt), created when absent (a restart on the
same --data-dir keeps them as you left them). Stop it with Ctrl-C: the workers finish
their attempts, the members hand their partitions over and leave.

The API needs a credential. dev makes an admin and a worker credential,
writes their tokens to <data-dir>/admin.token and worker.token (mode
0600), and writes a "dev" CLI context (the first member, the admin token)
and makes it current, so client commands need no flags. A restart with the
same --data-dir reuses them. A dev on another --data-dir writes the
context "dev-<the directory's name>" instead, made current only when no
context is: a second dev leaves the CLI aimed at the first.

Other processes can join the same fleet through the embedded etcd's
client address (--etcd-listen, 127.0.0.1:2379 unless changed):
  jobfleet orchestrator --etcd-endpoints=http://127.0.0.1:2379 --listen=127.0.0.1:8090
  jobfleet worker --etcd-endpoints=http://127.0.0.1:2379 --token-file=<data-dir>/worker.token

Its settings come from flags, JOBFLEET_* environment variables and a YAML
file (--config), as orchestrator's do; every one is checked before the
embedded etcd starts. A number or duration of 0 is its default (but
--workers counts workers: 0 runs none); a negative one is refused, unless
its help says what it means.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if printed, err := settle(cmd, cfg); err != nil || printed {
				return err
			}
			if err := cfg.mem.readAdminSecret(); err != nil {
				return err
			}
			host, port, _ := cfg.ports() // validated
			lg, stop, err := startProcess(cmd, cfg.logs, "", "jobfleet")
			if err != nil {
				return err
			}
			defer stop()
			// The members and the echo endpoint share what the embedded
			// etcd and the workers leave of the open-file limit.
			budget, err := fileBudget(lg, devReserve)
			if err != nil {
				return err
			}
			listeners := cfg.orchestrators
			if cfg.examples {
				listeners++
			}
			maxConns, err := cfg.srv.connectionCap(cmd, lg, budget, listeners, 0)
			if err != nil {
				return err
			}
			return runDev(cmd.Context(), lg, devPlan{
				opts: cfg, host: host, port: port,
				server: cfg.srv.apiConfig(lg, "api", maxConns, nil),
			})
		},
	}
	addSettings(cmd, cfg)
	return cmd
}

// devPlan is what runDev starts.
type devPlan struct {
	opts *devOptions
	host string
	port int
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

func runDev(ctx context.Context, lg *zap.Logger, plan devPlan) error {
	cfg := plan.opts
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

	urls := make([]string, cfg.orchestrators)
	for i := range cfg.orchestrators {
		urls[i] = "http://" + net.JoinHostPort(plan.host, strconv.Itoa(plan.port+i))
	}
	workerToken := ""
	if cfg.mem.insecureNoAuth {
		writeDevContext(lg, devContextName(cfg.dataDir), urls[0], "")
	} else if workerToken, err = devAuth(ctx, lg, client, cfg.mem.orch.Namespace, cfg.dataDir, urls[0]); err != nil {
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
	for i := range cfg.orchestrators {
		opts := cfg.mem
		opts.orch.ID = cfg.memberID(i)
		if opts.orch.Notify.ConsoleURL == "" {
			opts.orch.Notify.ConsoleURL = urls[0] + "/ui/" // the first member's console, for "slack" notifications' links
		}
		listen := net.JoinHostPort(plan.host, strconv.Itoa(plan.port+i))
		m, err := startMember(lg, client, opts, listen, memberServing{api: plan.server})
		if err != nil {
			return err
		}
		members = append(members, m)
	}

	var echo *httpserver.Server
	if cfg.examples {
		// The port after the members': 8083 by default.
		if echo, err = startEchoServer(lg, plan.host, plan.port+cfg.orchestrators, plan.server); err != nil {
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
			errs[len(members)] = runDevWorkers(ctx, lg, cfg.workers, etcddiscovery.New(client, cfg.mem.orch.Namespace),
				append(etcd.Endpoints(), "http://"+etcd.PeerAddr()), workerToken)
		}
		<-ctx.Done()
		stopOrchs()
	}()
	api := urls[0]
	echoField := zap.Skip()
	if echo != nil {
		echoField = zap.String("echo", echo.URL()) // where a user's own HTTP jobs can aim: URL/echo
	}
	lg.Info("jobfleet dev is up", zap.Strings("api", urls), echoField, zap.Int("workers", cfg.workers),
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
