// Package etcdserver runs an etcd member inside the current process.
//
// It backs `jobfleet dev` and the test harness in internal/testkit/etcdtest: a real
// etcd server (go.etcd.io/etcd/server/v3/embed), not a mock, listening on
// loopback. By default the server is a single-member cluster of its own;
// with Config.Name and Config.InitialCluster it is one member of a
// multi-member cluster (the fault-injection harness in internal/chaos runs
// three, each in its own `jobfleet etcd` process, so that one can be
// killed). It is not meant for production; production fleets use an etcd
// cluster of their own.
//
// Guarantees:
//
//   - Web pages cannot reach it. The client port serves no JSON gateway
//     (/v3/... answers 404), sends CORS headers only for its own origin,
//     and answers its plain HTTP endpoints (/health, /metrics, /version)
//     only for the Host names it listens on (421 otherwise: DNS
//     rebinding). A single-member server has no peer listener at all (the
//     peer port served raft and lease renewals to anyone); members of a
//     multi-member cluster with https:// peer URLs speak TLS to each
//     other with self-made certificates, which no browser completes a
//     handshake with.
//   - Close stops the server and releases its ports and files; it is
//     idempotent.
//
// Not guaranteed: authentication (any local process can connect to the
// client port and read or write everything), peer authentication between
// members (with auto TLS the members do not verify each other's
// certificates; any local process can speak to a peer port), protection
// of http:// peer URLs, durability with NoFsync.
package etcdserver
