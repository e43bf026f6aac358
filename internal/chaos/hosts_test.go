package chaos

import (
	"context"
	"io"
	"net"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap/zaptest"
)

// newTestNetwork makes a host network or skips the test where namespaces
// cannot be made.
func newTestNetwork(t *testing.T, hosts map[string]byte) *hostNetwork {
	t.Helper()
	if why := namespacesUsable(); why != "" {
		t.Skipf("no network namespaces here: %s", why)
	}
	n, err := newHostNetwork(hosts, 1, zaptest.NewLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		n.close()
		out, _ := exec.Command("ip", "netns", "list").Output()
		for _, h := range n.hosts {
			if strings.Contains(string(out), h.ns) {
				t.Errorf("namespace %s left behind", h.ns)
			}
		}
	})
	return n
}

// echoServer accepts connections on l and echoes what it reads, until
// the test ends.
func echoServer(t *testing.T, l net.Listener) {
	t.Helper()
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		conns []net.Conn
	)
	wg.Go(func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
			wg.Go(func() { _, _ = io.Copy(c, c) })
		}
	})
	t.Cleanup(func() {
		l.Close()
		mu.Lock()
		for _, c := range conns {
			c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
}

// roundTrip sends a byte over c and waits up to timeout for its echo; it
// returns how long that took, or -1.
func roundTrip(c net.Conn, timeout time.Duration) time.Duration {
	start := time.Now()
	_ = c.SetDeadline(start.Add(timeout))
	if _, err := c.Write([]byte{1}); err != nil {
		return -1
	}
	if _, err := io.ReadFull(c, make([]byte, 1)); err != nil {
		return -1
	}
	return time.Since(start)
}

// TestHostNetworkLinks carries TCP between hosts in their namespaces and
// applies each kind of rule: a one-way cut stops a connection, healing
// restores it, a delay slows it by at least the delay each way, and no
// other host is disturbed.
func TestHostNetworkLinks(t *testing.T) {
	n := newTestNetwork(t, map[string]byte{"a": 1, "b": 2, "c": 3})
	a, b, c := n.host("a"), n.host("b"), n.host("c")
	l, err := b.listen("tcp", b.ip()+":7000")
	if err != nil {
		t.Fatal(err)
	}
	echoServer(t, l)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	ab, err := a.dial(ctx, "tcp", b.ip()+":7000")
	if err != nil {
		t.Fatal(err)
	}
	defer ab.Close()
	cb, err := c.dial(ctx, "tcp", b.ip()+":7000")
	if err != nil {
		t.Fatal(err)
	}
	defer cb.Close()
	if d := roundTrip(ab, 5*time.Second); d < 0 {
		t.Fatal("a cannot reach b")
	}
	// The root namespace has no address in the hosts' subnet (and the
	// test sends it nothing: its default route leads off the machine).
	if out, err := exec.Command("ip", "-o", "addr").Output(); err != nil || strings.Contains(string(out), "10.213.0.") {
		t.Errorf("the root namespace has an address in the hosts' subnet (%v):\n%s", err, out)
	}

	n.fab.setRule(2, 1, LinkRule{Down: true}) // b → a only
	if d := roundTrip(ab, 500*time.Millisecond); d >= 0 {
		t.Errorf("a got b's answer over a link cut from b to a (%v)", d)
	}
	if d := roundTrip(cb, 2*time.Second); d < 0 {
		t.Errorf("c lost b while only b → a was cut")
	}
	n.fab.heal()
	// The echo held back by the cut arrives with a retransmission.
	_ = ab.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := io.ReadFull(ab, make([]byte, 1)); err != nil {
		t.Fatalf("a's connection did not recover after healing: %v", err)
	}

	n.fab.setRule(1, 2, LinkRule{Delay: 150 * time.Millisecond})
	n.fab.setRule(2, 1, LinkRule{Delay: 150 * time.Millisecond})
	if d := roundTrip(ab, 5*time.Second); d < 300*time.Millisecond {
		t.Errorf("round trip over a 150ms link each way took %v, want at least 300ms", d)
	}
	if d := roundTrip(cb, 5*time.Second); d < 0 || d > 250*time.Millisecond {
		t.Errorf("c's round trip took %v with only a's links slow", d)
	}
	n.fab.heal()
	if st := n.fab.Stats(); st.Dropped == 0 || st.Delayed == 0 || st.Forwarded == 0 {
		t.Errorf("fabric counters %+v: want drops, delays and forwards", st)
	}
}
