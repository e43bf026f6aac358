package chaos

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"

	"go.uber.org/zap"
	"golang.org/x/sys/unix"
)

// namespacePrefix starts the name of every network namespace the harness
// makes: jfnet-<pid>-<run>-<host>. A namespace of this prefix whose
// process is gone is a leftover of a run that was killed; the next run
// deletes it.
const namespacePrefix = "jfnet-"

// tunName is the name of each host's TUN device.
const tunName = "jf0"

// tunMTU is the TUN devices' MTU: large, so that a few packets carry what
// loopback would.
const tunMTU = 65000

var runSeq atomic.Int64

// netHost is one host: a network namespace with a TUN device.
type netHost struct {
	name string // the host's name in the fleet: "ctl", "etcd-1", ...
	num  byte   // its number: its address is hostAddr(num)
	ns   string // the namespace's name
	nsFD *os.File
}

// ip returns the host's address.
func (h *netHost) ip() string { return hostAddr(int(h.num)).String() }

// wrap returns the command prefix that runs a program in the host's
// namespace.
func (h *netHost) wrap() []string { return []string{"ip", "netns", "exec", h.ns} }

// hostNetwork is the hosts of a run and the fabric between them.
type hostNetwork struct {
	lg     *zap.Logger
	hosts  map[string]*netHost
	fab    *fabric
	cancel context.CancelFunc
}

// namespacesUsable reports why network namespaces cannot be made here
// ("" if they can): not root, no `ip`, no TUN device.
func namespacesUsable() string {
	if os.Geteuid() != 0 {
		return "network namespaces need root"
	}
	if _, err := exec.LookPath("ip"); err != nil {
		return "the ip command (iproute2) is missing"
	}
	if _, err := os.Stat("/dev/net/tun"); err != nil {
		return "no TUN device (/dev/net/tun): " + err.Error()
	}
	return ""
}

// newHostNetwork makes one namespace per host, numbered as given, each
// with a TUN device addressed in hostSubnet, and starts the fabric between
// them. It first deletes the namespaces of earlier runs whose process is
// gone. close undoes everything.
func newHostNetwork(hosts map[string]byte, seed int64, lg *zap.Logger) (_ *hostNetwork, err error) {
	if why := namespacesUsable(); why != "" {
		return nil, errors.New(why)
	}
	removeLeftoverNamespaces(lg)
	n := &hostNetwork{lg: lg, hosts: map[string]*netHost{}}
	defer func() {
		if err != nil {
			n.close()
		}
	}()
	run := fmt.Sprintf("%s%d-%d-", namespacePrefix, os.Getpid(), runSeq.Add(1))
	ports := map[byte]io.ReadWriteCloser{}
	for name, num := range hosts {
		h := &netHost{name: name, num: num, ns: run + name}
		if err := ipCmd("netns", "add", h.ns); err != nil {
			return nil, err
		}
		n.hosts[name] = h
		if h.nsFD, err = os.Open(filepath.Join("/run/netns", h.ns)); err != nil {
			return nil, err
		}
		var tun *os.File
		if err := inNamespace(h.nsFD, func() error {
			tun, err = openTUN(tunName)
			return err
		}); err != nil {
			return nil, fmt.Errorf("host %s: TUN device: %w", name, err)
		}
		ports[num] = tun
		for _, args := range [][]string{
			{"-n", h.ns, "link", "set", "lo", "up"},
			{"-n", h.ns, "addr", "add", h.ip() + "/" + strconv.Itoa(hostSubnet.Bits()), "dev", tunName},
			{"-n", h.ns, "link", "set", tunName, "mtu", strconv.Itoa(tunMTU), "up"},
		} {
			if err := ipCmd(args...); err != nil {
				return nil, fmt.Errorf("host %s: %w", name, err)
			}
		}
	}
	n.fab = newFabric(ports, seed, lg.Named("fabric"))
	ctx, cancel := context.WithCancel(context.Background())
	n.cancel = cancel
	n.fab.run(ctx)
	return n, nil
}

// host returns the named host.
func (n *hostNetwork) host(name string) *netHost { return n.hosts[name] }

