package netfault

import (
	"net"
	"sync"
	"sync/atomic"
)

// Bridge is a TCP proxy between clients and one etcd server that can stall
// the traffic, to cut a member off from etcd while its process keeps
// running. A cut stalls bytes in both directions without losing them, as
// TCP does across a network partition; Restore delivers them. It is safe for
// concurrent use.
type Bridge struct {
	ln     net.Listener
	target string
	stop   chan struct{} // closed by Close

	mu   sync.Mutex    // guards the fields below
	gate chan struct{} // non-nil while cut; closed by Restore
	// replies is non-nil while only the server's bytes are held
	// (CutReplies); closed by Restore.
	replies chan struct{}
	conns   map[net.Conn]struct{}
	closed  bool

	replied atomic.Int64 // bytes delivered from the server to clients

	wg sync.WaitGroup
}

// StartBridge starts a bridge to target (host:port) on a free loopback
// port. Close it when done.
func StartBridge(target string) (*Bridge, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	b := &Bridge{ln: ln, target: target, stop: make(chan struct{}), conns: make(map[net.Conn]struct{})}
	b.wg.Add(1)
	go b.serve()
	return b, nil
}

// Endpoints returns the bridge's client URLs.
func (b *Bridge) Endpoints() []string { return []string{"http://" + b.ln.Addr().String()} }

// Cut stalls all traffic; connections stay open.
func (b *Bridge) Cut() {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.gate == nil {
		b.gate = make(chan struct{})
	}
}

// CutReplies stalls what the server sends while requests still reach it:
// writes apply, and their answers are held (lost, for a client whose
// request times out meanwhile).
func (b *Bridge) CutReplies() {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.replies == nil {
		b.replies = make(chan struct{})
	}
}

// Restore lets stalled and new traffic flow again.
func (b *Bridge) Restore() {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.gate != nil {
		close(b.gate)
		b.gate = nil
	}
	if b.replies != nil {
		close(b.replies)
		b.replies = nil
	}
}

// waitOpen blocks while the bridge is cut (for the server's bytes, reply,
// also while replies are cut); false means it was closed.
func (b *Bridge) waitOpen(reply bool) bool {
	for {
		b.mu.Lock()
		g := b.gate
		if g == nil && reply {
			g = b.replies
		}
		b.mu.Unlock()
		if g == nil {
			return true
		}
		select {
		case <-g:
		case <-b.stop:
			return false
		}
	}
}

// Replied returns how many bytes the bridge has delivered from the server
// to its clients so far: a client whose connection through the bridge has
// received the server's bytes has finished its handshake (for gRPC, the
// connection is ready and takes its share of requests).
func (b *Bridge) Replied() int64 { return b.replied.Load() }

// DropConnections closes every open connection; clients reconnect.
func (b *Bridge) DropConnections() {
	b.mu.Lock()
	defer b.mu.Unlock()
	for c := range b.conns {
		c.Close()
	}
}

// Close stops the bridge and closes all connections. Idempotent.
func (b *Bridge) Close() {
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		return
	}
	b.closed = true
	close(b.stop)
	b.ln.Close()
	for c := range b.conns {
		c.Close()
	}
	b.mu.Unlock()
	b.wg.Wait()
}

func (b *Bridge) track(c net.Conn) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		c.Close()
		return false
	}
	b.conns[c] = struct{}{}
	return true
}

func (b *Bridge) untrack(c net.Conn) {
	b.mu.Lock()
	defer b.mu.Unlock()
	delete(b.conns, c)
	c.Close()
}

func (b *Bridge) serve() {
	defer b.wg.Done()
	for {
		in, err := b.ln.Accept()
		if err != nil {
			return
		}
		if !b.waitOpen(false) {
			in.Close()
			return
		}
		out, err := net.Dial("tcp", b.target)
		if err != nil {
			in.Close()
			continue
		}
		if !b.track(in) || !b.track(out) {
			in.Close()
			out.Close()
			return
		}
		b.wg.Add(2)
		go b.pipe(in, out, true)
		go b.pipe(out, in, false)
	}
}

// pipe copies src to dst, holding bytes while the bridge is cut (and,
// for the server's bytes, reply, while replies are cut), until either side
// closes.
func (b *Bridge) pipe(dst, src net.Conn, reply bool) {
	defer b.wg.Done()
	defer b.untrack(dst)
	defer b.untrack(src)
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			if !b.waitOpen(reply) {
				return
			}
			w, werr := dst.Write(buf[:n])
			if reply {
				b.replied.Add(int64(w))
			}
			if werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}
