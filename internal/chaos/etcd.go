package chaos

import (
	"context"
	"errors"
	"fmt"
	"net"
	"path/filepath"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"google.golang.org/grpc"

	"github.com/jobfleet/jobfleet/internal/etcdcluster"
)

// etcdMember is one `jobfleet etcd` process of the cluster.
type etcdMember struct {
	*process
	etcdcluster.Member
	host *netHost // nil on loopback
}

// etcdCluster is the harness's etcd: one member or several, each a process.
type etcdCluster struct {
	binary  string
	layout  []etcdcluster.Member
	members []*etcdMember // members[i] runs layout[i]
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
	addrs := etcdcluster.FreeAddrs
	if hosts != nil {
		addrs = func(_ int, name string) (string, string, error) {
			ip := hosts.host(name).ip()
			return net.JoinHostPort(ip, "2379"), net.JoinHostPort(ip, "2380"), nil
		}
	}
	var err error
	if c.layout, err = etcdcluster.Layout(n, addrs); err != nil {
		return nil, err
	}
	for _, lm := range c.layout {
		m := &etcdMember{Member: lm}
		c.members = append(c.members, m)
		args := append(lm.Args(dir, c.layout), "--unsafe-no-fsync", "--log-level=warn")
		m.process = newProcess(m.Name, filepath.Join(dir, "logs", m.Name+".log"), args)
		if hosts != nil {
			m.host = hosts.host(m.Name)
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
func (c *etcdCluster) endpoints() []string { return etcdcluster.Endpoints(c.layout) }

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

// leader returns the member that is the raft leader, asking each live
// member for its status (the maintenance Status API).
func (c *etcdCluster) leader(ctx context.Context, cl *clientv3.Client) (*etcdMember, error) {
	i, err := etcdcluster.Leader(ctx, cl, c.layout, func(i int) bool { return c.members[i].live() })
	if err != nil {
		return nil, err
	}
	return c.members[i], nil
}

// awaitLeader returns the raft leader, asking every 100 ms for up to 10 s;
// nil if none was found.
func (c *etcdCluster) awaitLeader(ctx context.Context, cl *clientv3.Client) *etcdMember {
	i, err := etcdcluster.AwaitLeader(ctx, cl, c.layout, func(i int) bool { return c.members[i].live() }, 10*time.Second)
	if err != nil {
		return nil
	}
	return c.members[i]
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
