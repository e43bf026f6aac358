package main

import (
	"errors"
	"fmt"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/spf13/cobra"
	"go.uber.org/zap"

	"github.com/jobfleet/jobfleet/dispatch/worker"
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
				d := worker.EtcdOrchestrators(client, namespace)
				d.Logger = lg.Named("discovery").With(zap.String("worker", id))
				source = d
			}

			reg := prometheus.NewRegistry()
			reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
			w, err := worker.New(worker.Config{
				ID:              id,
				Orchestrators:   source,
				Concurrency:     concurrency,
				AllowShell:      allowShell,
				ShutdownTimeout: shutdownTimeout,
				PollWait:        pollWait,
				Logger:          lg,
				Metrics:         worker.NewMetrics(reg),
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
	return cmd
}
