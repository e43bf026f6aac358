package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/jonboulle/clockwork"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/spf13/cobra"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/jobfleet/jobfleet/admin"
	"github.com/jobfleet/jobfleet/auth"
	"github.com/jobfleet/jobfleet/dispatch"
	"github.com/jobfleet/jobfleet/dispatch/workers"
	"github.com/jobfleet/jobfleet/internal/buildinfo"
	"github.com/jobfleet/jobfleet/internal/httpserver"
	"github.com/jobfleet/jobfleet/internal/orchestrator"
	"github.com/jobfleet/jobfleet/internal/skewclock"
	"github.com/jobfleet/jobfleet/internal/storage"
	"github.com/jobfleet/jobfleet/membership/deathwatch"
)

// etcdOptions are the flags that say how to reach etcd.
type etcdOptions struct {
	endpoints []string
	cert      string
	key       string
	ca        string
	username  string
	password  string
}

func (o *etcdOptions) register(cmd *cobra.Command) {
	fs := cmd.Flags()
	fs.StringSliceVar(&o.endpoints, "etcd-endpoints", []string{"http://127.0.0.1:2379"}, "etcd client URLs, comma separated")
	fs.StringVar(&o.cert, "etcd-cert", "", "TLS client certificate file for etcd")
	fs.StringVar(&o.key, "etcd-key", "", "TLS client key file for etcd")
	fs.StringVar(&o.ca, "etcd-ca", "", "CA bundle to verify etcd's server certificate")
	fs.StringVar(&o.username, "etcd-username", "", "etcd user name (etcd auth)")
	fs.StringVar(&o.password, "etcd-password", "", "etcd password (etcd auth)")
}

