package etcdcluster_test

import (
	"context"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jobfleet/jobfleet/internal/etcdcluster"
	"github.com/jobfleet/jobfleet/internal/testkit/etcdtest"
)

var etcd *etcdtest.Server

func TestMain(m *testing.M) { os.Exit(etcdtest.Main(m, &etcd)) }

// TestLayout checks names, addresses, --initial-cluster and the
// arguments of a three-member layout on fixed ports.
func TestLayout(t *testing.T) {
	ms, err := etcdcluster.Layout(3, etcdcluster.PortAddrs(20600))
	if err != nil {
		t.Fatal(err)
	}
	want := []etcdcluster.Member{
		{Name: "etcd-1", ClientAddr: "127.0.0.1:20600", PeerAddr: "127.0.0.1:20601"},
		{Name: "etcd-2", ClientAddr: "127.0.0.1:20602", PeerAddr: "127.0.0.1:20603"},
		{Name: "etcd-3", ClientAddr: "127.0.0.1:20604", PeerAddr: "127.0.0.1:20605"},
	}
	if !slices.Equal(ms, want) {
		t.Fatalf("Layout = %+v, want %+v", ms, want)
	}
	cluster := "etcd-1=https://127.0.0.1:20601,etcd-2=https://127.0.0.1:20603,etcd-3=https://127.0.0.1:20605"
	if got := etcdcluster.InitialCluster(ms); got != cluster {
		t.Errorf("InitialCluster = %q, want %q", got, cluster)
	}
	args := []string{"etcd", "--name=etcd-2", "--data-dir=/d/data/etcd-2", "--listen-client=127.0.0.1:20602",
		"--listen-peer=127.0.0.1:20603", "--initial-cluster=" + cluster}
	if got := ms[1].Args("/d", ms); !slices.Equal(got, args) {
		t.Errorf("Args = %q, want %q", got, args)
	}
	eps := []string{"http://127.0.0.1:20600", "http://127.0.0.1:20602", "http://127.0.0.1:20604"}
	if got := etcdcluster.Endpoints(ms); !slices.Equal(got, eps) {
		t.Errorf("Endpoints = %q, want %q", got, eps)
	}
}

// TestFreeAddrs checks that every member gets two addresses of its own.
func TestFreeAddrs(t *testing.T) {
	ms, err := etcdcluster.Layout(2, etcdcluster.FreeAddrs)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, m := range ms {
		for _, a := range []string{m.ClientAddr, m.PeerAddr} {
			if !strings.HasPrefix(a, "127.0.0.1:") || seen[a] {
				t.Errorf("address %q: not loopback or given twice in %+v", a, ms)
			}
			seen[a] = true
		}
	}
}

// TestLeader finds the leader of a single-member cluster (itself), skips
// members that are not live and says what each member answered when none
// is the leader.
func TestLeader(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cl := etcd.Client(t)
	down := etcdcluster.Member{Name: "down", ClientAddr: "127.0.0.1:1"}
	self := etcdcluster.Member{Name: "self", ClientAddr: etcd.ClientAddr()}
	ms := []etcdcluster.Member{down, self}
	all := func(int) bool { return true }
	if i, err := etcdcluster.Leader(ctx, cl, ms, all); err != nil || i != 1 {
		t.Errorf("Leader = %d, %v; want 1", i, err)
	}
	if i, err := etcdcluster.AwaitLeader(ctx, cl, ms, all, time.Second); err != nil || i != 1 {
		t.Errorf("AwaitLeader = %d, %v; want 1", i, err)
	}
	onlyDown := func(i int) bool { return i == 0 }
	_, err := etcdcluster.Leader(ctx, cl, ms, onlyDown)
	if err == nil || !strings.Contains(err.Error(), "no etcd leader found") || !strings.Contains(err.Error(), "down:") {
		t.Errorf("Leader among a dead member = %v, want an error naming it", err)
	}
	start := time.Now()
	if _, err := etcdcluster.AwaitLeader(ctx, cl, ms, onlyDown, 300*time.Millisecond); err == nil {
		t.Error("AwaitLeader among a dead member succeeded")
	}
	if waited := time.Since(start); waited < 300*time.Millisecond {
		t.Errorf("AwaitLeader gave up after %v, before its 300ms", waited)
	}
}
