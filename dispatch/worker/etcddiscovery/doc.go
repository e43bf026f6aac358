// Package etcddiscovery tells a worker (package dispatch/worker) which
// orchestrators to poll by reading their registrations from the fleet's
// etcd, as the orchestrators themselves do. It is the one part of the
// worker library that links etcd's client: a program that finds the
// orchestrators through their HTTP API (worker.MembersFrom) or a fixed
// list (worker.StaticOrchestrators) does not import it and links neither
// etcd nor gRPC. `jobfleet worker --etcd-endpoints` and `jobfleet dev`
// use it.
//
//	cli, _ := clientv3.New(clientv3.Config{Endpoints: []string{"http://127.0.0.1:2379"}})
//	w, err := worker.New(worker.Config{
//		ID:            "w1",
//		Orchestrators: etcddiscovery.New(cli, "/jobfleet/"),
//		Token:         token,
//	})
//
// # Guarantees
//
//   - Members.Watch reports the members' addresses as soon as the first
//     read of <namespace>members/ completes (an empty list if there are
//     none), then on every change of the set of addresses, and returns nil
//     when its context ends. Its goroutine is stopped before it returns.
//   - Connection trouble with etcd is retried by the watch; meanwhile the
//     last list stays in force.
//   - Members is a worker.EtcdEndpointer: a worker using it refuses etcd's
//     endpoints to "http" jobs.
//
// # Not guaranteed
//
//   - The list is what etcd records: a member that crashed is listed
//     until its lease expires (the worker's polls to it fail meanwhile).
//   - The etcd client is the caller's: Members neither creates nor closes
//     it, and uses its TLS and credentials as they are.
package etcddiscovery
