package chaos

import (
	"context"
	"errors"
	"fmt"
	"net"
	"path/filepath"
	"strings"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"google.golang.org/grpc"

	"github.com/jobfleet/jobfleet/internal/etcdserver"
)

// etcdMember is one `jobfleet etcd` process of the cluster.
type etcdMember struct {
	*process
	name       string
	clientAddr string
	peerAddr   string
	host       *netHost // nil on loopback
}

// etcdCluster is the harness's etcd: one member or several, each a process.
type etcdCluster struct {
	binary  string
	members []*etcdMember
	// dial connects the harness's clients (nil: the default dialer); with
	// hosts, from the harness's own host.
	dial func(ctx context.Context, addr string) (net.Conn, error)
}

// startEtcd starts n members (in parallel: each waits for a quorum) and
// waits until the cluster serves requests. With hosts (not nil) member i
// runs on host "etcd-i" and the harness's clients dial from host "ctl".
func startEtcd(ctx context.Context, binary, dir string, n int, hosts *hostNetwork, lg *zap.Logger) (*etcdCluster, error) {
	c := &etcdCluster{binary: binary}
	if hosts != nil {
		ctl := hosts.host(hostCtl)
		c.dial = func(ctx context.Context, addr string) (net.Conn, error) { return ctl.dial(ctx, "tcp", addr) }
	}
	var peers []string
	for i := range n {
		name := fmt.Sprintf("etcd-%d", i+1)
		m := &etcdMember{name: name}
		if hosts != nil {
			m.host = hosts.host(name)
			m.clientAddr, m.peerAddr = net.JoinHostPort(m.host.ip(), "2379"), net.JoinHostPort(m.host.ip(), "2380")
		} else {
			var err error
			if m.clientAddr, err = etcdserver.FreeAddr(); err != nil {
				return nil, err
			}
			if m.peerAddr, err = etcdserver.FreeAddr(); err != nil {
				return nil, err
			}
		}
		c.members = append(c.members, m)
		peers = append(peers, name+"=http://"+m.peerAddr)
	}
	for _, m := range c.members {
		args := []string{
			"etcd",
			"--name=" + m.name,
			"--data-dir=" + filepath.Join(dir, "data", m.name),
			"--listen-client=" + m.clientAddr,
			"--listen-peer=" + m.peerAddr,
			"--initial-cluster=" + strings.Join(peers, ","),
			"--unsafe-no-fsync",
			"--log-level=warn",
		}
		m.process = newProcess(m.name, filepath.Join(dir, "logs", m.name+".log"), args)
		if m.host != nil {
			m.wrap = m.host.wrap()
		}
		if err := m.start(binary); err != nil {
			c.kill()
			return nil, err
		}
	}
	if err := c.waitServing(ctx, time.Minute); err != nil {
		c.kill()
		return nil, err
	}
	lg.Info("etcd cluster serving", zap.Strings("endpoints", c.endpoints()))
	return c, nil
}

// endpoints returns every member's client URL.
func (c *etcdCluster) endpoints() []string {
	var out []string
	for _, m := range c.members {
		out = append(out, "http://"+m.clientAddr)
	}
	return out
}

// client returns a client of every member.
func (c *etcdCluster) client() (*clientv3.Client, error) {
	cfg := clientv3.Config{
		Endpoints:   c.endpoints(),
		DialTimeout: 2 * time.Second,
		// A member cut off without a word (a host isolated) is noticed
		// and left for the others.
		DialKeepAliveTime:    time.Second,
		DialKeepAliveTimeout: time.Second,
		Logger:               zap.NewNop(),
	}
	if c.dial != nil {
		cfg.DialOptions = []grpc.DialOption{grpc.WithContextDialer(c.dial)}
	}
	return clientv3.New(cfg)
}

// waitServing waits until a linearizable read through a client of every
// member succeeds.
func (c *etcdCluster) waitServing(ctx context.Context, timeout time.Duration) error {
	cl, err := c.client()
	if err != nil {
		return err
	}
	defer cl.Close()
	deadline := time.Now().Add(timeout)
	for {
		rctx, cancel := context.WithTimeout(ctx, time.Second)
		_, err := cl.Get(rctx, "serving-probe")
		cancel()
		if err == nil {
			return nil
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("etcd not serving after %v: %w", timeout, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// leader returns the member that is the raft leader, asking each running
// member for its status (the maintenance Status API).
func (c *etcdCluster) leader(ctx context.Context, cl *clientv3.Client) (*etcdMember, error) {
	var errs []error
	for _, m := range c.members {
		if !m.live() {
			continue
		}
		sctx, cancel := context.WithTimeout(ctx, time.Second)
		st, err := cl.Status(sctx, "http://"+m.clientAddr)
		cancel()
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", m.name, err))
			continue
		}
		if st.Leader != 0 && st.Leader == st.Header.MemberId {
			return m, nil
		}
	}
	return nil, fmt.Errorf("no leader found: %w", errors.Join(errs...))
}

// kill kills every member.
func (c *etcdCluster) kill() {
	var wg sync.WaitGroup
	for _, m := range c.members {
		if m.process != nil {
			wg.Go(func() { m.kill() })
		}
	}
	wg.Wait()
}

// startStopped starts every member that is not running.
func (c *etcdCluster) startStopped() error {
	var errs []error
	for _, m := range c.members {
		if !m.running() {
			errs = append(errs, m.start(c.binary))
		}
	}
	return errors.Join(errs...)
}
