package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/spf13/cobra"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/jobfleet/jobfleet/admin"
	"github.com/jobfleet/jobfleet/internal/orchestrator"
	"github.com/jobfleet/jobfleet/internal/storage"
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
	cfg := clientv3.Config{
		Endpoints:   o.endpoints,
		DialTimeout: 5 * time.Second,
		Username:    o.username,
		Password:    o.password,
		Logger:      lg.Named("etcd-client").WithOptions(zap.IncreaseLevel(zap.ErrorLevel)),
	}
	if o.cert != "" || o.key != "" || o.ca != "" {
		tc := &tls.Config{MinVersion: tls.VersionTLS12}
		if o.cert != "" || o.key != "" {
			pair, err := tls.LoadX509KeyPair(o.cert, o.key)
			if err != nil {
				return nil, fmt.Errorf("--etcd-cert/--etcd-key: %w", err)
			}
			tc.Certificates = []tls.Certificate{pair}
		}
		if o.ca != "" {
			pem, err := os.ReadFile(o.ca)
			if err != nil {
				return nil, fmt.Errorf("--etcd-ca: %w", err)
			}
			pool := x509.NewCertPool()
			if !pool.AppendCertsFromPEM(pem) {
				return nil, fmt.Errorf("--etcd-ca: no certificate found in %s", o.ca)
			}
			tc.RootCAs = pool
		}
		cfg.TLS = tc
	}
	c, err := clientv3.New(cfg)
	if err != nil {
		return nil, fmt.Errorf("etcd client: %w", err)
	}
	return c, nil
}

// memberOptions are the flags of one fleet member.
type memberOptions struct {
	id         string
	listen     string
	advertise  string
	namespace  string
	partitions int
	leaseTTL   time.Duration
	runLease   time.Duration

	compactionInterval time.Duration
	etcdQuota          byteSize
	highWater          float64
	storageCheck       time.Duration
}

func (o *memberOptions) register(cmd *cobra.Command) {
	fs := cmd.Flags()
	fs.StringVar(&o.id, "id", "", "stable member ID (default: <hostname>-<port>)")
	fs.StringVar(&o.listen, "listen", "127.0.0.1:8080", "HOST:PORT of the HTTP API")
	fs.StringVar(&o.advertise, "advertise", "", "URL others and workers use to reach this member (default: http://<listen>, with the host name for a wildcard host)")
	fs.StringVar(&o.namespace, "namespace", orchestrator.DefaultNamespace, "etcd key prefix of the cluster")
	fs.IntVar(&o.partitions, "partitions", 0, "partition count, used when the cluster is created (default 1024; must match an existing cluster's)")
	fs.DurationVar(&o.leaseTTL, "lease-ttl", 5*time.Second, "member lease TTL, whole seconds; a crashed member's partitions move after it")
	fs.DurationVar(&o.runLease, "run-lease", 30*time.Second, "how long a worker holds an attempt without heartbeat before it is lost and retried (at least 1s)")
	fs.DurationVar(&o.compactionInterval, "compaction-interval", storage.DefaultCompactionInterval, "how often the fleet compacts etcd's history, keeping this much of it (at least 1s); 0 leaves compaction to etcd's own --auto-compaction-*")
	fs.Var(&o.etcdQuota, "etcd-quota-bytes", "etcd's space quota: set it to etcd's --quota-backend-bytes (like 8GiB); 0 takes what etcd reports (v3.6+), else etcd's default 2GiB")
	fs.Float64Var(&o.highWater, "storage-high-water", storage.DefaultHighWater, "fraction of the etcd quota above which new jobs, growing replacements and triggers are refused with 507 (0 < f <= 1)")
	fs.DurationVar(&o.storageCheck, "storage-check-interval", storage.DefaultCheckInterval, "how often each member reads etcd's database size and alarms")
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
// addr.
func (o *memberOptions) resolve(addr string) (id, advertise string, err error) {
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
	}
	if advertise == "" {
		if host == "" || host == "0.0.0.0" || host == "::" {
			host = hostname
		}
		advertise = "http://" + net.JoinHostPort(host, port)
	}
	return id, advertise, nil
}

func newOrchestratorCmd() *cobra.Command {
	var (
		etcd etcdOptions
		mem  memberOptions
		logs logOptions
	)
	cmd := &cobra.Command{
		Use:   "orchestrator",
		Short: "Run one orchestrator: a fleet member that owns partitions and fires their jobs",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			lg, err := logs.build()
			if err != nil {
				return err
			}
			defer lg.Sync()
			client, err := etcd.client(lg)
			if err != nil {
				return err
			}
			defer client.Close()
			m, err := startMember(lg, client, mem, mem.listen)
			if err != nil {
				return err
			}
			return m.run(cmd.Context())
		},
	}
	etcd.register(cmd)
	mem.register(cmd)
	logs.register(cmd.Flags(), "json")
	return cmd
}

// member is an orchestrator with its HTTP API.
type member struct {
	orch *orchestrator.Orchestrator
	http *httpServer
	lg   *zap.Logger
}

func startMember(lg *zap.Logger, client *clientv3.Client, o memberOptions, listen string) (*member, error) {
	id, advertise, err := o.resolve(listen)
	if err != nil {
		return nil, err
	}
	stc, err := o.storageConfig()
	if err != nil {
		return nil, err
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	orch, err := orchestrator.New(client, orchestrator.Config{
		ID:         id,
		Advertise:  advertise,
		Namespace:  o.namespace,
		Partitions: o.partitions,
		LeaseTTL:   o.leaseTTL,
		RunLease:   o.runLease,
		Storage:    stc,
		Logger:     lg,
		Registry:   reg,
	})
	if err != nil {
		return nil, err
	}
	h := admin.Handler(orch, admin.Config{Gatherer: reg, Logger: lg.With(zap.String("member", id)), Jobs: orchestratorJobs(orch), Worker: orchestratorWorker(orch), Storage: orch.Storage})
	srv, err := listenHTTP(listen, h)
	if err != nil {
		return nil, err
	}
	lg.Info("serving the HTTP API", zap.String("member", id), zap.String("listen", srv.Addr()), zap.String("advertise", advertise))
	return &member{orch: orch, http: srv, lg: lg}, nil
}

// run runs the member until ctx ends or it is drained, then stops its API.
func (m *member) run(ctx context.Context) error {
	err := m.orch.Run(ctx)
	if herr := m.http.shutdown(); herr != nil && err == nil {
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
