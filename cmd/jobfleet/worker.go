package main

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"slices"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/jobfleet/jobfleet/auth"
	"github.com/jobfleet/jobfleet/dispatch/worker"
	"github.com/jobfleet/jobfleet/dispatch/worker/etcddiscovery"
	"github.com/jobfleet/jobfleet/internal/buildinfo"
	"github.com/jobfleet/jobfleet/internal/httpserver"
	"github.com/jobfleet/jobfleet/internal/orchestrator"
	"github.com/jobfleet/jobfleet/internal/settings"
)

// workerOptions is the configuration of `jobfleet worker`: every flag
// binds into one of its fields, most into the worker library's own
// configuration (w, whose AddFlags defines them).
type workerOptions struct {
	// w configures the worker; its ID is --id (default
	// <hostname>-<pid>), its Orchestrators come from --orchestrators,
	// --discover or etcd, its TLS from --ca, --cert and --key, and
	// HTTPPolicy.Fleet from --etcd-endpoints.
	w             worker.Config
	etcd          etcdOptions
	logs          logOptions
	orchestrators []string
	discover      bool
	namespace     string
	tokenFile     string
	caFile        string
	certFile      string
	keyFile       string
	metricsListen string
}

func defaultWorkerOptions() *workerOptions {
	w := worker.DefaultConfig()
	w.ServeHTTP = true // the built-in http executor: what jobfleet worker is for
	return &workerOptions{w: w, etcd: defaultEtcdOptions(), logs: defaultLogOptions("json"), namespace: orchestrator.DefaultNamespace}
}

func (c *workerOptions) addFlags(fs *pflag.FlagSet) {
	c.etcd.register(fs)
	c.logs.register(fs)
	fs.StringVar(&c.w.ID, "id", c.w.ID, "worker ID recorded in each attempt (default: <hostname>-<pid>)")
	c.w.AddFlags(fs)
	fs.StringSliceVar(&c.orchestrators, "orchestrators", c.orchestrators, "orchestrator URLs to poll, comma separated, instead of finding them in etcd")
	fs.BoolVar(&c.discover, "discover", c.discover, "treat --orchestrators as seeds: poll the members listed by GET /v1/cluster/members, refreshed every 10s")
	fs.StringVar(&c.namespace, "namespace", c.namespace, "etcd key prefix of the cluster (with --etcd-endpoints; ends in '/')")
	fs.StringVar(&c.metricsListen, "metrics-listen", c.metricsListen, "HOST:PORT to serve GET /metrics and /healthz on (default: off)")
	fs.StringVar(&c.tokenFile, "token-file", c.tokenFile, "file holding the worker's bearer token")
	fs.StringVar(&c.caFile, "ca", c.caFile, "CA bundle (PEM) to verify the orchestrators' certificates (https URLs); default: the system's roots")
	fs.StringVar(&c.certFile, "cert", c.certFile, "client certificate (PEM) presented to the orchestrators")
	fs.StringVar(&c.keyFile, "key", c.keyFile, "key (PEM) of --cert")
}

// id returns the worker's ID: --id, or <hostname>-<pid>.
func (c *workerOptions) id() string {
	if c.w.ID != "" {
		return c.w.ID
	}
	hostname, _ := os.Hostname()
	if hostname == "" {
		hostname = "localhost"
	}
	return fmt.Sprintf("%s-%d", hostname, os.Getpid())
}

// source returns where the worker finds the orchestrators, without
// connecting (client is nil until the command connects to etcd).
func (c *workerOptions) source(client *clientv3.Client, lg *zap.Logger) worker.Discovery {
	switch {
	case len(c.orchestrators) > 0 && c.discover:
		d := worker.MembersFrom(c.orchestrators...)
		d.Logger = lg
		return d
	case len(c.orchestrators) > 0:
		return worker.StaticOrchestrators(c.orchestrators...)
	default:
		d := etcddiscovery.New(client, c.namespace)
		d.Logger = lg
		return d
	}
}

func (c *workerOptions) validate() error {
	for _, err := range []error{c.logs.validate(), c.etcd.validate()} {
		if err != nil {
			return err
		}
	}
	switch {
	case c.discover && len(c.orchestrators) == 0:
		return settings.Invalid("discover", true, "needs --orchestrators (the seed URLs)")
	case len(c.orchestrators) == 0 && !strings.HasSuffix(c.namespace, "/"):
		return settings.Invalid("namespace", c.namespace, "must end in '/'")
	case c.w.Token != "" && c.tokenFile != "":
		return settings.Invalid("token-file", c.tokenFile, "--token and --token-file both given (perhaps one from JOBFLEET_TOKEN or JOBFLEET_TOKEN_FILE): give one")
	case (c.certFile == "") != (c.keyFile == ""):
		return settings.Invalid("key", c.keyFile, "--cert and --key go together")
	}
	if c.metricsListen != "" {
		if _, _, err := net.SplitHostPort(c.metricsListen); err != nil {
			return settings.Invalid("metrics-listen", c.metricsListen, "want HOST:PORT: %v", err)
		}
	}
	w := c.w
	w.ID = c.id()
	if len(c.orchestrators) > 0 {
		w.Orchestrators = c.source(nil, zap.NewNop())
	} else {
		// Discovery through etcd needs a client, and connecting is
		// starting something: its namespace is checked above, and a
		// stand-in source lets the rest of the worker's settings be
		// checked.
		w.Orchestrators = worker.StaticOrchestrators("http://etcd-discovery.invalid")
	}
	if err := w.Validate(); err != nil {
		var se *settings.Error
		if errors.As(err, &se) {
			return se
		}
		if msg, ok := strings.CutPrefix(err.Error(), worker.ErrInvalidConfig.Error()+": orchestrators: "); ok {
			return settings.Invalid("orchestrators", c.orchestrators, "%s", msg)
		}
		return err
	}
	return nil
}

