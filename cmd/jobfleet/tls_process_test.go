package main

// An orchestrator process serving its API over TLS with client
// certificates, its plain metrics listener, certificate reload, and the
// CLI's --ca/--cert/--key.

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jobfleet/jobfleet/api"

	"github.com/jobfleet/jobfleet/auth"
	"github.com/jobfleet/jobfleet/internal/etcdserver"
	"github.com/jobfleet/jobfleet/internal/testkit/etcdtest"
	"github.com/jobfleet/jobfleet/internal/testkit/proctest"
	"github.com/jobfleet/jobfleet/internal/testkit/tlstest"
)

// tlsClient returns a client trusting roots and presenting certs, with a
// new connection (and handshake) per request.
func tlsClient(roots *x509.CertPool, certs ...tls.Certificate) *http.Client {
	return &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{
		DisableKeepAlives: true,
		TLSClientConfig:   &tls.Config{RootCAs: roots, Certificates: certs},
	}}
}

// servedSerial returns the serial number of the certificate the server at
// url presents.
func servedSerial(c *http.Client, url string) (string, error) {
	resp, err := c.Get(url + "/healthz")
	if err != nil {
		return "", err
	}
	resp.Body.Close()
	return resp.TLS.PeerCertificates[0].SerialNumber.String(), nil
}

// runCLI runs the jobfleet command line in this process and returns its
// standard output.
func runCLI(args ...string) (string, error) {
	root := newRootCmd()
	var out bytes.Buffer
	root.SetArgs(args)
	root.SetOut(&out)
	root.SetErr(io.Discard)
	err := root.ExecuteContext(context.Background())
	return out.String(), err
}

