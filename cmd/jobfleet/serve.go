package main

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"go.uber.org/zap"

	"github.com/jobfleet/jobfleet/internal/httpserver"
	"github.com/jobfleet/jobfleet/internal/settings"
)

// metricsConnections caps the connections of a metrics listener (scrapers
// and probes: a handful at a time).
const metricsConnections = 64

// serverOptions are the settings of a command's HTTP listeners.
type serverOptions struct {
	maxConnections int
	// fair holds the fairness limits of the API listeners (their
	// defaults: httpserver's).
	fair        httpserver.Config
	tlsCert     string
	tlsKey      string
	tlsClientCA string
	// peerCA is the CA bundle other members' HTTPS certificates are
	// verified with when this member forwards a request to one
	// (peerTransport); "" means the system's roots.
	peerCA        string
	metricsListen string
}

// register adds --max-connections, and the TLS and metrics listener flags
// when withTLS.
func (o *serverOptions) register(fs *pflag.FlagSet, withTLS bool) {
	fs.IntVar(&o.maxConnections, "max-connections", o.maxConnections,
		"open connections per HTTP API listener at most; at the cap a new connection closes the one idle the longest, or waits if none is idle (the default is lowered to fit the open-file limit, a value given is not)")
	fs.IntVar(&o.fair.MaxConnectionsPerAddress, "max-connections-per-address", o.fair.MaxConnectionsPerAddress,
		"open connections per HTTP API listener from one client address (IPv4 address or IPv6 /64) at most; further ones are closed at once (e.g. -1 behind a proxy)")
	settings.Unbounded(fs, "max-connections-per-address", "no limit")
	fs.Float64Var(&o.fair.AnonymousRate, "anonymous-rate", o.fair.AnonymousRate,
		"requests per second one client address may make without a valid credential (probes, refused credentials); beyond it 429")
	settings.Unbounded(fs, "anonymous-rate", "no limit")
	fs.IntVar(&o.fair.AnonymousBurst, "anonymous-burst", o.fair.AnonymousBurst, "bursts of --anonymous-rate")
	if !withTLS {
		return
	}
	fs.StringVar(&o.tlsCert, "tls-cert", o.tlsCert, "serve the HTTP API over TLS with this PEM certificate (chain) file; re-read when it changes")
	fs.StringVar(&o.tlsKey, "tls-key", o.tlsKey, "PEM private key file of --tls-cert; re-read when it changes")
	fs.StringVar(&o.tlsClientCA, "tls-client-ca", o.tlsClientCA, "require every client of the HTTP API to present a certificate signed by a CA of this PEM file")
	fs.StringVar(&o.peerCA, "peer-ca", o.peerCA, "verify other members' HTTPS certificates with the CAs of this PEM file when forwarding a request to the owner of a run's partition (live output); default: the system's roots")
	fs.StringVar(&o.metricsListen, "metrics-listen", o.metricsListen, "HOST:PORT of a separate plain-HTTP listener serving only GET /metrics, /healthz and /readyz, without credentials (default: off)")
}

// defaultServerOptions returns the listeners' defaults.
func defaultServerOptions() serverOptions {
	return serverOptions{maxConnections: httpserver.DefaultMaxConnections, fair: httpserver.Config{
		MaxConnectionsPerAddress: httpserver.DefaultMaxConnectionsPerAddress,
		AnonymousRate:            httpserver.DefaultAnonymousRate,
		AnonymousBurst:           httpserver.DefaultAnonymousBurst,
	}}
}

// withDefaults returns o with a zero --max-connections replaced by its
// default.
func (o serverOptions) withDefaults() serverOptions {
	if o.maxConnections == 0 {
		o.maxConnections = httpserver.DefaultMaxConnections
	}
	if o.fair.MaxConnectionsPerAddress == 0 {
		o.fair.MaxConnectionsPerAddress = httpserver.DefaultMaxConnectionsPerAddress
	}
	if o.fair.AnonymousRate == 0 {
		o.fair.AnonymousRate = httpserver.DefaultAnonymousRate
	}
	if o.fair.AnonymousBurst == 0 {
		o.fair.AnonymousBurst = httpserver.DefaultAnonymousBurst
	}
	return o
}

