package main

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jobfleet/jobfleet/api"

	"go.uber.org/zap/zaptest"

	"github.com/jobfleet/jobfleet/internal/orchestrator"
	"github.com/jobfleet/jobfleet/internal/testkit/tlstest"
)

func TestAPIWriteTimeoutOutlastsTheLongestLongPoll(t *testing.T) {
	cfg := serverConfig(zaptest.NewLogger(t), 10, nil)
	// A poll is held up to MaxPollWait after its headers, then answered:
	// the write timeout, counted from the headers, must leave room for the
	// body, the wait and the reply.
	if margin := cfg.WriteTimeout - api.MaxPollWait; margin < 15*time.Second {
		t.Errorf("write timeout %v leaves %v beyond the longest long poll (%v), want at least 15s", cfg.WriteTimeout, margin, api.MaxPollWait)
	}
	if err := cfg.Validate(); err != nil {
		t.Errorf("the API's listener configuration: %v", err)
	}
}

func TestAdvertiseFollowsTLS(t *testing.T) {
	for _, tt := range []struct {
		name      string
		advertise string
		tls       bool
		want      string // the advertised URL, or a substring of the error
		wantErr   bool
	}{
		{"default without TLS", "", false, "http://127.0.0.1:8080", false},
		{"default with TLS", "", true, "https://127.0.0.1:8080", false},
		{"https with TLS", "https://node-1.example:8443", true, "https://node-1.example:8443", false},
		{"http without TLS", "http://node-1.example:8080", false, "http://node-1.example:8080", false},
		{"https without TLS", "https://node-1.example:8443", false, "serves plain HTTP: give --tls-cert and --tls-key", true},
		{"http with TLS", "http://node-1.example:8080", true, "serves HTTPS (--tls-cert): advertise an https:// URL", true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			o := memberOptions{orch: orchestrator.Config{ID: "m", Advertise: tt.advertise}}
			_, got, err := o.resolve("127.0.0.1:8080", tt.tls)
			switch {
			case tt.wantErr && (err == nil || !strings.Contains(err.Error(), tt.want)):
				t.Errorf("resolve: %q, %v; want an error containing %q", got, err, tt.want)
			case !tt.wantErr && (err != nil || got != tt.want):
				t.Errorf("resolve: %q, %v; want %q", got, err, tt.want)
			}
		})
	}
}

func TestTLSFlagErrors(t *testing.T) {
	ca := tlstest.NewCA(t, "test CA")
	dir := t.TempDir()
	cert, key := filepath.Join(dir, "s.crt"), filepath.Join(dir, "s.key")
	ca.Server(t, "127.0.0.1").Write(t, cert, key)
	lg := zaptest.NewLogger(t)

	for _, tt := range []struct {
		name string
		opts serverOptions
		want string
	}{
		{"cert without key", serverOptions{tlsCert: cert}, "--tls-cert and --tls-key go together"},
		{"client CA alone", serverOptions{tlsClientCA: ca.CertFile}, "--tls-client-ca needs them"},
		{"missing key file", serverOptions{tlsCert: cert, tlsKey: filepath.Join(dir, "nope.key")}, "nope.key"},
		{"client CA not PEM", serverOptions{tlsCert: cert, tlsKey: key, tlsClientCA: key}, "no PEM certificate"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := tt.opts.tls(lg); err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("tls(): %v, want an error containing %q", err, tt.want)
			}
		})
	}
	o := serverOptions{tlsCert: cert, tlsKey: key, tlsClientCA: ca.CertFile}
	if tc, err := o.tls(lg); err != nil || tc == nil || tc.ClientCAs == nil {
		t.Errorf("tls() with cert, key and client CA: %v, %v; want a configuration verifying clients", tc, err)
	}

	for _, tt := range []struct {
		name          string
		ca, cert, key string
		want          string
	}{
		{"cert without key", "", cert, "", "--cert and --key go together"},
		{"key of another cert", "", cert, writeKeyOfAnother(t, ca, dir), "--cert/--key"},
		{"CA file missing", filepath.Join(dir, "nope.crt"), "", "", "--ca"},
		{"CA file without certificates", key, "", "", "--ca: no certificate found"},
	} {
		t.Run("client "+tt.name, func(t *testing.T) {
			if _, err := clientTLS("--", tt.ca, tt.cert, tt.key); err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("clientTLS: %v, want an error containing %q", err, tt.want)
			}
		})
	}
}

