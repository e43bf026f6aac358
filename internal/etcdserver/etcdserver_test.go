package etcdserver_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/jobfleet/jobfleet/internal/etcdserver"
)

func TestSingleMemberKeepsDataAcrossRestart(t *testing.T) {
	dir := t.TempDir()
	s, err := etcdserver.Start(etcdserver.Config{Dir: dir, NoFsync: true})
	if err != nil {
		t.Fatal(err)
	}
	c := client(t, s.Endpoints())
	if _, err := c.Put(context.Background(), "k", "v"); err != nil {
		t.Fatal(err)
	}
	s.Close()
	s, err = etcdserver.Start(etcdserver.Config{Dir: dir, ClientAddr: s.ClientAddr(), PeerAddr: s.PeerAddr(), NoFsync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := c.Get(ctx, "k")
	if err != nil || len(resp.Kvs) != 1 || string(resp.Kvs[0].Value) != "v" {
		t.Fatalf("after restart: get k = %v, %v; want v", resp, err)
	}
}

// TestThreeMembersFormOneCluster starts a 3-member cluster in this process
// (the chaos harness starts each member in its own `jobfleet etcd`
// process), checks that it has one leader and replicates writes, and that
// it survives losing its leader.
func TestThreeMembersFormOneCluster(t *testing.T) {
	var cfgs []etcdserver.Config
	var peers []string
	for i := range 3 {
		client, err := etcdserver.FreeAddr()
		if err != nil {
			t.Fatal(err)
		}
		peer, err := etcdserver.FreeAddr()
		if err != nil {
			t.Fatal(err)
		}
		name := fmt.Sprintf("m%d", i+1)
		cfgs = append(cfgs, etcdserver.Config{Dir: t.TempDir(), ClientAddr: client, PeerAddr: peer, Name: name, NoFsync: true, StartTimeout: 30 * time.Second})
		peers = append(peers, name+"=http://"+peer)
	}
	servers := make([]*etcdserver.Server, 3)
	errs := make([]error, 3)
	var wg sync.WaitGroup
	for i := range cfgs {
		cfgs[i].InitialCluster = strings.Join(peers, ",")
		wg.Go(func() { servers[i], errs[i] = etcdserver.Start(cfgs[i]) })
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("member %d: %v", i+1, err)
		}
		defer servers[i].Close()
	}
	var endpoints []string
	for _, s := range servers {
		endpoints = append(endpoints, s.Endpoints()...)
	}
	c := client(t, endpoints)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	members, err := c.MemberList(ctx)
	if err != nil || len(members.Members) != 3 {
		t.Fatalf("member list: %v, %v; want 3 members", members, err)
	}
	leader := -1
	for i, s := range servers {
		st, err := c.Status(ctx, s.Endpoints()[0])
		if err != nil {
			t.Fatalf("status of member %d: %v", i+1, err)
		}
		if st.Leader == st.Header.MemberId {
			leader = i
		}
	}
	if leader < 0 {
		t.Fatal("no member says it is the leader")
	}
	if _, err := c.Put(ctx, "k", "v1"); err != nil {
		t.Fatal(err)
	}
	servers[leader].Close() // the others elect a new leader and keep serving
	for {
		_, err := c.Put(ctx, "k", "v2")
		if err == nil {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("no write accepted after the leader stopped: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	follower := servers[(leader+1)%3]
	fc := client(t, follower.Endpoints())
	resp, err := fc.Get(ctx, "k")
	if err != nil || len(resp.Kvs) != 1 || string(resp.Kvs[0].Value) != "v2" {
		t.Fatalf("get k from a survivor = %v, %v; want v2", resp, err)
	}
}

func client(t *testing.T, endpoints []string) *clientv3.Client {
	t.Helper()
	c, err := clientv3.New(clientv3.Config{Endpoints: endpoints, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}
