package deploy

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// podman runs podman commands with a storage and state of the test's own
// (in a temporary folder, removed after the test), set up to work where
// CI runs: in a container, as root, without systemd.
type podman struct {
	t   *testing.T
	env []string
}

// newPodman returns the test's podman, or skips the test when podman is
// not installed (JOBFLEET_IMAGE_TESTS=1, as CI sets it, fails it then).
func newPodman(t *testing.T) *podman {
	t.Helper()
	if _, err := exec.LookPath("podman"); err != nil {
		if os.Getenv("JOBFLEET_IMAGE_TESTS") == "1" {
			t.Fatal("JOBFLEET_IMAGE_TESTS=1 but no podman on PATH (Debian: apt-get install podman runc)")
		}
		t.Skip("no podman on PATH: the image is not built (Debian: apt-get install podman runc)")
	}
	dir := t.TempDir()
	// vfs: overlay mounts are often refused inside a container. cgroupfs:
	// there is no systemd to ask for cgroups. runc, when installed: crun
	// refuses a host with both cgroup versions mounted (hybrid). The
	// limits: podman raises the open-file and process limits above what a
	// process without CAP_SYS_RESOURCE may set; ask for what this process
	// has (the process limit at most 4096: the image runs one program).
	storage := fmt.Sprintf("[storage]\ndriver = \"vfs\"\ngraphroot = %q\nrunroot = %q\n", filepath.Join(dir, "root"), filepath.Join(dir, "run"))
	var nofile, nproc syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &nofile); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Getrlimit(6 /* RLIMIT_NPROC */, &nproc); err != nil {
		t.Fatal(err)
	}
	procs := min(nproc.Max, 4096)
	engine := fmt.Sprintf("cgroup_manager = \"cgroupfs\"\nevents_logger = \"file\"\ntmp_dir = %q\n", filepath.Join(dir, "tmp"))
	if _, err := exec.LookPath("runc"); err == nil {
		engine += "runtime = \"runc\"\n"
	}
	conf := fmt.Sprintf("[containers]\ndefault_ulimits = [\"nofile=%d:%d\", \"nproc=%d:%d\"]\n[engine]\n%s",
		nofile.Max, nofile.Max, procs, procs, engine)
	for name, text := range map[string]string{"storage.conf": storage, "containers.conf": conf} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	p := &podman{t: t, env: append(os.Environ(),
		"CONTAINERS_STORAGE_CONF="+filepath.Join(dir, "storage.conf"),
		"CONTAINERS_CONF="+filepath.Join(dir, "containers.conf"),
		"ENGINE=podman",
	)}
	return p // the images and containers' files go with dir
}