func writeKeyOfAnother(t *testing.T, ca *tlstest.CA, dir string) string {
	t.Helper()
	name := filepath.Join(dir, "other.key")
	tlstest.WriteFile(t, name, ca.Server(t, "127.0.0.1").KeyPEM)
	return name
}

// TestPeerTransportReachesMembers: a member serving TLS reaches another
// (a forward to a partition's owner) with --peer-ca's CAs, presenting its
// own certificate where the other asks its clients for one
// (--tls-client-ca); without --peer-ca a private CA's certificate is
// refused, as is a member that presents none where one is asked; plain
// HTTP members forward in plain HTTP.
func TestPeerTransportReachesMembers(t *testing.T) {
	ca := tlstest.NewCA(t, "members")
	dir := t.TempDir()
	cert, key := filepath.Join(dir, "member.crt"), filepath.Join(dir, "member.key")
	ca.Peer(t, "127.0.0.1").Write(t, cert, key)
	lg := zaptest.NewLogger(t)
	member := func(clientCA string) string {
		o := serverOptions{tlsCert: cert, tlsKey: key, tlsClientCA: clientCA}
		tc, err := o.tls(lg)
		if err != nil {
			t.Fatal(err)
		}
		srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.TLS == nil || (clientCA != "" && len(r.TLS.PeerCertificates) == 0) {
				http.Error(w, "no client certificate", http.StatusUnauthorized)
			}
		}))
		// Served on a listener of its own: httptest's StartTLS would put
		// its own certificate first.
		srv.Listener = tls.NewListener(srv.Listener, tc)
		srv.Start()
		t.Cleanup(srv.Close)
		return "https://" + srv.Listener.Addr().String()
	}
	get := func(tr *http.Transport, url string) error {
		t.Helper()
		defer tr.CloseIdleConnections()
		resp, err := (&http.Client{Transport: tr, Timeout: 10 * time.Second}).Get(url)
		if err != nil {
			return err
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("status %d", resp.StatusCode)
		}
		return nil
	}
	// transport is the peer transport of a member of options o, and its
	// own TLS configuration.
	transport := func(o serverOptions) (*http.Transport, *tls.Config) {
		t.Helper()
		self, err := o.tls(lg)
		if err != nil {
			t.Fatal(err)
		}
		tr, err := o.peerTransport(self)
		if err != nil {
			t.Fatal(err)
		}
		return tr, self
	}
	for _, clientCA := range []string{"", ca.CertFile} {
		peer := member(clientCA)
		o := serverOptions{tlsCert: cert, tlsKey: key, tlsClientCA: clientCA, peerCA: ca.CertFile}
		tr, _ := transport(o)
		if err := get(tr, peer); err != nil {
			t.Errorf("client CA %q: forwarding with --peer-ca failed: %v", clientCA, err)
		}
		o.peerCA = ""
		tr, _ = transport(o)
		var unknown x509.UnknownAuthorityError
		if err := get(tr, peer); !errors.As(err, &unknown) {
			t.Errorf("client CA %q: without --peer-ca: %v, want the private CA's certificate refused", clientCA, err)
		}
	}
	// Asked for a certificate, a member serving without --tls-client-ca
	// presents none: refused at the handshake.
	tr, self := transport(serverOptions{tlsCert: cert, tlsKey: key, peerCA: ca.CertFile})
	if err := get(tr, member(ca.CertFile)); err == nil {
		t.Error("a member presenting no certificate was let in where one is required")
	}

	if tr, err := (&serverOptions{}).peerTransport(nil); err != nil || (tr.TLSClientConfig != nil && (tr.TLSClientConfig.RootCAs != nil || tr.TLSClientConfig.GetClientCertificate != nil)) {
		t.Errorf("plain HTTP: %v; want http.DefaultTransport's clone", err)
	}
	bad := filepath.Join(dir, "empty.pem")
	if err := os.WriteFile(bad, []byte("not a certificate\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := (&serverOptions{peerCA: bad}).peerTransport(self); err == nil || !strings.Contains(err.Error(), "--peer-ca") {
		t.Errorf("a --peer-ca without certificates: %v, want an error naming the flag", err)
	}
	if err := (serverOptions{peerCA: ca.CertFile}).validate(); err == nil || !strings.Contains(err.Error(), "peer-ca") {
		t.Errorf("--peer-ca without --tls-cert: %v, want refused", err)
	}
}