// close stops the fabric and deletes every namespace. The processes in
// them must have ended.
func (n *hostNetwork) close() {
	if n.cancel != nil {
		n.cancel()
		n.fab.stop()
	}
	for _, h := range n.hosts {
		if h.nsFD != nil {
			h.nsFD.Close()
		}
		if err := ipCmd("netns", "del", h.ns); err != nil {
			n.lg.Warn("deleting a namespace failed", zap.String("namespace", h.ns), zap.Error(err))
		}
	}
}

// removeLeftoverNamespaces deletes namespaces of the harness's prefix whose
// process no longer runs.
func removeLeftoverNamespaces(lg *zap.Logger) {
	out, err := exec.Command("ip", "netns", "list").Output()
	if err != nil {
		return
	}
	for _, line := range strings.Split(string(out), "\n") {
		name, _, _ := strings.Cut(strings.TrimSpace(line), " ")
		rest, ok := strings.CutPrefix(name, namespacePrefix)
		if !ok {
			continue
		}
		pidText, _, _ := strings.Cut(rest, "-")
		pid, err := strconv.Atoi(pidText)
		if err != nil || pid <= 0 || processAlive(pid) {
			continue
		}
		if err := ipCmd("netns", "del", name); err != nil {
			lg.Warn("deleting a leftover namespace failed", zap.String("namespace", name), zap.Error(err))
		} else {
			lg.Info("deleted a leftover namespace", zap.String("namespace", name))
		}
	}
}

func processAlive(pid int) bool {
	err := syscall.Kill(pid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}

// ipCmd runs `ip args...`.
func ipCmd(args ...string) error {
	var stderr bytes.Buffer
	cmd := exec.Command("ip", args...)
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("ip %s: %w: %s", strings.Join(args, " "), err, bytes.TrimSpace(stderr.Bytes()))
	}
	return nil
}

// inNamespace runs f on an OS thread switched into the network namespace
// nsFD refers to: sockets and devices f creates belong to that namespace
// for their whole life. The thread switches back afterwards; if it
// cannot, it is discarded with its goroutine.
func inNamespace(nsFD *os.File, f func() error) error {
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		orig, err := os.Open("/proc/thread-self/ns/net")
		if err != nil {
			runtime.UnlockOSThread()
			errc <- err
			return
		}
		defer orig.Close()
		if err := unix.Setns(int(nsFD.Fd()), unix.CLONE_NEWNET); err != nil {
			runtime.UnlockOSThread()
			errc <- fmt.Errorf("setns: %w", err)
			return
		}
		ferr := f()
		if err := unix.Setns(int(orig.Fd()), unix.CLONE_NEWNET); err != nil {
			errc <- errors.Join(ferr, fmt.Errorf("setns back: %w", err)) // the thread stays locked and ends with this goroutine
			return
		}
		runtime.UnlockOSThread()
		errc <- ferr
	}()
	return <-errc
}

// openTUN creates a TUN device (IP packets, no packet information header)
// in the calling thread's namespace; it goes when the file is closed.
func openTUN(name string) (*os.File, error) {
	fd, err := unix.Open("/dev/net/tun", unix.O_RDWR|unix.O_CLOEXEC|unix.O_NONBLOCK, 0)
	if err != nil {
		return nil, err
	}
	ifr, err := unix.NewIfreq(name)
	if err != nil {
		unix.Close(fd)
		return nil, err
	}
	ifr.SetUint16(unix.IFF_TUN | unix.IFF_NO_PI)
	if err := unix.IoctlIfreq(fd, unix.TUNSETIFF, ifr); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("TUNSETIFF: %w", err)
	}
	return os.NewFile(uintptr(fd), "tun-"+name), nil // non-blocking: reads park the goroutine, Close ends them
}

// dial connects from the host's namespace.
func (h *netHost) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	var c net.Conn
	err := inNamespace(h.nsFD, func() error {
		var err error
		c, err = (&net.Dialer{}).DialContext(ctx, network, addr)
		return err
	})
	return c, err
}

// listen listens in the host's namespace.
func (h *netHost) listen(network, addr string) (net.Listener, error) {
	var l net.Listener
	err := inNamespace(h.nsFD, func() error {
		var err error
		l, err = net.Listen(network, addr)
		return err
	})
	return l, err
}