// run runs podman with args and returns its standard output and error.
func (p *podman) run(args ...string) (string, error) {
	cmd := exec.Command("podman", args...)
	cmd.Env = p.env
	out, err := cmd.CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("podman %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out), nil
}

// must runs podman with args and fails the test if it fails.
func (p *podman) must(args ...string) string {
	p.t.Helper()
	out, err := p.run(args...)
	if err != nil {
		p.t.Fatal(err)
	}
	return out
}

// freePort returns a loopback port nothing listens on now.
func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// TestContainerImage builds the image with image.sh and podman, without
// any registry, around the binary build.sh made; checks that it holds
// nothing but the binary and the CA certificates and runs as an
// unprivileged user; then runs `jobfleet dev` in it and waits for
// /healthz and /readyz to answer 200.
func TestContainerImage(t *testing.T) {
	needBinary(t)
	p := newPodman(t)
	const tag = "localhost/jobfleet:" + testVersion
	started := time.Now()
	build := exec.Command("sh", "image.sh", binary, tag)
	build.Env = p.env
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("sh image.sh: %v\n%s", err, out)
	}
	size := strings.TrimSpace(p.must("image", "inspect", "--format", "{{.Size}}", tag))
	t.Logf("image %s built in %v: %s bytes", tag, time.Since(started).Round(time.Millisecond), size)
	if user := strings.TrimSpace(p.must("image", "inspect", "--format", "{{.Config.User}}", tag)); user != "65532:65532" {
		t.Errorf("the image runs as %q, want 65532:65532", user)
	}
	if layers := strings.Fields(p.must("image", "inspect", "--format", "{{range .RootFS.Layers}}{{.}} {{end}}", tag)); len(layers) != 2 {
		t.Errorf("the image has %d layers, want 2 (the CA certificates, the binary) on no base: %v", len(layers), layers)
	}

	if out := p.must("run", "--rm", "--network", "host", tag, "version"); !strings.Contains(out, "version  "+testVersion) {
		t.Errorf("jobfleet version in the image printed %q, lacking %s", out, testVersion)
	}
	if out, err := p.run("run", "--rm", "--network", "host", "--entrypoint", "/bin/sh", tag, "-c", "true"); err == nil {
		t.Errorf("the image has a shell: %s", out)
	}

	api, etcdClient, etcdPeer := freePort(t), freePort(t), freePort(t)
	name := "jobfleet-image-test-" + strconv.Itoa(os.Getpid())
	p.must("run", "-d", "--name", name, "--network", "host", "--tmpfs", "/tmp:rw,mode=1777", tag,
		"dev", "--orchestrators=1", "--workers=1",
		"--listen=127.0.0.1:"+strconv.Itoa(api),
		"--etcd-listen=127.0.0.1:"+strconv.Itoa(etcdClient),
		"--etcd-peer-listen=127.0.0.1:"+strconv.Itoa(etcdPeer),
		"--data-dir=/tmp/jobfleet-dev")
	t.Cleanup(func() {
		if t.Failed() {
			out, _ := p.run("logs", name)
			t.Logf("the container's log:\n%s", out)
		}
		p.run("rm", "--force", "--time", "10", name)
	})
	base := "http://127.0.0.1:" + strconv.Itoa(api)
	for _, path := range []string{"/healthz", "/readyz"} {
		if err := waitOK(base+path, 2*time.Minute); err != nil {
			t.Fatalf("jobfleet dev in the image: %v", err)
		}
	}
	t.Logf("jobfleet dev in the image ready %v after the build started", time.Since(started).Round(time.Millisecond))
	if out, err := p.run("stop", "--time", "20", name); err != nil {
		t.Fatal(err)
	} else if state := strings.TrimSpace(p.must("inspect", "--format", "{{.State.ExitCode}}", name)); state != "0" {
		t.Errorf("jobfleet dev exited %s on SIGTERM, want 0 (%s)", state, out)
	}
}

// waitOK polls url until it answers 200, for at most limit.
func waitOK(url string, limit time.Duration) error {
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	defer cancel()
	client := &http.Client{Timeout: 2 * time.Second}
	var last string
	for {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		resp, err := client.Do(req)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
			last = resp.Status
		} else {
			last = err.Error()
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s did not answer 200 within %v: %s", url, limit, last)
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// TestContainerfile checks the image's recipe without a container engine:
// one stage on no base (FROM scratch), nothing run at build time (so
// nothing is pulled or installed), an unprivileged user, the binary as
// the entry point and a command of jobfleet's.
func TestContainerfile(t *testing.T) {
	needBinary(t)
	data, err := os.ReadFile("Containerfile")
	if err != nil {
		t.Fatal(err)
	}
	var from, user, entry, cmd []string
	for _, line := range strings.Split(string(data), "\n") {
		line = strings.TrimSpace(line)
		word, rest, _ := strings.Cut(line, " ")
		switch strings.ToUpper(word) {
		case "FROM":
			from = append(from, rest)
		case "RUN", "ADD":
			t.Errorf("Containerfile: %q: the image is built from files image.sh provides, nothing is run or fetched", line)
		case "USER":
			user = append(user, rest)
		case "ENTRYPOINT":
			entry = append(entry, rest)
		case "CMD":
			cmd = append(cmd, rest)
		}
	}
	if len(from) != 1 || from[0] != "scratch" {
		t.Errorf("Containerfile stages on %q, want one FROM scratch", from)
	}
	if len(user) != 1 || user[0] != "65532:65532" {
		t.Errorf("Containerfile USER %q, want 65532:65532", user)
	}
	if len(entry) != 1 || entry[0] != `["/usr/local/bin/jobfleet"]` {
		t.Errorf("Containerfile ENTRYPOINT %q, want [\"/usr/local/bin/jobfleet\"]", entry)
	}
	if len(cmd) != 1 {
		t.Fatalf("Containerfile has %d CMD lines, want 1", len(cmd))
	}
	var words []string
	for _, w := range strings.Split(strings.Trim(cmd[0], "[]"), ",") {
		words = append(words, strings.Trim(strings.TrimSpace(w), `"`))
	}
	invocation{where: "Containerfile CMD", args: words}.check(t)
}
