//go:build linux

package main

// A connection flood against one member of `jobfleet dev` run with the
// open-file limit (1024) that once let such a flood starve the process's
// embedded etcd to death.

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/jobfleet/jobfleet/internal/etcdserver"
	"github.com/jobfleet/jobfleet/internal/httpserver"
	"github.com/jobfleet/jobfleet/internal/testkit/proctest"
)

// Flood sockets are bound to local addresses in 127.42.0.0/16 with ports
// in floodPorts: a new (address, port) pair for each, so that the flood
// takes no ephemeral port (other programs on the machine keep theirs, and
// the kernel does not search an exhausted range on each connect).
const (
	floodPortFrom = 18200
	floodPorts    = 90
)

// floodSource returns the local address of flood socket i.
func floodSource(i int) *syscall.SockaddrInet4 {
	host := i / floodPorts // 250 hosts per /24
	return &syscall.SockaddrInet4{Port: floodPortFrom + i%floodPorts, Addr: [4]byte{127, 42, byte(host / 250), byte(host%250 + 1)}}
}

// floodConnect opens up to n TCP connections to addr without waiting for
// any: non-blocking sockets whose connect is left in progress, like n
// clients that connect and then send nothing. The kernel completes the
// handshakes the listener's accept queue has room for and retries the
// others' SYNs. It stops early, saying so, if the test process runs out of
// descriptors. The sockets are closed when the test ends unless closeAll
// closed them first.
func floodConnect(t *testing.T, addr string, n int) []int {
	t.Helper()
	tcp, err := net.ResolveTCPAddr("tcp4", addr)
	if err != nil {
		t.Fatal(err)
	}
	to := &syscall.SockaddrInet4{Port: tcp.Port}
	copy(to.Addr[:], tcp.IP.To4())
	fds := make([]int, 0, n)
	t.Cleanup(func() { closeAll(fds) })
	skipped := 0
	for i := 0; len(fds) < n && i < 2*n; i++ {
		fd, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_STREAM|syscall.SOCK_NONBLOCK|syscall.SOCK_CLOEXEC, 0)
		if err != nil {
			t.Logf("flood: socket after %d connections: %v; flooding with those", len(fds), err)
			break
		}
		// SO_REUSEADDR: a pair may still be in TIME_WAIT from an earlier run.
		if err := syscall.SetsockoptInt(fd, syscall.SOL_SOCKET, syscall.SO_REUSEADDR, 1); err != nil {
			t.Fatal(err)
		}
		if err := syscall.Bind(fd, floodSource(i)); err != nil {
			syscall.Close(fd)
			skipped++ // a pair in use by another program
			continue
		}
		if err := syscall.Connect(fd, to); err != nil && !errors.Is(err, syscall.EINPROGRESS) {
			syscall.Close(fd)
			t.Fatalf("flood: connect after %d connections: %v", len(fds), err)
		}
		fds = append(fds, fd)
	}
	if skipped > 0 {
		t.Logf("flood: %d local address pairs were in use and skipped", skipped)
	}
	return fds
}

// established counts the sockets whose handshake has completed (accepted
// by the server, or waiting in its accept queue).
func established(fds []int) int {
	n := 0
	for _, fd := range fds {
		if fd >= 0 {
			if _, err := syscall.Getpeername(fd); err == nil {
				n++
			}
		}
	}
	return n
}

// closeAll closes the sockets and marks them closed.
func closeAll(fds []int) {
	for i, fd := range fds {
		if fd >= 0 {
			syscall.Close(fd)
			fds[i] = -1
		}
	}
}

// openFiles counts the open descriptors of process pid.
func openFiles(t *testing.T, pid int) int {
	t.Helper()
	ents, err := os.ReadDir("/proc/" + strconv.Itoa(pid) + "/fd")
	if err != nil {
		t.Fatalf("descriptors of process %d: %v", pid, err)
	}
	return len(ents)
}

// floodSize is how many connections the flood opens: 20 000, or
// JOBFLEET_FLOOD_CONNECTIONS, but no more than this process's own
// open-file limit allows after it is raised, less room for the test's
// embedded etcd and clients.
func floodSize(t *testing.T) int {
	t.Helper()
	want := 20000
	if v := os.Getenv("JOBFLEET_FLOOD_CONNECTIONS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			t.Fatalf("JOBFLEET_FLOOD_CONNECTIONS=%q: want a positive number", v)
		}
		want = n
	}
	_, lim, err := httpserver.RaiseOpenFileLimit()
	if err != nil {
		t.Fatal(err)
	}
	n := want
	if room := int(lim.Soft) - 1000; room < n {
		n = room
	}
	if n < 2000 {
		t.Skipf("this process may open %d files: too few for a flood (raise ulimit -n)", lim.Soft)
	}
	t.Logf("flood of %d connections (%d wanted; this process may open %d files)", n, want, lim.Soft)
	return n
}

