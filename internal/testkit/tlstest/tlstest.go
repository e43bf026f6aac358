// Package tlstest makes certificate authorities and certificates for
// tests (crypto/x509, ECDSA P-256), written as PEM files in the test's
// temporary directory. It is a test kit: production code must not import
// it.
package tlstest

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// CA is a certificate authority that signs server and client
// certificates.
type CA struct {
	Cert *x509.Certificate
	key  *ecdsa.PrivateKey
	// CertFile is the CA certificate as a PEM file.
	CertFile string
	dir      string
}

// NewCA makes a CA named name, valid from an hour ago for a day, and
// writes its certificate to a PEM file in a temporary directory.
func NewCA(t testing.TB, name string) *CA {
	t.Helper()
	key := newKey(t)
	tmpl := &x509.Certificate{
		SerialNumber:          randomSerial(t),
		Subject:               pkix.Name{CommonName: name},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(24 * time.Hour),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	ca := &CA{Cert: cert, key: key, dir: dir, CertFile: filepath.Join(dir, "ca.crt")}
	WriteFile(t, ca.CertFile, pemBlock("CERTIFICATE", der))
	return ca
}

// Pool returns a pool holding only this CA.
func (ca *CA) Pool() *x509.CertPool {
	p := x509.NewCertPool()
	p.AddCert(ca.Cert)
	return p
}

// Pair is a certificate signed by a CA, with its key, in PEM.
type Pair struct {
	Cert    *x509.Certificate
	CertPEM []byte
	KeyPEM  []byte
}

// TLS returns the pair as a tls.Certificate.
func (p Pair) TLS(t testing.TB) tls.Certificate {
	t.Helper()
	c, err := tls.X509KeyPair(p.CertPEM, p.KeyPEM)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// Write writes the certificate and key to certFile and keyFile (mode
// 0600), replacing them whole (written beside them, then renamed).
func (p Pair) Write(t testing.TB, certFile, keyFile string) {
	t.Helper()
	WriteFile(t, certFile, p.CertPEM)
	WriteFile(t, keyFile, p.KeyPEM)
}

// Server makes a server certificate for hosts (IP addresses become IP
// SANs, the rest DNS SANs) with a random serial number.
func (ca *CA) Server(t testing.TB, hosts ...string) Pair {
	t.Helper()
	return ca.server(t, []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}, hosts)
}

func (ca *CA) server(t testing.TB, usage []x509.ExtKeyUsage, hosts []string) Pair {
	t.Helper()
	tmpl := ca.template(t, hosts[0])
	tmpl.ExtKeyUsage = usage
	for _, h := range hosts {
		if ip := net.ParseIP(h); ip != nil {
			tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
		} else {
			tmpl.DNSNames = append(tmpl.DNSNames, h)
		}
	}
	return ca.sign(t, tmpl)
}

// Peer makes a certificate for hosts that serves and also authenticates
// as a client, as etcd members use with each other (--peer-cert-file
// with --peer-client-cert-auth).
func (ca *CA) Peer(t testing.TB, hosts ...string) Pair {
	t.Helper()
	return ca.server(t, []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}, hosts)
}

// Client makes a client certificate whose Subject CommonName is cn.
func (ca *CA) Client(t testing.TB, cn string) Pair {
	t.Helper()
	tmpl := ca.template(t, cn)
	tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}
	return ca.sign(t, tmpl)
}

func (ca *CA) template(t testing.TB, cn string) *x509.Certificate {
	return &x509.Certificate{
		SerialNumber: randomSerial(t),
		Subject:      pkix.Name{CommonName: cn},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
	}
}

func (ca *CA) sign(t testing.TB, tmpl *x509.Certificate) Pair {
	t.Helper()
	key := newKey(t)
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.Cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	return Pair{Cert: cert, CertPEM: pemBlock("CERTIFICATE", der), KeyPEM: pemBlock("PRIVATE KEY", keyDER)}
}

// WriteFile replaces name with data (mode 0600) the way certificate
// tooling does: written beside it, then renamed over it, so a reader sees
// the old or the new contents, never a part.
func WriteFile(t testing.TB, name string, data []byte) {
	t.Helper()
	tmp := name + ".tmp"
	if err := os.WriteFile(tmp, data, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, name); err != nil {
		t.Fatal(err)
	}
}

func newKey(t testing.TB) *ecdsa.PrivateKey {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return key
}

func randomSerial(t testing.TB) *big.Int {
	t.Helper()
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
	if err != nil {
		t.Fatal(err)
	}
	return n.Add(n, big.NewInt(1))
}

func pemBlock(typ string, der []byte) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der})
}
