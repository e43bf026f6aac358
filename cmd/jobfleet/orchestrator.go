package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/jonboulle/clockwork"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/jobfleet/jobfleet/admin"
	"github.com/jobfleet/jobfleet/api"
	"github.com/jobfleet/jobfleet/auth"
	"github.com/jobfleet/jobfleet/internal/buildinfo"
	"github.com/jobfleet/jobfleet/internal/etcdhealth"
	"github.com/jobfleet/jobfleet/internal/httpserver"
	"github.com/jobfleet/jobfleet/internal/orchestrator"
	"github.com/jobfleet/jobfleet/internal/settings"
	"github.com/jobfleet/jobfleet/internal/skewclock"
)

// etcdOptions are the settings that say how to reach etcd.
type etcdOptions struct {
	endpoints []string
	cert      string
	key       string
	ca        string
	username  string
	password  string
}

// defaultEtcdOptions returns the defaults: an etcd on this machine.
func defaultEtcdOptions() etcdOptions {
	return etcdOptions{endpoints: []string{"http://127.0.0.1:2379"}}
}

// register defines the --etcd-* flags, bound to o's fields (--etcd-password
// a secret).
func (o *etcdOptions) register(fs *pflag.FlagSet) {
	fs.StringSliceVar(&o.endpoints, "etcd-endpoints", o.endpoints, "etcd client URLs, comma separated")
	fs.StringVar(&o.cert, "etcd-cert", o.cert, "TLS client certificate file for etcd")
	fs.StringVar(&o.key, "etcd-key", o.key, "TLS client key file for etcd")
	fs.StringVar(&o.ca, "etcd-ca", o.ca, "CA bundle to verify etcd's server certificate")
	fs.StringVar(&o.username, "etcd-username", o.username, "etcd user name (etcd auth)")
	fs.StringVar(&o.password, "etcd-password", o.password, "etcd password (etcd auth; prefer JOBFLEET_ETCD_PASSWORD: arguments are visible to other users)")
	settings.Secret(fs, "etcd-password")
}

// validate checks the settings without connecting or reading files.
func (o etcdOptions) validate() error {
	if len(o.endpoints) == 0 {
		return settings.Invalid("etcd-endpoints", o.endpoints, "want at least one etcd client URL")
	}
	for _, ep := range o.endpoints {
		// Endpoints are shown to viewers (GET /v1/cluster/storage) and
		// sent to workers: credentials have flags of their own.
		u, err := url.Parse(ep)
		if err != nil || u.Host == "" {
			return settings.Invalid("etcd-endpoints", o.endpoints, "%q is not a URL like https://etcd-1:2379", ep)
		}
		if u.User != nil {
			u.User = nil
			return settings.Invalid("etcd-endpoints", u.String(), "a user name or password in the URL is refused; give them with --etcd-username and --etcd-password (or JOBFLEET_ETCD_PASSWORD)")
		}
	}
	switch {
	case o.cert != "" && o.key == "":
		return settings.Invalid("etcd-key", o.key, "--etcd-cert and --etcd-key go together")
	case o.cert == "" && o.key != "":
		return settings.Invalid("etcd-cert", o.cert, "--etcd-cert and --etcd-key go together")
	}
	return nil
}

func (o *etcdOptions) client(lg *zap.Logger) (*clientv3.Client, error) {
	if err := o.validate(); err != nil {
		var se *settings.Error
		if errors.As(err, &se) {
			return nil, fmt.Errorf("--%s", se)
		}
		return nil, err
	}
	cfg := clientv3.Config{
		Endpoints:   o.endpoints,
		DialTimeout: 5 * time.Second,
		// A member that stops answering without closing its connections
		// (a network partition, a host gone) would otherwise keep its
		// share of the requests, each timing out, for as long as the
		// partition lasts: pings on a silent connection close it, and
		// requests go to the other members.
		DialKeepAliveTime:    etcdKeepAliveTime,
		DialKeepAliveTimeout: etcdKeepAliveTimeout,
		Username:             o.username,
		Password:             o.password,
		Logger:               lg.Named("etcd-client").WithOptions(zap.IncreaseLevel(zap.ErrorLevel)),
	}
	if o.cert != "" || o.key != "" || o.ca != "" {
		tc, err := clientTLS("--etcd-", o.ca, o.cert, o.key)
		if err != nil {
			return nil, err
		}
		cfg.TLS = tc
	}
	c, err := clientv3.New(cfg)
	if err != nil {
		return nil, fmt.Errorf("etcd client: %w", err)
	}
	return c, nil
}