// validate checks the settings without reading any file.
func (o serverOptions) validate() error {
	switch {
	case o.fair.AnonymousBurst < 0:
		return settings.Invalid("anonymous-burst", o.fair.AnonymousBurst, "want at least 1 (0: the default, %d)", httpserver.DefaultAnonymousBurst)
	case o.maxConnections < 0:
		return settings.Invalid("max-connections", o.maxConnections, "want at least 1 (0: the default, %d, lowered to fit the open-file limit)", httpserver.DefaultMaxConnections)
	case o.tlsCert == "" && o.tlsKey == "" && o.tlsClientCA != "":
		return settings.Invalid("tls-client-ca", o.tlsClientCA, "needs --tls-cert and --tls-key")
	case o.tlsCert != "" && o.tlsKey == "":
		return settings.Invalid("tls-key", o.tlsKey, "--tls-cert and --tls-key go together")
	case o.tlsCert == "" && o.tlsKey != "":
		return settings.Invalid("tls-cert", o.tlsCert, "--tls-cert and --tls-key go together")
	case o.peerCA != "" && o.tlsCert == "":
		return settings.Invalid("peer-ca", o.peerCA, "needs --tls-cert and --tls-key: members serving plain HTTP are reached without TLS")
	}
	if o.metricsListen != "" {
		if _, _, err := net.SplitHostPort(o.metricsListen); err != nil {
			return settings.Invalid("metrics-listen", o.metricsListen, "want HOST:PORT: %v", err)
		}
	}
	return nil
}

// tls returns the API's TLS configuration from the flags, or nil for
// plain HTTP.
func (o *serverOptions) tls(lg *zap.Logger) (*tls.Config, error) {
	switch {
	case o.tlsCert == "" && o.tlsKey == "" && o.tlsClientCA == "":
		return nil, nil
	case o.tlsCert == "" || o.tlsKey == "":
		return nil, errors.New("--tls-cert and --tls-key go together (and --tls-client-ca needs them)")
	}
	c, err := httpserver.TLSFiles{
		CertFile:     o.tlsCert,
		KeyFile:      o.tlsKey,
		ClientCAFile: o.tlsClientCA,
		Logger:       lg.Named("tls"),
	}.Config()
	if err != nil {
		return nil, fmt.Errorf("--tls-cert/--tls-key/--tls-client-ca: %w", err)
	}
	return c, nil
}

// peerTransport returns the transport this member forwards requests to
// other members with (admin.Config.ForwardTransport), given its API's TLS
// configuration api (nil: plain HTTP, and so are the others: a clone of
// http.DefaultTransport). With TLS it verifies the others' certificates
// with --peer-ca's CAs (the system's roots without it), and when the API
// asks its clients for certificates (--tls-client-ca) it presents this
// member's own (--tls-cert, as reloaded), which must then allow client
// authentication. It returns an error if --peer-ca cannot be read or
// holds no certificate.
func (o *serverOptions) peerTransport(api *tls.Config) (*http.Transport, error) {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	if api == nil {
		return tr, nil
	}
	tc := &tls.Config{MinVersion: tls.VersionTLS12}
	if o.peerCA != "" {
		pem, err := os.ReadFile(o.peerCA)
		if err != nil {
			return nil, fmt.Errorf("--peer-ca: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("--peer-ca %s: no PEM certificate in it", o.peerCA)
		}
		tc.RootCAs = pool
	}
	if api.ClientCAs != nil && api.GetCertificate != nil {
		tc.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
			return api.GetCertificate(&tls.ClientHelloInfo{})
		}
	}
	tr.TLSClientConfig = tc
	return tr, nil
}

// Shares of the open-file limit kept out of the listeners' reach: by a
// fleet member or worker (etcd client, outgoing connections, logs) and by
// `jobfleet dev` (also the embedded etcd's files and client connections,
// the workers' connections to the members and to job endpoints).
var (
	memberReserve = reserve{min: 256, fraction: 4}
	devReserve    = reserve{min: 512, fraction: 2}
)

// reserve is max(min, limit/fraction) descriptors.
type reserve struct{ min, fraction uint64 }

