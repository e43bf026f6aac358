package httpserver

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/jobfleet/jobfleet/internal/testkit/tlstest"
)

// whoAmI is what the TLS tests' handler answers: what the request's TLS
// state says about the client.
type whoAmI struct {
	TLS            bool   `json:"tls"`
	VerifiedChains int    `json:"verified_chains"`
	CommonName     string `json:"common_name"`
}

// tlsServer serves whoAmI over TLS from cert files in a temporary
// directory, with reloads timed by clock, and counts the requests that
// reached the handler.
type tlsServer struct {
	*Server
	ca                *tlstest.CA
	certFile, keyFile string
	clock             *clockwork.FakeClock
	logs              *observer.ObservedLogs
	served            atomic.Int32
}

func startTLS(t *testing.T, clientCA bool) *tlsServer {
	t.Helper()
	dir := t.TempDir()
	ts := &tlsServer{
		ca:       tlstest.NewCA(t, "test CA"),
		certFile: filepath.Join(dir, "server.crt"),
		keyFile:  filepath.Join(dir, "server.key"),
		clock:    clockwork.NewFakeClock(),
	}
	ts.ca.Server(t, "127.0.0.1", "localhost").Write(t, ts.certFile, ts.keyFile)
	core, logs := observer.New(zap.InfoLevel)
	ts.logs = logs
	files := TLSFiles{CertFile: ts.certFile, KeyFile: ts.keyFile, Clock: ts.clock, Logger: zap.New(core)}
	if clientCA {
		files.ClientCAFile = ts.ca.CertFile
	}
	tc, err := files.Config()
	if err != nil {
		t.Fatal(err)
	}
	cfg := DefaultConfig()
	cfg.TLS = tc
	ts.Server = start(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ts.served.Add(1)
		who := whoAmI{TLS: r.TLS != nil}
		if r.TLS != nil {
			who.VerifiedChains = len(r.TLS.VerifiedChains)
			if len(r.TLS.VerifiedChains) > 0 {
				who.CommonName = r.TLS.VerifiedChains[0][0].Subject.CommonName
			}
		}
		_ = json.NewEncoder(w).Encode(who)
	}), cfg)
	return ts
}

// client returns an HTTPS client trusting roots, presenting certs, that
// opens a new connection (and handshake) per request.
func client(roots *x509.CertPool, certs ...tls.Certificate) *http.Client {
	return &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
		DisableKeepAlives: true,
		TLSClientConfig:   &tls.Config{RootCAs: roots, Certificates: certs},
	}}
}

// get GETs the server's URL with c and returns the handler's answer and
// the serial number of the certificate the server presented.
func (ts *tlsServer) get(c *http.Client) (whoAmI, string, error) {
	resp, err := c.Get(ts.URL())
	if err != nil {
		return whoAmI{}, "", err
	}
	defer resp.Body.Close()
	var who whoAmI
	if err := json.NewDecoder(resp.Body).Decode(&who); err != nil {
		return whoAmI{}, "", err
	}
	return who, resp.TLS.PeerCertificates[0].SerialNumber.String(), nil
}

func TestTLSWithClientCertificates(t *testing.T) {
	ts := startTLS(t, true)
	roots := ts.ca.Pool()
	other := tlstest.NewCA(t, "another CA")

	t.Run("plain HTTP is refused", func(t *testing.T) {
		resp, err := (&http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}).Get("http://" + ts.Addr())
		t.Logf("plain HTTP to the TLS listener: %v", describe(resp, err))
		if err == nil {
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusBadRequest {
				t.Errorf("plain HTTP: %d %q, want 400 or a failed connection", resp.StatusCode, body)
			}
		}
	})
	t.Run("no client certificate is refused", func(t *testing.T) {
		if who, _, err := ts.get(client(roots)); err == nil {
			t.Errorf("without a client certificate: served %+v, want a failed handshake", who)
		}
	})
	t.Run("a client certificate of another CA is refused", func(t *testing.T) {
		if who, _, err := ts.get(client(roots, other.Client(t, "intruder").TLS(t))); err == nil {
			t.Errorf("with a foreign client certificate: served %+v, want a failed handshake", who)
		}
	})
	t.Run("TLS 1.1 is refused", func(t *testing.T) {
		c := client(roots, ts.ca.Client(t, "old").TLS(t))
		c.Transport.(*http.Transport).TLSClientConfig.MaxVersion = tls.VersionTLS11
		if who, _, err := ts.get(c); err == nil {
			t.Errorf("over TLS 1.1: served %+v, want a failed handshake", who)
		}
	})
	if n := ts.served.Load(); n != 0 {
		t.Fatalf("%d refused requests reached the handler", n)
	}
	t.Run("a valid client certificate gets through with its verified chain", func(t *testing.T) {
		who, _, err := ts.get(client(roots, ts.ca.Client(t, "ci-worker").TLS(t)))
		if err != nil {
			t.Fatal(err)
		}
		if !who.TLS || who.VerifiedChains == 0 || who.CommonName != "ci-worker" {
			t.Errorf("handler saw %+v, want TLS with a verified chain of CommonName ci-worker", who)
		}
	})
}