func (c *workerOptions) withDefaults() settingsOf {
	d := *c
	d.w = c.w.WithDefaults()
	return &d
}

func newWorkerCmd() *cobra.Command { return workerCommand(defaultWorkerOptions()) }

// workerCommand is `jobfleet worker` configured by cfg.
func workerCommand(cfg *workerOptions) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "worker",
		Short: "Run a worker: pull runs from the orchestrators, execute them, report the results",
		Long: `worker polls every orchestrator of the fleet for attempts, runs them with
the "http" executor (and "shell" with --allow-shell), and reports their
results. It finds the orchestrators in etcd (--etcd-endpoints, following
the members as they join and leave), or takes a fixed list
(--orchestrators; with --discover, the list only seeds the members list
read from GET /v1/cluster/members).

It authenticates to the orchestrators with a worker credential (--token or
--token-file, or JOBFLEET_TOKEN) and, for https URLs, verifies them with
--ca and presents --cert/--key if they ask for a client certificate.

Jobs run with least privilege. The http executor connects only where the
destination policy permits: never to the fleet's orchestrators or etcd,
not to loopback, link-local (cloud metadata), unspecified, multicast or
broadcast addresses unless --http-allow lists them, never to what
--http-deny lists; redirects only if the job sets follow_redirects. Shell
commands (--allow-shell) get PATH, HOME, LANG, their run's JOBFLEET_*
variables and what --shell-env names, nothing else of this process's
environment. Secret references in jobs ({"secret_env": "NAME"}) resolve
only to the variables --secret-env names. See docs/workers.md.

On SIGINT or SIGTERM it stops polling, lets in-flight attempts finish for up
to --shutdown-timeout, then cancels the rest and reports them failed
("worker shutting down") so they are retried.

Its settings come from flags, JOBFLEET_* environment variables and a YAML
file (--config), in that order of precedence over the defaults; every
setting is checked before anything starts, and --print-config prints the
result. A number or duration of 0 is its default; a negative one is
refused. docs/configuration.md describes the file.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			printed, err := settle(cmd, cfg)
			if err != nil {
				return err
			}
			if f := cmd.Flags().Lookup("orchestrators"); f.Changed && fromFile(f) == "" && len(cfg.orchestrators) == 0 {
				// Given as a flag or a variable, but empty (an empty list
				// in a config file, as --print-config writes it, is the
				// default: etcd).
				return errors.New("--orchestrators is empty: give orchestrator URLs, or leave it out to find them in etcd")
			}
			if printed {
				return nil
			}
			lg, stop, err := startProcess(cmd, cfg.logs, "jobfleet worker starting", "jobfleet-worker")
			if err != nil {
				return err
			}
			defer stop()
			id := cfg.id()
			if len(cfg.orchestrators) > 0 && cmd.Flags().Changed("etcd-endpoints") {
				// Perhaps from JOBFLEET_ETCD_ENDPOINTS: the explicit list wins.
				lg.Info("--orchestrators given: not reading the members from etcd")
			}
			var client *clientv3.Client
			if len(cfg.orchestrators) == 0 {
				if client, err = cfg.etcd.client(lg); err != nil {
					return err
				}
				defer client.Close()
			}
			wc := cfg.w
			wc.ID = id
			wc.Orchestrators = cfg.source(client, lg.Named("discovery").With(zap.String("worker", id)))
			if cfg.tokenFile != "" {
				b, err := os.ReadFile(cfg.tokenFile)
				if err != nil {
					return fmt.Errorf("--token-file: %w", err)
				}
				if wc.Token = strings.TrimSpace(string(b)); wc.Token == "" {
					return fmt.Errorf("--token-file %s is empty", cfg.tokenFile)
				}
				if perm, open := auth.OpenToOthers(cfg.tokenFile); open {
					lg.Warn("the token file can be read by other users: chmod 600 it", zap.String("token_file", cfg.tokenFile), zap.String("mode", fmt.Sprintf("%04o", perm)))
				}
			}
			if cfg.caFile != "" || cfg.certFile != "" || cfg.keyFile != "" {
				if wc.TLS, err = clientTLS("--", cfg.caFile, cfg.certFile, cfg.keyFile); err != nil {
					return err
				}
			}
			// The fleet's etcd is never a job's destination, whether or not
			// the orchestrators are found through it.
			wc.HTTPPolicy.Fleet = slices.Clone(cfg.etcd.endpoints)

			reg := prometheus.NewRegistry()
			reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}), buildinfo.Collector())
			wc.Logger, wc.Metrics = lg, worker.NewMetrics(reg)
			w, err := worker.New(wc)
			if err != nil {
				return err
			}
			if cfg.metricsListen != "" {
				mux := http.NewServeMux()
				mux.Handle("GET /metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
				mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { fmt.Fprintln(w, "ok") })
				budget, err := fileBudget(lg, memberReserve)
				if err != nil {
					return err
				}
				maxConns, _, err := httpserver.ConnectionCap(budget, 1, 0, metricsConnections, false)
				if err != nil {
					return fmt.Errorf("--metrics-listen: %w", err)
				}
				srv, err := httpserver.Start(cfg.metricsListen, mux, serverConfig(lg, maxConns, nil))
				if err != nil {
					return fmt.Errorf("--metrics-listen: %w", err)
				}
				defer srv.Shutdown()
				lg.Info("serving metrics", zap.String("listen", srv.Addr()), zap.Int("max_connections", maxConns))
			}
			return w.Run(cmd.Context())
		},
	}
	addSettings(cmd, cfg)
	return cmd
}
