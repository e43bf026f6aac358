package chaos

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/jobfleet/jobfleet/internal/etcdserver"
)

// etcdMember is one `jobfleet etcd` process of the cluster.
type etcdMember struct {
	*process
	name       string
	clientAddr string
	peerAddr   string
}

// etcdCluster is the harness's etcd: one member or several, each a process.
type etcdCluster struct {
	binary  string
	members []*etcdMember
}

// startEtcd starts n members (in parallel: each waits for a quorum) and
// waits until the cluster serves requests.
func startEtcd(ctx context.Context, binary, dir string, n int, lg *zap.Logger) (*etcdCluster, error) {
	c := &etcdCluster{binary: binary}
	var peers []string
	for i := range n {
		client, err := etcdserver.FreeAddr()
		if err != nil {
			return nil, err
		}
		peer, err := etcdserver.FreeAddr()
		if err != nil {
			return nil, err
		}
		name := fmt.Sprintf("etcd-%d", i+1)
		c.members = append(c.members, &etcdMember{name: name, clientAddr: client, peerAddr: peer})
		peers = append(peers, name+"=http://"+peer)
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
	return clientv3.New(clientv3.Config{
		Endpoints:   c.endpoints(),
		DialTimeout: 2 * time.Second,
		Logger:      zap.NewNop(),
	})
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