func TestConnectionFloodSparesEtcdAndOtherMembers(t *testing.T) {
	const (
		devFileLimit   = 1024 // the limit of the reported outage
		maxConnections = 64
		// floodHold is how long the flood lasts: past the header timeout
		// (10s), so the flooded member cuts its idle connections and takes
		// new ones from the queue meanwhile.
		floodHold = 12 * time.Second
	)
	n := floodSize(t)

	var (
		dev  *proctest.Process
		urls []string
		etcd string
	)
	for attempt := 1; ; attempt++ {
		port := freePortPair(t)
		var err error
		if etcd, err = etcdserver.FreeAddr(); err != nil {
			t.Fatal(err)
		}
		peer, err := etcdserver.FreeAddr()
		if err != nil {
			t.Fatal(err)
		}
		urls = []string{fmt.Sprintf("http://127.0.0.1:%d", port), fmt.Sprintf("http://127.0.0.1:%d", port+1)}
		dev = startCommand(t, "dev", "/bin/sh", "-c", fmt.Sprintf(`ulimit -n %d && exec "$0" "$@"`, devFileLimit), binary, "dev",
			"--orchestrators=2", "--workers=1",
			"--max-connections="+strconv.Itoa(maxConnections),
			"--listen=127.0.0.1:"+strconv.Itoa(port),
			"--etcd-listen="+etcd, "--etcd-peer-listen="+peer,
			"--data-dir="+t.TempDir(), "--log-format=json",
		)
		poll(t, 60*time.Second, "both members of jobfleet dev ready, or jobfleet dev exited", func() (bool, string) {
			if dev.Exited() {
				return true, ""
			}
			for _, u := range urls {
				if code, err := getJSON(u+"/readyz", nil); err != nil || code != http.StatusOK {
					return false, fmt.Sprintf("GET %s/readyz: %d %v", u, code, err)
				}
			}
			return true, ""
		})
		if !dev.Exited() {
			break
		}
		if strings.Contains(dev.Stderr.String(), "address already in use") && attempt < 3 {
			t.Logf("a port was taken meanwhile; retrying on others")
			continue
		}
		t.Fatalf("jobfleet dev exited at start-up: %v", dev.Cmd.ProcessState)
	}
	pid := dev.Cmd.Process.Pid
	if l := logLine(dev.Stderr.String(), "open-file limit"); !strings.Contains(l, `"soft":1024`) {
		t.Fatalf("jobfleet dev does not run with the open-file limit %d: %s", devFileLimit, l)
	}

	client, err := clientv3.New(clientv3.Config{Endpoints: []string{"http://" + etcd}, DialTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	etcdAnswers := func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_, err := client.Get(ctx, "flood-probe")
		return err
	}
	if err := etcdAnswers(); err != nil {
		t.Fatalf("etcd before the flood: %v", err)
	}
	baseline := openFiles(t, pid)

	openedAt := time.Now()
	flooded := strings.TrimPrefix(urls[0], "http://")
	fds := floodConnect(t, flooded, n)
	floodedAt := time.Now()
	t.Logf("%d connections to %s opened in %v", len(fds), flooded, floodedAt.Sub(openedAt).Round(time.Millisecond))

	// While the flood lasts: the process stays up within its descriptor
	// budget, etcd answers, the other member answers.
	maxFiles, checks := 0, 0
	for time.Since(floodedAt) < floodHold {
		if dev.Exited() {
			t.Fatalf("jobfleet dev exited during the flood: %v", dev.Cmd.ProcessState)
		}
		files := openFiles(t, pid)
		maxFiles = max(maxFiles, files)
		if limit := baseline + maxConnections + 64; files > limit {
			t.Errorf("jobfleet dev holds %d descriptors during the flood, want at most %d (%d before it, plus the flooded listener's cap %d, plus slack)",
				files, limit, baseline, maxConnections)
		}
		if err := etcdAnswers(); err != nil {
			t.Fatalf("etcd during the flood, after %v: %v", time.Since(floodedAt).Round(time.Millisecond), err)
		}
		if code, err := getJSON(urls[1]+"/readyz", nil); err != nil || code != http.StatusOK {
			t.Fatalf("the other member during the flood, after %v: GET /readyz: %d %v", time.Since(floodedAt).Round(time.Millisecond), code, err)
		}
		checks++
		time.Sleep(500 * time.Millisecond) // the pace of the checks, not a synchronisation
	}
	t.Logf("flood held %v: %d of %d connections established (the listener's cap and the kernel's accept queue), jobfleet dev held at most %d descriptors (%d before; limit %d); etcd and the other member answered all %d checks",
		time.Since(floodedAt).Round(time.Millisecond), established(fds), len(fds), maxFiles, baseline, devFileLimit, checks)

	closedAt := time.Now()
	closeAll(fds)
	poll(t, 30*time.Second, "the flooded member answering once the flood closed", func() (bool, string) {
		code, err := getJSON(urls[0]+"/readyz", nil)
		return err == nil && code == http.StatusOK, fmt.Sprintf("GET /readyz: %d %v", code, err)
	})
	t.Logf("the flooded member answered again %v after the flood closed", time.Since(closedAt).Round(time.Millisecond))
	if err := etcdAnswers(); err != nil {
		t.Errorf("etcd after the flood: %v", err)
	}
	for _, bad := range []string{"too many open files", "FATAL", "panic"} {
		if l := logLine(dev.Stderr.String(), bad); l != "" {
			t.Errorf("jobfleet dev logged %q: %s", bad, l)
		}
	}

	dev.Signal(t, os.Interrupt)
	if code := dev.Wait(t, 15*time.Second); code != 0 {
		t.Errorf("jobfleet dev exit code %d after SIGINT, want 0", code)
	}
}
