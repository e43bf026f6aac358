package workers_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jobfleet/jobfleet/api"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/jobfleet/jobfleet/dispatch/workers"
)

// A member registers a worker for its credential; another credential is
// refused the worker's ID, and told why. (Run keeps the member's copy of
// the registry; registering does not need it.)
func ExampleRegistry_Register() {
	client, err := clientv3.New(clientv3.Config{Endpoints: etcd.Endpoints(), DialTimeout: 5 * time.Second})
	if err != nil {
		panic(err)
	}
	defer client.Close()
	r, err := workers.New(client, workers.Config{Namespace: "/example-register/", Member: "orchestrator-1"})
	if err != nil {
		panic(err)
	}
	ctx := context.Background()
	resp, err := r.Register(ctx, api.RegisterRequest{Worker: "billing-1", Credential: "billing-worker", Prefix: "billing/", Executors: []string{"http"}, Concurrency: 4})
	fmt.Println(resp.TTL, resp.Orchestrator, err)

	_, err = r.Register(ctx, api.RegisterRequest{Worker: "billing-1", Credential: "other-worker", Executors: []string{"http"}, Concurrency: 1})
	fmt.Println(errors.Is(err, workers.ErrIDTaken))
	fmt.Println(err)
	// Output:
	// 6s orchestrator-1 <nil>
	// true
	// worker ID held by another credential: "billing-1" is registered with another credential, and stays bound to it while that registration lives and for 15m0s after it ends; give this worker another ID
}