func TestOrchestratorServesTLSWithClientCertificates(t *testing.T) {
	ca := tlstest.NewCA(t, "fleet CA")
	dir := t.TempDir()
	certFile, keyFile := filepath.Join(dir, "server.crt"), filepath.Join(dir, "server.key")
	first := ca.Server(t, "127.0.0.1", "localhost")
	first.Write(t, certFile, keyFile)
	clientPair := ca.Client(t, "ci-admin")
	clientCert, clientKey := filepath.Join(dir, "client.crt"), filepath.Join(dir, "client.key")
	clientPair.Write(t, clientCert, clientKey)
	authed := tlsClient(ca.Pool(), clientPair.TLS(t))

	ns := etcdtest.Namespace(t)
	// The client certificate's CommonName names a stored credential: the
	// CLI, the worker and the test's client authenticate with it alone.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, _, err := auth.NewStore(etcd.Client(t), ns, nil).Issue(ctx, "ci-admin", api.CreateRequest{Role: api.RoleAdmin}, ""); err != nil {
		t.Fatal(err)
	}
	var o *proctest.Process
	var api, metrics string
	for attempt := 1; ; attempt++ {
		addr, err := etcdserver.FreeAddr()
		if err != nil {
			t.Fatal(err)
		}
		metricsAddr, err := etcdserver.FreeAddr()
		if err != nil {
			t.Fatal(err)
		}
		api, metrics = "https://"+addr, "http://"+metricsAddr
		o = startProc(t, "orch-tls", "orchestrator",
			"--etcd-endpoints="+etcd.Endpoints()[0], "--listen="+addr, "--id=orch-tls", "--namespace="+ns,
			"--lease-ttl="+leaseTTL.String(), "--partitions="+strconv.Itoa(partitions), "--log-format=json",
			"--tls-cert="+certFile, "--tls-key="+keyFile, "--tls-client-ca="+ca.CertFile,
			"--metrics-listen="+metricsAddr,
		)
		poll(t, 20*time.Second, "orch-tls ready over TLS, or exited", func() (bool, string) {
			if o.Exited() {
				return true, ""
			}
			resp, err := authed.Get(api + "/readyz")
			if err != nil {
				return false, err.Error()
			}
			resp.Body.Close()
			return resp.StatusCode == http.StatusOK, resp.Status
		})
		if !o.Exited() {
			break
		}
		if strings.Contains(o.Stderr.String(), "address already in use") && attempt < 3 {
			continue
		}
		t.Fatalf("orch-tls exited at start-up: %v", o.Cmd.ProcessState)
	}

	t.Run("the member advertises its https URL", func(t *testing.T) {
		var view struct {
			Members []struct {
				Addr string `json:"addr"`
			} `json:"members"`
		}
		resp, err := authed.Get(api + "/v1/cluster/members")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		if err := json.NewDecoder(resp.Body).Decode(&view); err != nil {
			t.Fatal(err)
		}
		if len(view.Members) != 1 || view.Members[0].Addr != api {
			t.Errorf("members %+v, want one advertising %s", view.Members, api)
		}
	})
	t.Run("plain HTTP is refused", func(t *testing.T) {
		code, err := getJSON("http://"+strings.TrimPrefix(api, "https://")+"/v1/cluster/members", nil)
		if err == nil && code != http.StatusBadRequest {
			t.Errorf("plain HTTP to the TLS listener: %d, want 400 or a failed connection", code)
		}
	})
	t.Run("a client without a certificate is refused", func(t *testing.T) {
		if resp, err := tlsClient(ca.Pool()).Get(api + "/v1/cluster/members"); err == nil {
			resp.Body.Close()
			t.Errorf("without a client certificate: %s, want a failed handshake", resp.Status)
		}
	})
	t.Run("the metrics listener serves metrics and probes only, in plain HTTP", func(t *testing.T) {
		resp, err := httpClient.Get(metrics + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || !bytes.Contains(body, []byte("jobfleet_partitions_owned")) {
			t.Errorf("GET /metrics on the metrics listener: %s, want 200 with jobfleet's metrics", resp.Status)
		}
		for path, want := range map[string]int{"/healthz": 200, "/readyz": 200, "/v1/cluster/members": 404, "/v1/jobs": 404} {
			if code, err := getJSON(metrics+path, nil); err != nil || code != want {
				t.Errorf("GET %s on the metrics listener: %d %v, want %d", path, code, err, want)
			}
		}
	})
	t.Run("the CLI with --ca, --cert and --key", func(t *testing.T) {
		out, err := runCLI("cluster", "members", "--server", api, "--ca", ca.CertFile, "--cert", clientCert, "--key", clientKey)
		if err != nil || !strings.Contains(out, "orch-tls") {
			t.Errorf("jobfleet cluster members over TLS: %v\n%s", err, out)
		}
		if _, err := runCLI("cluster", "members", "--server", api, "--ca", ca.CertFile); err == nil {
			t.Error("jobfleet cluster members without a client certificate succeeded")
		}
		if _, err := runCLI("cluster", "members", "--server", api, "--cert", clientCert, "--key", clientKey); err == nil || !strings.Contains(err.Error(), "certificate") {
			t.Errorf("jobfleet cluster members without --ca: %v, want a certificate verification error", err)
		}
	})

	t.Run("a worker process with --ca, --cert and --key runs jobs", func(t *testing.T) {
		hit := make(chan string, 1)
		receiver := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			select {
			case hit <- r.Header.Get("Jobfleet-Run-Id"):
			default:
			}
		}))
		defer receiver.Close()
		w := startProc(t, "worker-tls", "worker", "--orchestrators="+api, "--id=worker-tls", "--log-format=json", "--poll-wait=1s",
			"--ca="+ca.CertFile, "--cert="+clientCert, "--key="+clientKey, "--http-allow=127.0.0.1")
		job := `{"id":"over-tls","executor":{"type":"http","url":"` + receiver.URL + `"}}`
		resp, err := authed.Post(api+"/v1/jobs", "application/json", strings.NewReader(job))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusCreated {
			t.Fatalf("create job: %s", resp.Status)
		}
		select {
		case run := <-hit:
			if !strings.HasPrefix(run, "over-tls@") {
				t.Errorf("receiver got run %q", run)
			}
		case <-time.After(20 * time.Second):
			t.Fatalf("the job did not run through a worker over TLS; worker log:\n%s", w.Stderr.String())
		}
	})

	// Certificate reload, without a restart: a new pair is served within
	// the reload interval (5s) ...
	second := ca.Server(t, "127.0.0.1", "localhost")
	second.Write(t, certFile, keyFile)
	replacedAt := time.Now()
	want := second.Cert.SerialNumber.String()
	poll(t, 20*time.Second, "the new certificate served", func() (bool, string) {
		got, err := servedSerial(authed, api)
		return got == want, fmt.Sprintf("serial %s (%v), want %s", got, err, want)
	})
	t.Logf("replaced certificate served %v after the files changed", time.Since(replacedAt).Round(time.Millisecond))
	if l, hex := logLine(o.Stderr.String(), "TLS certificate reloaded"), fmt.Sprintf("%X", second.Cert.SerialNumber); !strings.Contains(l, hex) {
		t.Errorf("no reload log line naming serial %s: %q", hex, l)
	}
	// ... and a pair that does not load keeps it. (The files are checked
	// during handshakes: the poll connects.)
	tlstest.WriteFile(t, certFile, first.CertPEM) // with second's key
	poll(t, 20*time.Second, "the mismatched pair refused in the log", func() (bool, string) {
		if got, err := servedSerial(authed, api); err != nil || got != want {
			t.Fatalf("after a mismatched pair: serial %s (%v), want the previous %s", got, err, want)
		}
		return logLine(o.Stderr.String(), "do not load") != "", "no such log line yet"
	})
	if o.Exited() {
		t.Fatalf("orch-tls exited: %v", o.Cmd.ProcessState)
	}
}