func (o *etcdOptions) client(lg *zap.Logger) (*clientv3.Client, error) {
	if len(o.endpoints) == 0 {
		return nil, errors.New("--etcd-endpoints is required")
	}
	for _, ep := range o.endpoints {
		// Endpoints are shown to viewers (GET /v1/cluster/storage) and
		// sent to workers: credentials have flags of their own.
		if u, err := url.Parse(ep); err == nil && u.User != nil {
			u.User = nil
			return nil, fmt.Errorf("--etcd-endpoints %s: a user name or password in the URL is refused; give them with --etcd-username and --etcd-password (or JOBFLEET_ETCD_PASSWORD)", u)
		}
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

// The etcd clients' connection keepalive: a ping after this long without
// a word from the server (gRPC's shortest), and the connection closed if
// the ping is not answered within the timeout.
const (
	etcdKeepAliveTime    = 10 * time.Second
	etcdKeepAliveTimeout = 2 * time.Second
)

// memberOptions are the flags of one fleet member.
type memberOptions struct {
	id         string
	listen     string
	advertise  string
	namespace  string
	partitions int
	leaseTTL   time.Duration
	runLease   time.Duration
	// workers is the worker registry's configuration, the flags bound
	// into it.
	workers workers.Config
	// deadMembers is the dead member detector's configuration, the flags
	// bound into it.
	deadMembers deathwatch.Config
	// loadsInFlight is --loads-in-flight: partitions loaded at once, 0
	// for no bound; loadJobsInFlight is --load-jobs-in-flight: their jobs,
	// 0 for no bound.
	loadsInFlight    int
	loadJobsInFlight int
	// warmStandby is --warm-standby: keep copies of the partitions this
	// member is the heir of.
	warmStandby bool
	notify      notifyOptions
	retention   retentionOptions
	// clockOffsetFile, a hidden flag of the fault-injection suite: the
	// member's clock is off by the duration this file holds (see
	// internal/skewclock).
	clockOffsetFile string
	clock           clockwork.Clock // nil: the real clock

	adminTokenFile     string
	insecureNoAuth     bool
	limits             admin.Limits
	compactionInterval time.Duration
	etcdQuota          byteSize
	highWater          float64
	storageCheck       time.Duration
}

func (o *memberOptions) register(cmd *cobra.Command) {
	fs := cmd.Flags()
	fs.StringVar(&o.id, "id", "", "stable member ID (default: <hostname>-<port>)")
	fs.StringVar(&o.listen, "listen", "127.0.0.1:8080", "HOST:PORT of the HTTP API")
	fs.StringVar(&o.advertise, "advertise", "", "URL others and workers use to reach this member (default: http://<listen>, https:// with --tls-cert, with the host name for a wildcard host)")
	fs.StringVar(&o.namespace, "namespace", orchestrator.DefaultNamespace, "etcd key prefix of the cluster")
	fs.IntVar(&o.partitions, "partitions", 0, "partition count, used when the cluster is created (default 1024; must match an existing cluster's)")
	fs.DurationVar(&o.leaseTTL, "lease-ttl", 5*time.Second, "member lease TTL, whole seconds; a crashed member's partitions move after it")
	fs.DurationVar(&o.runLease, "run-lease", 30*time.Second, "how long a worker holds an attempt without heartbeat before it is lost and retried (at least 1s)")
	fs.DurationVar(&o.workers.TTL, "worker-ttl", dispatch.DefaultWorkerTTL, "how long a worker's registration lives without a refresh (whole seconds, 2s to 5m); the attempts of a worker silent that long are retried at once")
	fs.DurationVar(&o.workers.IDGrace, "worker-id-grace", workers.DefaultIDGrace, "how long a worker ID stays bound to the credential that registered it after its registration ended (whole seconds, 1s to 24h); until then another credential cannot use the ID")
	fs.DurationVar(&o.deadMembers.Interval, "dead-member-probe-interval", deathwatch.DefaultInterval, "how often this member probes each other member's advertised address (ten times less often while it holds a connection to it open, whose end brings the next probe forward); two refused connections (nothing listens there: its process died) --dead-member-confirm apart revoke that member's lease, so its partitions move at once instead of after its lease TTL (negative: off)")
	fs.DurationVar(&o.deadMembers.Confirm, "dead-member-confirm", deathwatch.DefaultConfirm, "the least time between the two refused probes that confirm a member's death (below --dead-member-probe-interval)")
	fs.DurationVar(&o.workers.PresenceGrace, "worker-presence-grace", workers.DefaultPresenceGrace, "how long a worker whose presence stream with this member broke without its end (its connection closed or reset, as when its process dies) has to open a new one before its registration is revoked and its attempts retried at once (at most half --worker-ttl; negative: wait for the registration's TTL)")
	fs.Float64Var(&o.workers.RequestRate, "worker-register-rate", workers.DefaultRequestRate, "worker registration requests (refreshes included) each credential may send this member per second, with bursts of twice as many (negative: unlimited)")
	fs.Float64Var(&o.workers.WriteRate, "worker-register-writes", workers.DefaultWriteRate, "KiB of worker registrations (new, changed, updated) each credential may make this member write per second, with bursts of 64 (or a second's worth); a new or changed registration beyond it gets 429, an update of its active count is skipped (negative: unlimited)")
	fs.StringVar(&o.adminTokenFile, "admin-token-file", "", "file holding a secret (at least 32 bytes, mode 0600) accepted as the admin credential \"bootstrap\"")
	fs.BoolVar(&o.insecureNoAuth, "insecure-no-auth", false, "turn authentication off: every caller is admin (only with a loopback --listen)")
	fs.IntVar(&o.loadsInFlight, "loads-in-flight", 16, "partitions this member loads from etcd at once after acquiring them (a takeover, a start), the others waiting their turn; 0: no bound on the partitions (--load-jobs-in-flight still bounds their jobs)")
	fs.IntVar(&o.loadJobsInFlight, "load-jobs-in-flight", 2048, "jobs this member loads from etcd at once, summed over the partitions loading: each load first counts its partition's jobs and waits its turn until they fit (a partition larger than this loads alone); 0: no bound. A member loading hundreds of thousands of jobs at once can miss its lease renewal")
	fs.BoolVar(&o.warmStandby, "warm-standby", defaultWarmStandby, "keep a warm copy of the partitions this member would be given if their owner went away (their heir), followed by one watch, so that a takeover builds them from memory instead of reading them from etcd; costs memory for the copies and a watch of every partition's writes")
	o.retention.register(cmd)
	o.notify.register(cmd)
	fs.StringVar(&o.clockOffsetFile, "test-clock-offset-file", "", "fault injection only: skew this member's clock by the Go duration this file holds, re-read every 100ms")
	_ = fs.MarkHidden("test-clock-offset-file")
	d := admin.DefaultLimits()
	fs.Float64Var(&o.limits.Rate, "api-rate", d.Rate, "requests per second each credential may make to the API, worker protocol excluded (negative: unlimited)")
	fs.IntVar(&o.limits.Burst, "api-burst", d.Burst, "burst of --api-rate")
	fs.IntVar(&o.limits.MaxPolls, "max-polls", d.MaxPolls, "worker long polls this member holds at once")
	fs.IntVar(&o.limits.MaxPollsPerCredential, "max-polls-per-credential", d.MaxPollsPerCredential, "worker long polls this member holds at once per credential")
	fs.IntVar(&o.limits.MaxStreams, "max-streams", d.MaxStreams, "partition streams (the console's live map) this member serves at once")
	fs.IntVar(&o.limits.MaxStreamsPerCredential, "max-streams-per-credential", d.MaxStreamsPerCredential, "partition streams this member serves at once per credential")
	fs.DurationVar(&o.compactionInterval, "compaction-interval", storage.DefaultCompactionInterval, "how often the fleet compacts etcd's history, keeping this much of it (at least 1s); 0 leaves compaction to etcd's own --auto-compaction-*")
	fs.Var(&o.etcdQuota, "etcd-quota-bytes", "etcd's space quota: set it to etcd's --quota-backend-bytes (like 8GiB); 0 takes what etcd reports (v3.6+), else etcd's default 2GiB")
	fs.Float64Var(&o.highWater, "storage-high-water", storage.DefaultHighWater, "fraction of the etcd quota above which new jobs, growing replacements and triggers are refused with 507 (0 < f <= 1)")
	fs.DurationVar(&o.storageCheck, "storage-check-interval", storage.DefaultCheckInterval, "how often each member reads etcd's database size and alarms")
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

// authConfig returns the credential settings of a member listening on
// listen (and metricsListen, "" for none): the bootstrap secret, and
// whether authentication is off (only allowed when every listener is on
// loopback, with a warning).
func (o *memberOptions) authConfig(lg *zap.Logger, listen, metricsListen string) (secret string, insecure bool, err error) {
	if err := o.limits.Validate(); err != nil {
		return "", false, fmt.Errorf("--api-burst/--max-polls/--max-streams: %w", err)
	}
	if o.insecureNoAuth {
		if !loopbackListen(listen) {
			return "", false, fmt.Errorf("--insecure-no-auth is refused on --listen %q: authentication may be off only on a loopback address (127.0.0.1, ::1, localhost)", listen)
		}
		if metricsListen != "" && !loopbackListen(metricsListen) {
			return "", false, fmt.Errorf("--insecure-no-auth is refused with --metrics-listen %q: every listener must be a loopback address", metricsListen)
		}
		lg.Warn("AUTHENTICATION IS OFF (--insecure-no-auth): every process on this machine can reach this loopback listener and acts as admin", zap.String("listen", listen))
		return "", true, nil
	}
	if o.adminTokenFile != "" {
		if secret, err = auth.ReadBootstrapFile(o.adminTokenFile); err != nil {
			return "", false, fmt.Errorf("--admin-token-file: %w", err)
		}
	}
	return secret, false, nil
}

// defaultWarmStandby is --warm-standby's default (docs/operations.md says
// why).
const defaultWarmStandby = false

// loadsConfig returns orchestrator.Config.LoadsInFlight and
// LoadJobsInFlight for --loads-in-flight and --load-jobs-in-flight: each
// the bound, or -1 for none (the flag's 0); a negative flag is an error.
func (o *memberOptions) loadsConfig() (loads, jobs int, err error) {
	bound := func(flag string, n int) (int, error) {
		switch {
		case n < 0:
			return 0, fmt.Errorf("--%s %d: want 0 (no bound) or more", flag, n)
		case n == 0:
			return -1, nil // 0 in orchestrator.Config would mean the default
		default:
			return n, nil
		}
	}
	if loads, err = bound("loads-in-flight", o.loadsInFlight); err != nil {
		return 0, 0, err
	}
	if jobs, err = bound("load-jobs-in-flight", o.loadJobsInFlight); err != nil {
		return 0, 0, err
	}
	return loads, jobs, nil
}

// checkFlags reports the first member setting that startMember would
// refuse (--api-burst and the other limits, the storage flags, the
// worker registry's flags, --loads-in-flight, --load-jobs-in-flight), so
// that a command refuses it before it starts anything: dev's embedded
// etcd, credentials and CLI context, a member's connection to etcd.
func (o *memberOptions) checkFlags() error {
	if err := o.limits.Validate(); err != nil {
		return fmt.Errorf("--api-burst/--max-polls/--max-streams: %w", err)
	}
	if _, err := o.storageConfig(); err != nil {
		return err
	}
	wc := o.workers
	wc.Namespace, wc.Member = "/", "check" // the member's own, checked with the rest of its configuration
	if err := wc.Validate(); err != nil {
		return fmt.Errorf("--worker-ttl/--worker-id-grace/--worker-presence-grace/--worker-register-rate/--worker-register-writes: %w", err)
	}
	dc := o.deadMembers
	dc.Namespace, dc.Self = "/", "check"
	if err := dc.Validate(); err != nil {
		return fmt.Errorf("--dead-member-probe-interval/--dead-member-confirm: %w", err)
	}
	_, _, err := o.loadsConfig()
	return err
}

// storageConfig is the storage part of the member's configuration.
func (o *memberOptions) storageConfig() (storage.Config, error) {
	switch {
	case o.compactionInterval < 0:
		return storage.Config{}, fmt.Errorf("--compaction-interval %v is negative; 0 turns the fleet's compaction off", o.compactionInterval)
	case !(o.highWater > 0 && o.highWater <= 1):
		return storage.Config{}, fmt.Errorf("--storage-high-water %v: want a fraction of the quota, above 0 and at most 1 (like 0.8)", o.highWater)
	case o.storageCheck <= 0:
		return storage.Config{}, fmt.Errorf("--storage-check-interval %v: want a positive duration", o.storageCheck)
	}
	c := storage.Config{
		CompactionInterval: o.compactionInterval,
		QuotaBytes:         int64(o.etcdQuota),
		HighWater:          o.highWater,
		CheckInterval:      o.storageCheck,
	}
	if c.CompactionInterval == 0 {
		c.CompactionInterval = storage.CompactionOff
	}
	return c, nil // the rest is checked by orchestrator.New
}

// resolve fills the derived defaults (ID, advertise URL) for listen address
// addr, served over TLS if withTLS: the advertised URL must then be
// https, and http without.
func (o *memberOptions) resolve(addr string, withTLS bool) (id, advertise string, err error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return "", "", fmt.Errorf("--listen %q: %w", addr, err)
	}
	hostname, _ := os.Hostname()
	if hostname == "" {
		hostname = "localhost"
	}
	id = o.id
	if id == "" {
		id = strings.ReplaceAll(hostname, "_", "-") + "-" + port
	}
	advertise = o.advertise
	if advertise != "" {
		u, err := url.Parse(advertise)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return "", "", fmt.Errorf("--advertise %q: want an absolute http(s) URL that other members and workers can reach, like http://host:8080", advertise)
		}
		if u.Scheme == "https" && !withTLS {
			return "", "", fmt.Errorf("--advertise %q is an https URL, but this member serves plain HTTP: give --tls-cert and --tls-key, or advertise an http:// URL", advertise)
		}
		if u.Scheme == "http" && withTLS {
			return "", "", fmt.Errorf("--advertise %q is an http URL, but this member serves HTTPS (--tls-cert): advertise an https:// URL", advertise)
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

func newOrchestratorCmd() *cobra.Command {
	var (
		etcd etcdOptions
		mem  memberOptions
		srv  serverOptions
		logs logOptions
	)
	cmd := &cobra.Command{
		Use:   "orchestrator",
		Short: "Run one orchestrator: a fleet member that owns partitions and fires their jobs",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := mem.checkFlags(); err != nil {
				return err
			}
			lg, err := logs.build()
			if err != nil {
				return err
			}
			defer lg.Sync()
			lg.Info("jobfleet orchestrator starting", buildFields()...)
			tc, err := srv.tls(lg)
			if err != nil {
				return err
			}
			if _, _, err := mem.resolve(mem.listen, tc != nil); err != nil {
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
			}
			maxConns, err := srv.connectionCap(cmd, lg, budget, 1, fixed)
			if err != nil {
				return err
			}
			serving.api = serverConfig(lg, maxConns, tc)
			client, err := etcd.client(lg)
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
			m, err := startMember(lg, client, mem, mem.listen, serving)
			if err != nil {
				return err
			}
			return m.run(ctx)
		},
	}
	etcd.register(cmd)
	mem.register(cmd)
	srv.register(cmd, true)
	logs.register(cmd.Flags(), "json")
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
}

// member is an orchestrator with its HTTP API and, optionally, its
// metrics listener.
type member struct {
	orch    *orchestrator.Orchestrator
	http    *httpserver.Server
	metrics *httpserver.Server // nil without --metrics-listen
	lg      *zap.Logger
}

func startMember(lg *zap.Logger, client *clientv3.Client, o memberOptions, listen string, serving memberServing) (*member, error) {
	id, advertise, err := o.resolve(listen, serving.api.TLS != nil)
	if err != nil {
		return nil, err
	}
	secret, insecure, err := o.authConfig(lg, listen, serving.metricsListen)
	if err != nil {
		return nil, err
	}
	stc, err := o.storageConfig()
	if err != nil {
		return nil, err
	}
	loads, loadJobs, err := o.loadsConfig()
	if err != nil {
		return nil, err
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}), buildinfo.Collector())
	ocfg := orchestrator.Config{
		ID:               id,
		Advertise:        advertise,
		Namespace:        o.namespace,
		Partitions:       o.partitions,
		LeaseTTL:         o.leaseTTL,
		RunLease:         o.runLease,
		Workers:          o.workers,
		DeadMembers:      o.deadMembers,
		LoadsInFlight:    loads,
		LoadJobsInFlight: loadJobs,
		WarmStandby:      o.warmStandby,
		Notify:           o.notify.config(),
		AdminSecret:      secret,
		Storage:          stc,
		Clock:            o.clock,
		Logger:           lg,
		Registry:         reg,
	}
	acfg := admin.Config{
		Gatherer: reg,
		Registry: reg,
		Logger:   lg.With(zap.String("member", id)),
		Tokens:   auth.NewStore(client, o.namespace, nil),
		Insecure: insecure,
		Loopback: loopbackListen(listen),
		Limits:   o.limits,
		// Workers deny these to "http" jobs, even those not told them.
		EtcdEndpoints: client.Endpoints,
	}
	if err := o.retention.apply(&ocfg, &acfg); err != nil {
		return nil, err
	}
	orch, err := orchestrator.New(client, ocfg)
	if err != nil {
		return nil, err
	}
	mlg := acfg.Logger
	acfg.Jobs, acfg.Worker, acfg.Auth, acfg.Storage = orchestratorJobs(orch), orchestratorWorker(orch), orch.Credentials(), orch.Storage
	acfg.Workers = orch.Workers()
	acfg.Cluster = orch
	h := admin.Handler(orch, acfg)
	srv, err := httpserver.Start(listen, h, serving.api)
	if err != nil {
		return nil, err
	}
	m := &member{orch: orch, http: srv, lg: lg}
	mlg.Info("serving the HTTP API", zap.String("listen", srv.Addr()), zap.String("advertise", advertise),
		zap.Bool("tls", serving.api.TLS != nil), zap.Bool("client_certificates", serving.api.TLS != nil && serving.api.TLS.ClientCAs != nil),
		zap.Int("max_connections", serving.api.MaxConnections))
	if serving.metricsListen != "" {
		mh := admin.MetricsHandler(orch, admin.Config{Gatherer: reg, Logger: mlg})
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

// orchestratorWorker returns the admin.WorkerFunc of a member: its
// dispatcher, once it has joined the cluster.
func orchestratorWorker(orch *orchestrator.Orchestrator) admin.WorkerFunc {
	return func() (admin.WorkerProtocol, error) {
		d, err := orch.Dispatcher()
		if err != nil {
			return nil, errors.New("this member has not joined the cluster yet")
		}
		return d, nil
	}
}