// endpointWatch returns a function that starts keeping client's requests
// off the endpoints that stop answering (etcdhealth) until ctx ends, and
// returns a function that waits for that to stop, with the collector of
// the endpoints' health (jobfleet_etcd_endpoint_up). With one endpoint it
// does nothing, and the collector is nil. It returns an error for TLS
// files it cannot read.
func (o *etcdOptions) endpointWatch(client *clientv3.Client, lg *zap.Logger) (start func(ctx context.Context) (wait func()), up prometheus.Collector, err error) {
	if len(etcdhealth.Distinct(o.endpoints)) < 2 {
		return func(context.Context) func() { return func() {} }, nil, nil // one endpoint (given twice, maybe)
	}
	hc := etcdhealth.Config{Endpoints: o.endpoints, Logger: lg.Named("etcd-health")}
	if o.cert != "" || o.key != "" || o.ca != "" {
		if hc.TLS, err = clientTLS("--etcd-", o.ca, o.cert, o.key); err != nil {
			return nil, nil, err
		}
	}
	w, err := etcdhealth.New(client, hc)
	if err != nil {
		return nil, nil, err
	}
	return func(ctx context.Context) func() {
		wctx, cancel := context.WithCancel(ctx)
		done := make(chan struct{})
		go func() {
			defer close(done)
			if err := w.Run(wctx); err != nil {
				lg.Error("watching the etcd endpoints' health failed; the client keeps them all", zap.Error(err))
			}
		}()
		return func() { cancel(); <-done }
	}, w, nil
}

// The etcd clients' connection keepalive: a ping after this long without
// a word from the server (gRPC's shortest), and the connection closed if
// the ping is not answered within the timeout.
const (
	etcdKeepAliveTime    = 10 * time.Second
	etcdKeepAliveTimeout = 2 * time.Second
)

// memberOptions are the settings of one fleet member, of `jobfleet
// orchestrator` and `jobfleet dev`: every flag binds into a field here,
// most of them into the member's own configuration (orch, whose
// AddFlags defines them) and its API's (api).
type memberOptions struct {
	// orch configures the member, its scheduler (orch.Dispatch) and its
	// part in etcd's upkeep (orch.Storage). Its ID is --id (default
	// <hostname>-<port>) and its Advertise --advertise (default derived
	// from --listen).
	orch orchestrator.Config
	// api configures the HTTP API's limits (--api-rate, --max-polls,
	// --trigger-rate, ...).
	api admin.Config
	// listen is --listen, the API's HOST:PORT.
	listen string
	// adminTokenFile is --admin-token-file; insecureNoAuth
	// --insecure-no-auth.
	adminTokenFile string
	insecureNoAuth bool
	// clockOffsetFile, a hidden flag of the fault-injection suite: the
	// member's clock is off by the duration this file holds (see
	// internal/skewclock).
	clockOffsetFile string
	clock           clockwork.Clock // nil: the real clock
	// collectors are registered with the member's metrics beside its
	// own: the etcd endpoints' health (endpointWatch).
	collectors []prometheus.Collector
}

// defaultMemberOptions returns a member's defaults.
func defaultMemberOptions() memberOptions {
	return memberOptions{
		orch:   orchestrator.DefaultConfig("", ""),
		api:    admin.DefaultConfig(),
		listen: "127.0.0.1:8080",
	}
}

// withDefaults returns o with its zero settings replaced by their
// defaults.
func (o memberOptions) withDefaults() memberOptions {
	o.orch, o.api = o.orch.WithDefaults(), o.api.WithDefaults()
	return o
}