func TestTLSWithoutClientCA(t *testing.T) {
	ts := startTLS(t, false)
	who, _, err := ts.get(client(ts.ca.Pool()))
	if err != nil {
		t.Fatal(err)
	}
	if !who.TLS || who.VerifiedChains != 0 {
		t.Errorf("handler saw %+v, want TLS without a client chain", who)
	}
	if _, _, err := ts.get(client(tlstest.NewCA(t, "another CA").Pool())); err == nil {
		t.Error("a client trusting another CA accepted the server's certificate")
	}
}

func TestTLSCertificateReload(t *testing.T) {
	ts := startTLS(t, true)
	c := client(ts.ca.Pool(), ts.ca.Client(t, "ci-worker").TLS(t))
	serial := func() string {
		t.Helper()
		_, s, err := ts.get(c)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	first := serial()

	// A new pair is served once the reload interval has passed, not before.
	next := ts.ca.Server(t, "127.0.0.1")
	next.Write(t, ts.certFile, ts.keyFile)
	if got := serial(); got != first {
		t.Fatalf("serial %s before the reload interval passed, want still %s", got, first)
	}
	ts.clock.Advance(DefaultReloadInterval)
	if got, want := serial(), next.Cert.SerialNumber.String(); got != want {
		t.Fatalf("serial %s after the files changed and the interval passed, want the new %s", got, want)
	}
	if n := ts.logs.FilterMessage("TLS certificate reloaded").Len(); n != 1 {
		t.Errorf("%d reload log lines, want 1", n)
	}

	// Invalid new contents keep the current pair, logged once.
	for _, bad := range []struct {
		name      string
		cert, key []byte
	}{
		{"key of another certificate", next.CertPEM, ts.ca.Server(t, "127.0.0.1").KeyPEM},
		{"garbage certificate", []byte("not a certificate"), next.KeyPEM},
	} {
		t.Run(bad.name, func(t *testing.T) {
			before := ts.logs.FilterMessageSnippet("do not load").Len()
			tlstest.WriteFile(t, ts.certFile, bad.cert)
			tlstest.WriteFile(t, ts.keyFile, bad.key)
			for range 2 { // checked twice: logged once
				ts.clock.Advance(DefaultReloadInterval)
				if got, want := serial(), next.Cert.SerialNumber.String(); got != want {
					t.Fatalf("serial %s after invalid files, want the previous %s kept", got, want)
				}
			}
			if n := ts.logs.FilterMessageSnippet("do not load").Len() - before; n != 1 {
				t.Errorf("%d log lines for the invalid files, want 1", n)
			}
		})
	}

	// A missing file (between a delete and a create) keeps the pair too.
	if err := os.Remove(ts.keyFile); err != nil {
		t.Fatal(err)
	}
	ts.clock.Advance(DefaultReloadInterval)
	if got, want := serial(), next.Cert.SerialNumber.String(); got != want {
		t.Fatalf("serial %s with the key file missing, want the previous %s kept", got, want)
	}

	// A valid pair after invalid ones is picked up.
	last := ts.ca.Server(t, "127.0.0.1")
	last.Write(t, ts.certFile, ts.keyFile)
	ts.clock.Advance(DefaultReloadInterval)
	if got, want := serial(), last.Cert.SerialNumber.String(); got != want {
		t.Fatalf("serial %s after a valid pair replaced invalid files, want %s", got, want)
	}
}

func TestTLSFilesConfigErrors(t *testing.T) {
	ca := tlstest.NewCA(t, "test CA")
	dir := t.TempDir()
	cert, key := filepath.Join(dir, "s.crt"), filepath.Join(dir, "s.key")
	pair := ca.Server(t, "127.0.0.1")
	pair.Write(t, cert, key)
	mismatched := filepath.Join(dir, "other.key")
	tlstest.WriteFile(t, mismatched, ca.Server(t, "127.0.0.1").KeyPEM)
	notPEM := filepath.Join(dir, "not.pem")
	tlstest.WriteFile(t, notPEM, []byte("hello"))

	for _, tt := range []struct {
		name  string
		files TLSFiles
		want  string
	}{
		{"no key", TLSFiles{CertFile: cert}, "key file"},
		{"missing cert file", TLSFiles{CertFile: filepath.Join(dir, "nope.crt"), KeyFile: key}, "nope.crt"},
		{"mismatched key", TLSFiles{CertFile: cert, KeyFile: mismatched}, "other.key"},
		{"client CA without certificates", TLSFiles{CertFile: cert, KeyFile: key, ClientCAFile: notPEM}, "not.pem"},
		{"negative reload interval", TLSFiles{CertFile: cert, KeyFile: key, ReloadInterval: -time.Second}, "reload interval"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := tt.files.Config()
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("Config() = %v, want an error containing %q", err, tt.want)
			}
		})
	}
	tc, err := TLSFiles{CertFile: cert, KeyFile: key}.Config()
	if err != nil {
		t.Fatal(err)
	}
	if tc.MinVersion != tls.VersionTLS12 || tc.ClientAuth != tls.NoClientCert {
		t.Errorf("config: min version %#x, client auth %v; want TLS 1.2, no client certificates", tc.MinVersion, tc.ClientAuth)
	}
}

// describe says how a request ended: its status or its error.
func describe(resp *http.Response, err error) string {
	if err != nil {
		return err.Error()
	}
	return resp.Status
}
