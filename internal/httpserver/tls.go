package httpserver

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jonboulle/clockwork"
	"go.uber.org/zap"
)

// DefaultReloadInterval is how often, at most, TLSFiles' certificate files
// are checked for a change.
const DefaultReloadInterval = 5 * time.Second

// TLSFiles names the PEM files of a server's TLS set-up.
type TLSFiles struct {
	// CertFile holds the server certificate, followed by any intermediate
	// certificates. Required.
	CertFile string
	// KeyFile holds the certificate's private key. Required.
	KeyFile string
	// ClientCAFile, if set, holds the CA certificates client certificates
	// must verify against; every client must then present one. Read once.
	ClientCAFile string
	// ReloadInterval is the least time between two checks of CertFile and
	// KeyFile for new contents; zero means DefaultReloadInterval.
	ReloadInterval time.Duration
	// Clock times the checks; nil means the real clock.
	Clock clockwork.Clock
	// Logger receives one line per reload and per failed reload; nil means
	// no logs.
	Logger *zap.Logger
}

// Config loads the files and returns a server configuration: TLS 1.2 at
// least; the certificate from CertFile and KeyFile, checked for new
// contents during handshakes at most once per ReloadInterval (a new pair
// that loads replaces the old one; one that does not is logged and the
// old one kept); with ClientCAFile, client certificates required and
// verified (the connection state then carries the verified chains).
// It returns an error naming the file if a file cannot be read or the pair
// does not load.
func (f TLSFiles) Config() (*tls.Config, error) {
	if f.CertFile == "" || f.KeyFile == "" {
		return nil, errors.New("a TLS certificate needs both a certificate file and a key file")
	}
	if f.ReloadInterval < 0 {
		return nil, fmt.Errorf("TLS reload interval must not be negative, got %v", f.ReloadInterval)
	}
	if f.ReloadInterval == 0 {
		f.ReloadInterval = DefaultReloadInterval
	}
	if f.Clock == nil {
		f.Clock = clockwork.NewRealClock()
	}
	if f.Logger == nil {
		f.Logger = zap.NewNop()
	}
	r := &certReloader{files: f, lg: f.Logger}
	certPEM, keyPEM, err := r.read()
	if err != nil {
		return nil, err
	}
	cur, err := loadPair(certPEM, keyPEM)
	if err != nil {
		return nil, fmt.Errorf("TLS certificate %s with key %s: %w", f.CertFile, f.KeyFile, err)
	}
	r.cur.Store(cur)
	r.tried = pairFiles{certPEM, keyPEM}
	r.checked = f.Clock.Now()
	cfg := &tls.Config{
		MinVersion:     tls.VersionTLS12,
		GetCertificate: r.getCertificate,
	}
	if f.ClientCAFile != "" {
		pem, err := os.ReadFile(f.ClientCAFile)
		if err != nil {
			return nil, fmt.Errorf("TLS client CA: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("TLS client CA: no PEM certificate in %s", f.ClientCAFile)
		}
		cfg.ClientCAs = pool
		cfg.ClientAuth = tls.RequireAndVerifyClientCert
	}
	f.Logger.Info("TLS certificate loaded", certFields(cur)...)
	return cfg, nil
}

// pairFiles are the contents of a certificate file and its key file.
type pairFiles struct{ cert, key []byte }

// certReloader serves the current certificate and replaces it when the
// files' contents change.
type certReloader struct {
	files TLSFiles
	lg    *zap.Logger
	cur   atomic.Pointer[tls.Certificate] // what handshakes get; never nil

	// mu is held by the one handshake that checks the files; the others
	// go on with cur meanwhile. It guards the fields below.
	mu      sync.Mutex
	checked time.Time // last check
	tried   pairFiles // contents last loaded or found not to load
}

func (r *certReloader) getCertificate(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	if r.mu.TryLock() {
		if now := r.files.Clock.Now(); now.Sub(r.checked) >= r.files.ReloadInterval {
			r.checked = now
			r.reloadLocked()
		}
		r.mu.Unlock()
	}
	return r.cur.Load(), nil
}

// reloadLocked loads the files if their contents differ from the last
// ones tried, and logs the outcome once per new contents.
func (r *certReloader) reloadLocked() {
	certPEM, keyPEM, err := r.read()
	if err != nil {
		// A file being replaced may be missing for a moment: retried at the
		// next check, logged at debug level only, since it repeats.
		r.lg.Debug("TLS certificate files unreadable; keeping the current certificate", zap.Error(err))
		return
	}
	if bytes.Equal(certPEM, r.tried.cert) && bytes.Equal(keyPEM, r.tried.key) {
		return
	}
	r.tried = pairFiles{certPEM, keyPEM}
	next, err := loadPair(certPEM, keyPEM)
	if err != nil {
		r.lg.Error("TLS certificate files changed but do not load; keeping the current certificate",
			append(certFields(r.cur.Load()), zap.String("cert_file", r.files.CertFile), zap.String("key_file", r.files.KeyFile), zap.Error(err))...)
		return
	}
	r.cur.Store(next)
	r.lg.Info("TLS certificate reloaded", certFields(next)...)
}

func (r *certReloader) read() (certPEM, keyPEM []byte, err error) {
	if certPEM, err = os.ReadFile(r.files.CertFile); err != nil {
		return nil, nil, fmt.Errorf("TLS certificate: %w", err)
	}
	if keyPEM, err = os.ReadFile(r.files.KeyFile); err != nil {
		return nil, nil, fmt.Errorf("TLS key: %w", err)
	}
	return certPEM, keyPEM, nil
}

// loadPair parses a certificate chain and its key, and checks that they
// match; the result's Leaf is set.
func loadPair(certPEM, keyPEM []byte) (*tls.Certificate, error) {
	pair, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return nil, err
	}
	if pair.Leaf == nil {
		if pair.Leaf, err = x509.ParseCertificate(pair.Certificate[0]); err != nil {
			return nil, err
		}
	}
	return &pair, nil
}

// certFields describe a certificate in a log line, its serial number in
// hexadecimal as `openssl x509 -noout -serial` prints it.
func certFields(c *tls.Certificate) []zap.Field {
	ips := make([]string, len(c.Leaf.IPAddresses))
	for i, ip := range c.Leaf.IPAddresses {
		ips[i] = ip.String()
	}
	return []zap.Field{
		zap.String("serial", fmt.Sprintf("%X", c.Leaf.SerialNumber)),
		zap.String("subject", c.Leaf.Subject.String()),
		zap.Strings("dns_names", c.Leaf.DNSNames),
		zap.Strings("ip_addresses", ips),
		zap.Time("not_after", c.Leaf.NotAfter),
	}
}