// fileBudget raises the process's open-file limit to its hard limit, logs
// the limits, and returns the budget of its listeners with r kept for the
// rest of the process.
func fileBudget(lg *zap.Logger, r reserve) (httpserver.Budget, error) {
	before, after, err := httpserver.RaiseOpenFileLimit()
	if err != nil {
		return httpserver.Budget{}, err
	}
	b := httpserver.Budget{OpenFiles: after.Soft, Reserve: max(r.min, after.Soft/r.fraction)}
	lg.Info("open-file limit", zap.Uint64("soft_before", before.Soft), zap.Uint64("soft", after.Soft),
		zap.Uint64("hard", after.Hard), zap.Uint64("kept_from_listeners", b.Reserve))
	return b, nil
}

// connectionCap returns the per-listener cap of n API listeners from
// --max-connections (a value given must fit, the default is lowered to
// fit), besides fixed connections of other listeners. A value is given
// when a flag, variable or config file set it to anything but 0 (the
// default).
func (o *serverOptions) connectionCap(cmd *cobra.Command, lg *zap.Logger, b httpserver.Budget, n, fixed int) (int, error) {
	explicit := cmd.Flags().Changed("max-connections") && o.maxConnections != 0
	c, lowered, err := httpserver.ConnectionCap(b, n, fixed, o.withDefaults().maxConnections, explicit)
	if err != nil {
		return 0, fmt.Errorf("--max-connections: %w", err)
	}
	if lowered {
		lg.Warn("--max-connections lowered to fit the open-file limit", zap.Int("asked", o.maxConnections),
			zap.Int("max_connections", c), zap.Int("listeners", n), zap.Uint64("open_file_limit", b.OpenFiles))
	}
	return c, nil
}

// apiConfig returns the limits of an API listener named name: those of
// serverConfig with the fairness flags.
func (o *serverOptions) apiConfig(lg *zap.Logger, name string, maxConnections int, tc *tls.Config) httpserver.Config {
	cfg := serverConfig(lg, maxConnections, tc)
	cfg.Name = name
	cfg.MaxConnectionsPerAddress = o.fair.MaxConnectionsPerAddress
	cfg.AnonymousRate, cfg.AnonymousBurst = o.fair.AnonymousRate, o.fair.AnonymousBurst
	return cfg
}

// serverConfig returns the limits of one listener: the defaults with a
// connection cap, TLS (nil: plain HTTP) and net/http's error lines sent
// to lg.
//
// One write timeout serves every route of the API: longer than the
// longest long poll (httpserver.DefaultWriteTimeout is
// dispatch.MaxPollWait + 30s, checked by a test). Per-route deadlines
// would cut ordinary replies sooner, but every long route would have to
// remember to extend its own; what bounds what slow clients can hold is
// the connection cap, not the write timeout.
func serverConfig(lg *zap.Logger, maxConnections int, tc *tls.Config) httpserver.Config {
	cfg := httpserver.DefaultConfig()
	cfg.MaxConnections = maxConnections
	cfg.TLS = tc
	cfg.Logger = lg.Named("http")
	return cfg
}

// clientTLS builds the TLS configuration of a client from PEM files: ca,
// the CAs to verify the server against (empty: the system's), and cert
// with key, a client certificate (both or neither). prefix starts the
// flag names in errors ("--", "--etcd-").
func clientTLS(prefix, ca, cert, key string) (*tls.Config, error) {
	tc := &tls.Config{MinVersion: tls.VersionTLS12}
	if cert != "" || key != "" {
		if cert == "" || key == "" {
			return nil, fmt.Errorf("%scert and %skey go together", prefix, prefix)
		}
		pair, err := tls.LoadX509KeyPair(cert, key)
		if err != nil {
			return nil, fmt.Errorf("%scert/%skey: %w", prefix, prefix, err)
		}
		tc.Certificates = []tls.Certificate{pair}
	}
	if ca != "" {
		pem, err := os.ReadFile(ca)
		if err != nil {
			return nil, fmt.Errorf("%sca: %w", prefix, err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("%sca: no certificate found in %s", prefix, ca)
		}
		tc.RootCAs = pool
	}
	return tc, nil
}
