// Package etcdcluster lays out a multi-member etcd cluster whose members
// are `jobfleet etcd` processes (internal/etcdserver, one per process) on
// one machine, and finds its raft leader: the members' names and
// addresses, the arguments that start each one, and the leader as the
// members' status reports it.
//
// The failover benchmark (bench/failover) and the fault-injection suite
// (internal/chaos) start their clusters with it; starting, killing and
// logging the processes stays with them.
//
// What it does not promise: the addresses FreeAddrs picks are free when
// picked, not when a member binds them.
package etcdcluster

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/jobfleet/jobfleet/internal/etcdserver"
)

// Member is one member of the cluster: its name and the host:port
// addresses of its client and peer listeners.
type Member struct {
	Name       string
	ClientAddr string
	PeerAddr   string
}

// URL returns the member's client URL.
func (m Member) URL() string { return "http://" + m.ClientAddr }

// Addrs gives member i (named name) its client and peer addresses.
type Addrs func(i int, name string) (client, peer string, err error)

// FreeAddrs gives every member two free loopback ports.
func FreeAddrs(int, string) (client, peer string, err error) {
	if client, err = etcdserver.FreeAddr(); err != nil {
		return "", "", err
	}
	if peer, err = etcdserver.FreeAddr(); err != nil {
		return "", "", err
	}
	return client, peer, nil
}

// PortAddrs gives member i loopback ports base+2i (client) and base+2i+1
// (peer).
func PortAddrs(base int) Addrs {
	return func(i int, _ string) (string, string, error) {
		return fmt.Sprintf("127.0.0.1:%d", base+2*i), fmt.Sprintf("127.0.0.1:%d", base+2*i+1), nil
	}
}

// Layout returns n members named etcd-1 … etcd-n with the addresses addrs
// gives them, or addrs's first error.
func Layout(n int, addrs Addrs) ([]Member, error) {
	members := make([]Member, 0, n)
	for i := range n {
		m := Member{Name: fmt.Sprintf("etcd-%d", i+1)}
		var err error
		if m.ClientAddr, m.PeerAddr, err = addrs(i, m.Name); err != nil {
			return nil, err
		}
		members = append(members, m)
	}
	return members, nil
}

// InitialCluster returns etcd's --initial-cluster for members:
// name=https://peer pairs, comma separated. The peer URLs are https so
// that the members speak TLS to each other (internal/etcdserver's auto
// TLS) and no web page can reach their peer ports.
func InitialCluster(members []Member) string {
	peers := make([]string, 0, len(members))
	for _, m := range members {
		peers = append(peers, m.Name+"=https://"+m.PeerAddr)
	}
	return strings.Join(peers, ",")
}

// Args returns the arguments of the jobfleet binary that start m as a
// member of cluster (whose members m is one of), with its data in
// dir/data/<name>. Callers append further flags (--unsafe-no-fsync, …).
func (m Member) Args(dir string, cluster []Member) []string {
	return []string{
		"etcd",
		"--name=" + m.Name,
		"--data-dir=" + filepath.Join(dir, "data", m.Name),
		"--listen-client=" + m.ClientAddr,
		"--listen-peer=" + m.PeerAddr,
		"--initial-cluster=" + InitialCluster(cluster),
	}
}

// Endpoints returns every member's client URL.
func Endpoints(members []Member) []string {
	out := make([]string, 0, len(members))
	for _, m := range members {
		out = append(out, m.URL())
	}
	return out
}

// Leader returns the index in members of the raft leader, asking each
// member i for which live(i) holds for its status (the maintenance Status
// API, through cl, within a second each). It fails, saying what each
// member answered, when none of them is the leader.
func Leader(ctx context.Context, cl *clientv3.Client, members []Member, live func(i int) bool) (int, error) {
	var errs []error
	for i, m := range members {
		if !live(i) {
			continue
		}
		sctx, cancel := context.WithTimeout(ctx, time.Second)
		st, err := cl.Status(sctx, m.URL())
		cancel()
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", m.Name, err))
			continue
		}
		if st.Leader != 0 && st.Leader == st.Header.MemberId {
			return i, nil
		}
	}
	return -1, fmt.Errorf("no etcd leader found: %w", errors.Join(errs...))
}

// AwaitLeader asks as Leader does every 100 ms until it finds the leader;
// it fails with Leader's last error once timeout has passed or ctx has
// ended.
func AwaitLeader(ctx context.Context, cl *clientv3.Client, members []Member, live func(i int) bool, timeout time.Duration) (int, error) {
	deadline := time.Now().Add(timeout)
	for {
		i, err := Leader(ctx, cl, members, live)
		if err == nil {
			return i, nil
		}
		if ctx.Err() != nil || time.Now().After(deadline) {
			return -1, err
		}
		t := time.NewTimer(100 * time.Millisecond)
		select {
		case <-ctx.Done():
		case <-t.C:
		}
		t.Stop()
	}
}
