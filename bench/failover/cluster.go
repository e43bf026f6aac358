package failover

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/jobfleet/jobfleet/internal/etcdcluster"
)

// cluster is a multi-member etcd, each member a `jobfleet etcd` process.
type cluster struct {
	binary  string
	layout  []etcdcluster.Member
	members []*etcdMember // members[i] runs layout[i]
}

type etcdMember struct {
	etcdcluster.Member
	args []string
	log  string

	mu   sync.Mutex // guards cmd and done
	cmd  *exec.Cmd  // nil while stopped
	done chan struct{}
}

// startCluster starts n members in dir and waits until the cluster serves
// requests.
func startCluster(ctx context.Context, binary, dir string, n int, fsync bool, portBase int) (*cluster, error) {
	logs, err := logDir(dir)
	if err != nil {
		return nil, err
	}
	addrs := etcdcluster.FreeAddrs
	if portBase > 0 {
		addrs = etcdcluster.PortAddrs(portBase)
	}
	c := &cluster{binary: binary}
	if c.layout, err = etcdcluster.Layout(n, addrs); err != nil {
		return nil, err
	}
	for _, lm := range c.layout {
		m := &etcdMember{Member: lm, args: lm.Args(dir, c.layout), log: filepath.Join(logs, lm.Name+".log")}
		if !fsync {
			m.args = append(m.args, "--unsafe-no-fsync")
		}
		c.members = append(c.members, m)
		if err := m.start(binary); err != nil {
			c.kill()
			return nil, err
		}
	}
	if _, err := c.waitServing(ctx, time.Now(), time.Minute); err != nil {
		c.kill()
		return nil, err
	}
	return c, nil
}

func (m *etcdMember) start(binary string) error {
	log, err := os.OpenFile(m.log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	defer log.Close() // the child has its own descriptor
	cmd := exec.Command(binary, m.args...)
	cmd.Stdout, cmd.Stderr = log, log
	cmd.SysProcAttr = sysProcAttr()
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start %s: %w", m.Name, err)
	}
	done := make(chan struct{})
	go func() {
		_ = cmd.Wait() // killed on purpose; the log says the rest
		close(done)
	}()
	m.mu.Lock()
	m.cmd, m.done = cmd, done
	m.mu.Unlock()
	return nil
}

// kill SIGKILLs the member and waits until it is reaped.
func (m *etcdMember) kill() {
	m.mu.Lock()
	cmd, done := m.cmd, m.done
	m.cmd = nil
	m.mu.Unlock()
	if cmd == nil {
		return
	}
	_ = cmd.Process.Kill()
	<-done
}

func (m *etcdMember) running() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.cmd != nil
}

func (c *cluster) endpoints() []string { return etcdcluster.Endpoints(c.layout) }

func (c *cluster) clientAddrs() []string {
	var out []string
	for _, m := range c.layout {
		out = append(out, m.ClientAddr)
	}
	return out
}

func (c *cluster) kill() {
	for _, m := range c.members {
		m.kill()
	}
}

// killLeader SIGKILLs the leader, keeps it down for down, starts it again
// and returns the time from the kill until the cluster served a write.
func (c *cluster) killLeader(ctx context.Context, cl *clientv3.Client, down time.Duration) (time.Duration, error) {
	i, err := etcdcluster.AwaitLeader(ctx, cl, c.layout, func(i int) bool { return c.members[i].running() }, 10*time.Second)
	if err != nil {
		return 0, err
	}
	leader := c.members[i]
	killed := time.Now()
	leader.kill()
	served := make(chan time.Duration, 1)
	go func() {
		d, _ := c.waitServing(ctx, killed, time.Minute)
		served <- d
	}()
	sleep(ctx, down)
	if err := leader.start(c.binary); err != nil {
		return 0, err
	}
	d := <-served
	if d == 0 {
		return 0, errors.New("etcd did not serve writes again within a minute of the leader kill")
	}
	// And the restarted member has caught up.
	if _, err := c.waitServing(ctx, time.Now(), time.Minute); err != nil {
		return 0, err
	}
	return d, nil
}

// waitServing waits until a write through every running member succeeds
// and returns the time since start; 0 with an error after timeout.
func (c *cluster) waitServing(ctx context.Context, start time.Time, timeout time.Duration) (time.Duration, error) {
	var eps []string
	for _, m := range c.members {
		if m.running() {
			eps = append(eps, m.URL())
		}
	}
	var lastErr error
	for _, ep := range eps {
		cl, err := clientv3.New(clientv3.Config{Endpoints: []string{ep}, DialTimeout: time.Second, Logger: zap.NewNop()})
		if err != nil {
			return 0, err
		}
		for {
			rctx, cancel := context.WithTimeout(ctx, time.Second)
			_, err := cl.Put(rctx, "/jobfleet-bench/failover-probe", ep)
			cancel()
			if err == nil {
				break
			}
			lastErr = err
			if ctx.Err() != nil || time.Since(start) > timeout {
				cl.Close()
				return 0, fmt.Errorf("etcd not serving after %v: %w", timeout, errors.Join(lastErr, ctx.Err()))
			}
			sleep(ctx, 20*time.Millisecond)
		}
		cl.Close()
	}
	return time.Since(start), nil
}

// startStress starts n busy processes (a shell spinning) and returns the
// function that kills them.
func startStress(n int) (stop func(), err error) {
	var cmds []*exec.Cmd
	stop = func() {
		for _, cmd := range cmds {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
		}
		cmds = nil
	}
	for range n {
		cmd := exec.Command("sh", "-c", "while :; do :; done")
		cmd.SysProcAttr = sysProcAttr()
		if err := cmd.Start(); err != nil {
			stop()
			return nil, fmt.Errorf("failover: stress: %w", err)
		}
		cmds = append(cmds, cmd)
	}
	return stop, nil
}
