package etcddiscovery_test

import (
	"context"
	"log"
	"os"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/jobfleet/jobfleet/dispatch/worker"
	"github.com/jobfleet/jobfleet/dispatch/worker/etcddiscovery"
)

// A worker that finds the orchestrators of the fleet in namespace
// "/jobfleet/" from their registrations in etcd, as `jobfleet worker
// --etcd-endpoints` does.
func ExampleNew() {
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{"http://127.0.0.1:2379"}})
	if err != nil {
		log.Fatal(err)
	}
	defer cli.Close()
	w, err := worker.New(worker.Config{
		ID:            "w1",
		Orchestrators: etcddiscovery.New(cli, "/jobfleet/"),
		Token:         os.Getenv("JOBFLEET_TOKEN"),
	})
	if err != nil {
		log.Fatal(err)
	}
	if err := w.Run(context.Background()); err != nil {
		log.Fatal(err)
	}
}
