package main

import (
	"crypto/tls"
	"errors"
	"fmt"
	"net/http"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/spf13/cobra"
	"go.uber.org/zap"

	"github.com/jobfleet/jobfleet/auth"
	"github.com/jobfleet/jobfleet/dispatch/worker"
	"github.com/jobfleet/jobfleet/dispatch/worker/etcddiscovery"
	"github.com/jobfleet/jobfleet/internal/buildinfo"
	"github.com/jobfleet/jobfleet/internal/httpserver"
	"github.com/jobfleet/jobfleet/internal/orchestrator"
)

func newWorkerCmd() *cobra.Command {
	var (
		etcd            etcdOptions
		logs            logOptions
		orchestrators   []string
		discover        bool
		namespace       string
		id              string
		concurrency     int
		allowShell      bool
		shutdownTimeout time.Duration
		pollWait        time.Duration
		metricsListen   string
		token           string
		tokenFile       string
		caFile          string
		certFile        string
		keyFile         string
		httpAllow       []string
		httpDeny        []string
		proxyFromEnv    bool
		shellEnv        []string
		secretEnv       []string
	)
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
("worker shutting down") so they are retried.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			lg, err := logs.build()
			if err != nil {
				return err
			}
			defer lg.Sync()
			lg.Info("jobfleet worker starting", buildFields()...)
			if id == "" {
				hostname, _ := os.Hostname()
				if hostname == "" {
					hostname = "localhost"
				}
				id = fmt.Sprintf("%s-%d", hostname, os.Getpid())
			}

			if concurrency < 1 || concurrency > worker.MaxConcurrency {
				return fmt.Errorf("--concurrency must be 1..%d, got %d", worker.MaxConcurrency, concurrency)
			}
			if cmd.Flags().Changed("orchestrators") && len(orchestrators) == 0 {
				return errors.New("--orchestrators is empty: give orchestrator URLs, or leave it out to find them in etcd")
			}
			if len(orchestrators) > 0 && cmd.Flags().Changed("etcd-endpoints") {
				// Perhaps from JOBFLEET_ETCD_ENDPOINTS: the explicit list wins.
				lg.Info("--orchestrators given: not reading the members from etcd")
			}
			var source worker.Discovery
			switch {
			case len(orchestrators) > 0 && discover:
				d := worker.MembersFrom(orchestrators...)
				d.Logger = lg.Named("discovery").With(zap.String("worker", id))
				source = d
			case len(orchestrators) > 0:
				source = worker.StaticOrchestrators(orchestrators...)
			case discover:
				return errors.New("--discover needs --orchestrators (the seed URLs)")
			default:
				if !strings.HasSuffix(namespace, "/") {
					return fmt.Errorf("--namespace %q must end in '/'", namespace)
				}
				client, err := etcd.client(lg)
				if err != nil {
					return err
				}
				defer client.Close()
				d := etcddiscovery.New(client, namespace)
				d.Logger = lg.Named("discovery").With(zap.String("worker", id))
				source = d
			}

			if token != "" && tokenFile != "" {
				return errors.New("--token and --token-file both given (perhaps one from JOBFLEET_TOKEN or JOBFLEET_TOKEN_FILE): give one")
			}
			if tokenFile != "" {
				b, err := os.ReadFile(tokenFile)
				if err != nil {
					return fmt.Errorf("--token-file: %w", err)
				}
				if token = strings.TrimSpace(string(b)); token == "" {
					return fmt.Errorf("--token-file %s is empty", tokenFile)
				}
				if perm, open := auth.OpenToOthers(tokenFile); open {
					lg.Warn("the token file can be read by other users: chmod 600 it", zap.String("token_file", tokenFile), zap.String("mode", fmt.Sprintf("%04o", perm)))
				}
			}
			var tlsCfg *tls.Config // nil: Go's defaults
			if caFile != "" || certFile != "" || keyFile != "" {
				if tlsCfg, err = clientTLS("--", caFile, certFile, keyFile); err != nil {
					return err
				}
			}
			// The fleet's etcd is never a job's destination, whether or not
			// the orchestrators are found through it.
			fleet := slices.Clone(etcd.endpoints)

			reg := prometheus.NewRegistry()
			reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}), buildinfo.Collector())
			w, err := worker.New(worker.Config{
				ID:              id,
				Orchestrators:   source,
				Concurrency:     concurrency,
				AllowShell:      allowShell,
				ShutdownTimeout: shutdownTimeout,
				PollWait:        pollWait,
				Token:           token,
				TLS:             tlsCfg,
				HTTPPolicy: worker.HTTPPolicy{
					Allow:                httpAllow,
					Deny:                 httpDeny,
					Fleet:                fleet,
					ProxyFromEnvironment: proxyFromEnv,
				},
				ShellEnv:  shellEnv,
				SecretEnv: secretEnv,
				Logger:    lg,
				Metrics:   worker.NewMetrics(reg),
			})
			if err != nil {
				return err
			}
			if metricsListen != "" {
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
				srv, err := httpserver.Start(metricsListen, mux, serverConfig(lg, maxConns, nil))
				if err != nil {
					return fmt.Errorf("--metrics-listen: %w", err)
				}
				defer srv.Shutdown()
				lg.Info("serving metrics", zap.String("listen", srv.Addr()), zap.Int("max_connections", maxConns))
			}
			return w.Run(cmd.Context())
		},
	}
	etcd.register(cmd)
	logs.register(cmd.Flags(), "json")
	fs := cmd.Flags()
	fs.StringSliceVar(&orchestrators, "orchestrators", nil, "orchestrator URLs to poll, comma separated, instead of finding them in etcd")
	fs.BoolVar(&discover, "discover", false, "treat --orchestrators as seeds: poll the members listed by GET /v1/cluster/members, refreshed every 10s")
	fs.StringVar(&namespace, "namespace", orchestrator.DefaultNamespace, "etcd key prefix of the cluster (with --etcd-endpoints)")
	fs.StringVar(&id, "id", "", "worker ID recorded in each attempt (default: <hostname>-<pid>)")
	fs.IntVar(&concurrency, "concurrency", 4, "attempts held at once (1..1024); use at least the number of orchestrators")
	fs.BoolVar(&allowShell, "allow-shell", false, `run jobs with the "shell" executor (commands run as this process's user)`)
	fs.DurationVar(&shutdownTimeout, "shutdown-timeout", 30*time.Second, "on SIGINT/SIGTERM, how long in-flight attempts may finish before they are cancelled and reported failed")
	fs.DurationVar(&pollWait, "poll-wait", 15*time.Second, "how long an orchestrator may hold a long poll (at most 30s)")
	fs.StringVar(&metricsListen, "metrics-listen", "", "HOST:PORT to serve GET /metrics and /healthz on (default: off)")
	fs.StringVar(&token, "token", "", "the worker's credential: bearer token sent to the orchestrators (prefer --token-file or JOBFLEET_TOKEN: arguments are visible to other users)")
	fs.StringVar(&tokenFile, "token-file", "", "file holding the worker's bearer token")
	fs.StringVar(&caFile, "ca", "", "CA bundle (PEM) to verify the orchestrators' certificates (https URLs); default: the system's roots")
	fs.StringVar(&certFile, "cert", "", "client certificate (PEM) presented to the orchestrators")
	fs.StringVar(&keyFile, "key", "", "key (PEM) of --cert")
	fs.StringSliceVar(&httpAllow, "http-allow", nil, "destinations the http executor may reach although denied by default (loopback, link-local, ...): CIDRs, addresses or host names (*.example.com), each with an optional :PORT; comma separated, repeatable")
	fs.StringSliceVar(&httpDeny, "http-deny", nil, "destinations the http executor must never reach, as for --http-allow; beats --http-allow")
	fs.BoolVar(&proxyFromEnv, "http-proxy-from-env", false, "send the http executor's requests through HTTP_PROXY/HTTPS_PROXY (the policy then checks destinations by URL, not by resolved address)")
	fs.StringSliceVar(&shellEnv, "shell-env", nil, "variables of this process's environment that shell commands get too (NAME,...; not JOBFLEET_*)")
	fs.StringSliceVar(&secretEnv, "secret-env", nil, `variables of this process's environment that jobs' secret references {"secret_env": "NAME"} may name (NAME,...; not JOBFLEET_*)`)
	return cmd
}
