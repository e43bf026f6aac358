package deathwatch_test

import (
	"context"
	"fmt"
	"net"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/jobfleet/jobfleet/api"
	"github.com/jobfleet/jobfleet/membership"
	"github.com/jobfleet/jobfleet/membership/deathwatch"
)

// Every member runs a Detector over the member view. When a peer's
// process dies its address refuses connections, and the detector revokes
// the peer's lease: its registration (and its owner keys) go at once,
// long before the lease's 60 s TTL.
func ExampleDetector() {
	client, err := clientv3.New(clientv3.Config{Endpoints: etcd.Endpoints(), DialTimeout: 5 * time.Second})
	if err != nil {
		panic(err)
	}
	defer client.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	const ns = "/example-deathwatch/"

	// The peer: a listening process registered under its lease.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		panic(err)
	}
	s, err := membership.NewSession(ctx, client, membership.DefaultSessionConfig(60*time.Second))
	if err != nil {
		panic(err)
	}
	defer s.Close()
	if _, err := membership.Register(ctx, client, s, ns, api.Member{ID: "peer", Addr: "http://" + ln.Addr().String()}, nil); err != nil {
		panic(err)
	}

	// This member: the member view and the detector.
	view, err := membership.NewWatcher(client, ns, nil)
	if err != nil {
		panic(err)
	}
	d, err := deathwatch.New(client, view, deathwatch.Config{Namespace: ns, Self: "me"})
	if err != nil {
		panic(err)
	}
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel()
	wg.Go(func() { _ = view.Run(ctx) })
	wg.Go(func() { d.Run(ctx) })
	if _, err := view.WaitFor(ctx, func(v api.View) bool { return len(v.Members) == 1 }); err != nil {
		panic(err)
	}
	time.Sleep(2 * deathwatch.DefaultInterval) // let a probe reach the peer

	s.Orphan() // the peer's process dies: no more keepalives,
	ln.Close() // and nothing listens on its address
	if _, err := view.WaitFor(ctx, func(v api.View) bool { return len(v.Members) == 0 }); err != nil {
		panic(err)
	}
	ttl, _ := client.TimeToLive(ctx, s.Lease())
	fmt.Println("peer's registration gone; lease TTL left:", ttl.TTL)
	// Output:
	// peer's registration gone; lease TTL left: -1
}