// register defines the member's flags, bound to o's fields.
func (o *memberOptions) register(fs *pflag.FlagSet) {
	fs.StringVar(&o.orch.ID, "id", o.orch.ID, "stable member ID (default: <hostname>-<port>)")
	fs.StringVar(&o.listen, "listen", o.listen, "HOST:PORT of the HTTP API")
	fs.StringVar(&o.orch.Advertise, "advertise", o.orch.Advertise, "URL others and workers use to reach this member (default: http://<listen>, https:// with --tls-cert, with the host name for a wildcard host)")
	fs.StringVar(&o.adminTokenFile, "admin-token-file", o.adminTokenFile, "file holding a secret (at least 32 bytes, mode 0600) accepted as the admin credential \"bootstrap\"")
	fs.BoolVar(&o.insecureNoAuth, "insecure-no-auth", o.insecureNoAuth, "turn authentication off: every caller is admin (only with a loopback --listen)")
	fs.StringVar(&o.clockOffsetFile, "test-clock-offset-file", o.clockOffsetFile, "fault injection only: skew this member's clock by the Go duration this file holds, re-read every 100ms")
	_ = fs.MarkHidden("test-clock-offset-file")
	o.orch.AddFlags(fs)
	o.api.AddFlags(fs)
}

// validate checks the settings of the member listening on listen (and
// metricsListen, "" for none), over TLS if withTLS: every one that
// startMember would refuse, without starting anything or reading a file.
func (o memberOptions) validate(listen string, withTLS bool, metricsListen string) error {
	id, advertise, err := o.resolve(listen, withTLS)
	if err != nil {
		return err
	}
	c := o.orch
	c.ID, c.Advertise = id, advertise
	if err := c.Validate(); err != nil {
		return err
	}
	if err := o.api.Validate(); err != nil {
		return err
	}
	if o.insecureNoAuth {
		if !loopbackListen(listen) {
			return settings.Invalid("insecure-no-auth", true, "refused on --listen %q: authentication may be off only on a loopback address (127.0.0.1, ::1, localhost)", listen)
		}
		if metricsListen != "" && !loopbackListen(metricsListen) {
			return settings.Invalid("insecure-no-auth", true, "refused with --metrics-listen %q: every listener must be a loopback address", metricsListen)
		}
	}
	return nil
}

// loopbackListen reports whether listen address addr (HOST:PORT) binds
// only loopback: "localhost" or a loopback IP. A wildcard host is not.
func loopbackListen(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// readAdminSecret reads --admin-token-file into orch.AdminSecret. It is
// the member's one file read before it starts: a command calls it after
// validate and before it connects to etcd.
func (o *memberOptions) readAdminSecret() error {
	if o.adminTokenFile == "" || o.insecureNoAuth {
		return nil
	}
	secret, err := auth.ReadBootstrapFile(o.adminTokenFile)
	if err != nil {
		return fmt.Errorf("--admin-token-file: %w", err)
	}
	o.orch.AdminSecret = secret
	return nil
}

// resolve fills the derived defaults (ID, advertise URL) for listen address
// addr, served over TLS if withTLS: the advertised URL must then be
// https, and http without.
func (o *memberOptions) resolve(addr string, withTLS bool) (id, advertise string, err error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return "", "", settings.Invalid("listen", addr, "want HOST:PORT: %v", err)
	}
	hostname, _ := os.Hostname()
	if hostname == "" {
		hostname = "localhost"
	}
	id = o.orch.ID
	if id == "" {
		id = strings.ReplaceAll(hostname, "_", "-") + "-" + port
	}
	advertise = o.orch.Advertise
	if advertise != "" {
		u, err := url.Parse(advertise)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return "", "", settings.Invalid("advertise", advertise, "want an absolute http(s) URL that other members and workers can reach, like http://host:8080")
		}
		if err := api.CheckPort(u); err != nil {
			return "", "", fmt.Errorf("--advertise %q: %w", advertise, err)
		}
		if u.Scheme == "https" && !withTLS {
			return "", "", settings.Invalid("advertise", advertise, "an https URL, but this member serves plain HTTP: give --tls-cert and --tls-key, or advertise an http:// URL")
		}
		if u.Scheme == "http" && withTLS {
			return "", "", settings.Invalid("advertise", advertise, "an http URL, but this member serves HTTPS (--tls-cert): advertise an https:// URL")
		}
	}
	if advertise == "" {
		if host == "" || host == "0.0.0.0" || host == "::" {
			host = hostname
		}
		scheme := "http://"
		if withTLS {
			scheme = "https://"
		}
		advertise = scheme + net.JoinHostPort(host, port)
	}
	return id, advertise, nil
}

// orchestratorOptions is the configuration of `jobfleet orchestrator`:
// every flag binds into one of its fields.
type orchestratorOptions struct {
	etcd etcdOptions
	mem  memberOptions
	srv  serverOptions
	logs logOptions
}

