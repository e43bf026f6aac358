package deploy

import (
	"crypto/x509"
	"encoding/pem"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

// composeFile is the part of a compose file the test reads.
type composeFile struct {
	Services map[string]struct {
		Image       string            `json:"image"`
		Command     []string          `json:"command"`
		Entrypoint  []string          `json:"entrypoint"`
		Environment map[string]string `json:"environment"`
		User        string            `json:"user"`
		Volumes     []string          `json:"volumes"`
	} `json:"services"`
}

// TestCompose checks the compose trial: the binary's flags, TLS and
// credentials everywhere, and (with openssl) that gen-certs.sh makes
// every file the services name, with certificates valid for the names
// the services reach each other by.
func TestCompose(t *testing.T) {
	needBinary(t)
	data, err := os.ReadFile(filepath.Join("compose", "compose.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var cf composeFile
	if err := yaml.Unmarshal(data, &cf); err != nil {
		t.Fatal(err)
	}
	files := map[string]bool{} // under /certs/
	hosts := map[string]bool{} // reached over TLS
	counts := map[string]int{}
	for _, name := range sortedKeys(cf.Services) {
		s := cf.Services[name]
		where := "compose service " + name
		if !strings.HasPrefix(s.Image, "jobfleet") {
			counts["etcd"]++
			for _, a := range s.Command {
				if strings.HasPrefix(a, "--listen-client-urls=") && !strings.Contains(a, "https://") {
					t.Errorf("%s: etcd clients without TLS: %s", where, a)
				}
			}
			if !strings.Contains(strings.Join(s.Command, " "), "--client-cert-auth") {
				t.Errorf("%s: etcd does not require client certificates", where)
			}
			continue
		}
		if !strings.HasPrefix(s.User, "${JOBFLEET_UID") {
			t.Errorf("%s: user %q, want the user that owns the private files", where, s.User)
		}
		args := s.Command
		if len(s.Entrypoint) > 0 {
			// A shell step: the jobfleet command line it runs.
			script := strings.Join(args, " ")
			i := strings.Index(script, "jobfleet ")
			if i < 0 {
				t.Errorf("%s: runs no jobfleet command", where)
				continue
			}
			line := strings.Fields(script[i+len("jobfleet "):])
			for j, w := range line {
				if w == ">" || strings.HasPrefix(w, ">") {
					line = line[:j]
					break
				}
			}
			args = line
		}
		r := invocation{where: where, args: args, env: s.Environment, files: mountedFiles(t, s.Volumes)}.check(t)
		counts[r.command]++
		for _, v := range r.flags {
			for _, part := range strings.Split(v, ",") {
				if strings.HasPrefix(part, "/certs/") {
					files[strings.TrimPrefix(part, "/certs/")] = true
				}
				if u, err := url.Parse(part); err == nil && u.Scheme != "" {
					if u.Scheme != "https" {
						t.Errorf("%s: %s is not over TLS", where, part)
					}
					hosts[u.Hostname()] = true
				}
			}
		}
		switch r.command {
		case "orchestrator":
			for _, f := range []string{"tls-cert", "admin-token-file", "etcd-cert", "metrics-listen"} {
				if !r.has(f) {
					t.Errorf("%s: no --%s", where, f)
				}
			}
		case "worker":
			for _, f := range []string{"ca", "token-file"} {
				if _, ok := r.flags[f]; !ok {
					t.Errorf("%s: no --%s", where, f)
				}
			}
		}
	}
	if counts["etcd"] != 3 || counts["orchestrator"] != 3 || counts["worker"] != 2 || counts["token create"] != 1 {
		t.Errorf("services: %v, want 3 etcd members, 3 orchestrators, 2 workers and the worker credential", counts)
	}

	if _, err := exec.LookPath("openssl"); err != nil {
		t.Skip("openssl is not installed: gen-certs.sh not run")
	}
	dir := t.TempDir()
	script, err := os.ReadFile(filepath.Join("compose", "gen-certs.sh"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "gen-certs.sh"), script, 0o700); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("sh", filepath.Join(dir, "gen-certs.sh")).CombinedOutput(); err != nil {
		t.Fatalf("gen-certs.sh: %v\n%s", err, out)
	}
	certs := filepath.Join(dir, "certs")
	for f := range files {
		fi, err := os.Stat(filepath.Join(certs, f))
		if err != nil {
			t.Errorf("gen-certs.sh does not make %s: %v", f, err)
			continue
		}
		if (strings.HasSuffix(f, ".key") || strings.HasSuffix(f, ".token")) && fi.Mode().Perm()&0o077 != 0 {
			t.Errorf("%s has mode %v: private files must be 0600", f, fi.Mode().Perm())
		}
	}
	pool := x509.NewCertPool()
	caPEM, err := os.ReadFile(filepath.Join(certs, "ca.crt"))
	if err != nil || !pool.AppendCertsFromPEM(caPEM) {
		t.Fatalf("ca.crt: %v", err)
	}
	for host := range hosts {
		data, err := os.ReadFile(filepath.Join(certs, host+".crt"))
		if err != nil {
			t.Errorf("no certificate for %s: %v", host, err)
			continue
		}
		block, _ := pem.Decode(data)
		cert, err := x509.ParseCertificate(block.Bytes)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := cert.Verify(x509.VerifyOptions{DNSName: host, Roots: pool}); err != nil {
			t.Errorf("certificate of %s: %v", host, err)
		}
	}
	if env, err := os.ReadFile(filepath.Join(dir, ".env")); err != nil || !strings.Contains(string(env), "JOBFLEET_UID=") {
		t.Errorf(".env: %v %q", err, env)
	}
}

// mountedFiles returns the contents of the files of the compose directory
// that volumes mount one by one ("./NAME:/PATH[:ro]"), by the path the
// container sees.
func mountedFiles(t *testing.T, volumes []string) map[string]string {
	t.Helper()
	files := map[string]string{}
	for _, v := range volumes {
		parts := strings.Split(v, ":")
		if len(parts) < 2 || !strings.HasPrefix(parts[0], "./") {
			continue
		}
		local := filepath.Join("compose", parts[0])
		if fi, err := os.Stat(local); err != nil || fi.IsDir() {
			continue
		}
		data, err := os.ReadFile(local)
		if err != nil {
			t.Fatal(err)
		}
		files[parts[1]] = string(data)
	}
	return files
}
