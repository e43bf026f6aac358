package membership_test

import (
	"context"
	"fmt"
	"time"

	"github.com/jobfleet/jobfleet/api"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/jobfleet/jobfleet/membership"
)

// A member holds a lease session, registers under it, and stops acting as
// a member when the session ends (Done). Close revokes the lease, which
// removes the registration at once.
func ExampleRegister() {
	client, err := clientv3.New(clientv3.Config{Endpoints: etcd.Endpoints(), DialTimeout: 5 * time.Second})
	if err != nil {
		panic(err)
	}
	defer client.Close()
	ctx := context.Background()
	s, err := membership.NewSession(ctx, client, membership.DefaultSessionConfig(5*time.Second))
	if err != nil {
		panic(err)
	}
	m, err := membership.Register(ctx, client, s, "/example/", api.Member{ID: "orchestrator-1", Addr: "http://127.0.0.1:8080"}, nil)
	if err != nil {
		panic(err)
	}
	fmt.Println("registered", m.ID, "under lease", m.LeaseID == int64(s.Lease()))

	s.Close()
	<-s.Done()
	resp, _ := client.Get(ctx, membership.Key("/example/", "orchestrator-1"))
	fmt.Println("after Close:", len(resp.Kvs), "registrations;", s.Err())
	// Output:
	// registered orchestrator-1 under lease true
	// after Close: 0 registrations; membership: session closed
}