func defaultOrchestratorOptions() *orchestratorOptions {
	return &orchestratorOptions{etcd: defaultEtcdOptions(), mem: defaultMemberOptions(), srv: defaultServerOptions(), logs: defaultLogOptions("json")}
}

func (c *orchestratorOptions) addFlags(fs *pflag.FlagSet) {
	c.etcd.register(fs)
	c.mem.register(fs)
	c.srv.register(fs, true)
	c.logs.register(fs)
}

func (c *orchestratorOptions) validate() error {
	for _, err := range []error{c.logs.validate(), c.etcd.validate(), c.srv.validate()} {
		if err != nil {
			return err
		}
	}
	return c.mem.validate(c.mem.listen, c.srv.tlsCert != "", c.srv.metricsListen)
}

func (c *orchestratorOptions) withDefaults() settingsOf {
	d := *c
	d.mem, d.srv = c.mem.withDefaults(), c.srv.withDefaults()
	return &d
}

func newOrchestratorCmd() *cobra.Command { return orchestratorCommand(defaultOrchestratorOptions()) }

// orchestratorCommand is `jobfleet orchestrator` configured by cfg.
func orchestratorCommand(cfg *orchestratorOptions) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "orchestrator",
		Short: "Run one orchestrator: a fleet member that owns partitions and fires their jobs",
		Long: `orchestrator runs one fleet member. Its settings come from flags,
JOBFLEET_* environment variables (--flag-name is JOBFLEET_FLAG_NAME) and a
YAML file (--config), in that order of precedence over the defaults; every
setting is checked before anything starts, and --print-config prints the
result. A number or duration of 0 is its default; a negative one is
refused, unless its help says what it means (such as no bound).
docs/configuration.md describes the file.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if printed, err := settle(cmd, cfg); err != nil || printed {
				return err
			}
			if err := cfg.mem.readAdminSecret(); err != nil {
				return err
			}
			mem, srv := cfg.mem, cfg.srv
			lg, stop, err := startProcess(cmd, cfg.logs, "jobfleet orchestrator starting", "jobfleet")
			if err != nil {
				return err
			}
			defer stop()
			tc, err := srv.tls(lg)
			if err != nil {
				return err
			}
			budget, err := fileBudget(lg, memberReserve)
			if err != nil {
				return err
			}
			serving := memberServing{metricsListen: srv.metricsListen}
			fixed := 0
			if serving.metricsListen != "" {
				fixed = metricsConnections
				serving.metrics = serverConfig(lg, metricsConnections, nil)
				serving.metrics.Name = "metrics"
			}
			maxConns, err := srv.connectionCap(cmd, lg, budget, 1, fixed)
			if err != nil {
				return err
			}
			serving.api = srv.apiConfig(lg, "api", maxConns, tc)
			if serving.forward, err = srv.peerTransport(tc); err != nil {
				return err
			}
			client, err := cfg.etcd.client(lg)
			if err != nil {
				return err
			}
			defer client.Close()
			ctx := cmd.Context()
			if mem.clockOffsetFile != "" {
				clock, err := skewclock.New()
				if err != nil {
					return fmt.Errorf("--test-clock-offset-file: %w", err)
				}
				fctx, stop := context.WithCancel(ctx)
				done := make(chan struct{})
				go func() {
					defer close(done)
					skewclock.Follow(fctx, clock, mem.clockOffsetFile, 100*time.Millisecond, lg.Named("skewclock"))
				}()
				defer func() { stop(); <-done }()
				mem.clock = clock
				lg.Warn("this member's clock follows a test offset file: for fault injection only", zap.String("path", mem.clockOffsetFile))
			}
			watch, up, err := cfg.etcd.endpointWatch(client, lg)
			if err != nil {
				return err
			}
			if up != nil {
				mem.collectors = append(mem.collectors, up)
			}
			m, err := startMember(lg, client, mem, mem.listen, serving)
			if err != nil {
				return err
			}
			// Run once the member has taken the client's endpoints (its
			// storage checks and notification policy keep them all).
			defer watch(context.WithoutCancel(ctx))() // also while the member leaves, after ctx ends
			return m.run(ctx)
		},
	}
	addSettings(cmd, cfg)
	return cmd
}

// memberServing says how a member serves HTTP.
type memberServing struct {
	// api configures the HTTP API's listener (its TLS decides the
	// advertised URL's scheme).
	api httpserver.Config
	// metricsListen is the host:port of the metrics listener; "" for none.
	metricsListen string
	// metrics configures the metrics listener.
	metrics httpserver.Config
	// forward carries the requests the member forwards to other members
	// (serverOptions.peerTransport); nil: admin's default.
	forward http.RoundTripper
}

// member is an orchestrator with its HTTP API and, optionally, its
// metrics listener.
type member struct {
	orch    *orchestrator.Orchestrator
	http    *httpserver.Server
	metrics *httpserver.Server // nil without --metrics-listen
	lg      *zap.Logger
}

// startMember starts the member o (validated, its admin secret read)
// listening on listen.
func startMember(lg *zap.Logger, client *clientv3.Client, o memberOptions, listen string, serving memberServing) (*member, error) {
	id, advertise, err := o.resolve(listen, serving.api.TLS != nil)
	if err != nil {
		return nil, err
	}
	if o.insecureNoAuth {
		lg.Warn("AUTHENTICATION IS OFF (--insecure-no-auth): every process on this machine can reach this loopback listener and acts as admin", zap.String("listen", listen))
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}), buildinfo.Collector())
	reg.MustRegister(o.collectors...)
	ocfg := o.orch
	ocfg.ID, ocfg.Advertise = id, advertise
	ocfg.Clock, ocfg.Logger, ocfg.Registry = o.clock, lg, reg
	acfg := o.api
	acfg.Gatherer, acfg.Registry = reg, reg
	acfg.Logger = lg.With(zap.String("member", id))
	acfg.Tokens = auth.NewStore(client, ocfg.Namespace, nil)
	acfg.Insecure, acfg.Loopback = o.insecureNoAuth, loopbackListen(listen)
	// Workers deny these to "http" jobs, even those not told them.
	// Every endpoint the client was made with, also one the endpoint
	// health watcher leaves later: workers keep them all out of reach.
	etcdEndpoints := client.Endpoints()
	acfg.EtcdEndpoints = func() []string { return etcdEndpoints }
	// And notifications (the member adds the client's endpoints at Run).
	ocfg.Notify.Policy.Fleet = append(slices.Clone(ocfg.Notify.Policy.Fleet), etcdEndpoints...)
	if serving.forward != nil {
		acfg.ForwardTransport = serving.forward
	}
	orch, err := orchestrator.New(client, ocfg)
	if err != nil {
		return nil, err
	}
	mlg := acfg.Logger
	am := admin.MemberOf(orch)
	h := admin.Handler(am, acfg)
	serving.api.Registry, serving.metrics.Registry = reg, reg
	if o.insecureNoAuth {
		// Every request is an admin without a credential: none is
		// anonymous in the sense of the limit.
		serving.api.AnonymousRate = -1
	}
	srv, err := httpserver.Start(listen, h, serving.api)
	if err != nil {
		return nil, err
	}
	m := &member{orch: orch, http: srv, lg: lg}
	mlg.Info("serving the HTTP API", zap.String("listen", srv.Addr()), zap.String("advertise", advertise),
		zap.Bool("tls", serving.api.TLS != nil), zap.Bool("client_certificates", serving.api.TLS != nil && serving.api.TLS.ClientCAs != nil),
		zap.Int("max_connections", serving.api.MaxConnections))
	if serving.metricsListen != "" {
		mh := admin.MetricsHandler(am, admin.Config{Gatherer: reg, Logger: mlg})
		if m.metrics, err = httpserver.Start(serving.metricsListen, mh, serving.metrics); err != nil {
			srv.Shutdown()
			return nil, fmt.Errorf("--metrics-listen: %w", err)
		}
		mlg.Info("serving metrics and probes without credentials", zap.String("listen", m.metrics.Addr()),
			zap.Int("max_connections", serving.metrics.MaxConnections))
	}
	return m, nil
}

// shutdown stops the member's listeners and returns the first error.
// It is idempotent.
func (m *member) shutdown() error {
	err := m.http.Shutdown()
	if m.metrics != nil {
		if merr := m.metrics.Shutdown(); err == nil {
			err = merr
		}
	}
	return err
}

// run runs the member until ctx ends or it is drained, then stops its
// listeners.
func (m *member) run(ctx context.Context) error {
	err := m.orch.Run(ctx)
	if herr := m.shutdown(); herr != nil && err == nil {
		err = herr
	}
	return err
}
