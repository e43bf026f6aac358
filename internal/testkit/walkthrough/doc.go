// Package walkthrough holds the process test that follows docs/deploy.md's
// path for machines with systemd, literally, on loopback: a 3-member etcd
// cluster of real etcd binaries with client and peer certificates, the
// release binary from deploy/build.sh, orchestrators and a worker started
// the way systemd starts deploy/systemd's unit files (their ExecStart,
// Environment= and LoadCredential= read from the files, with the config
// files they name, only addresses and paths changed), a rolling restart
// under a job
// that fires every second, and a backup restored into a new etcd cluster.
//
// Guarantees (what the test checks): the documented steps bring up a
// fleet that serves over TLS with credentials; a rolling restart of every
// member misses no second of an @every 1s job and fires none twice; every
// job of an etcd snapshot is scheduled again after a restore.
//
// Not guaranteed: what systemd itself enforces (the user, the sandbox
// directives; `systemd-analyze verify` checks the units in the deploy
// module), and anything about Kubernetes or containers. The test runs
// only where an `etcd` binary is on PATH (Debian: etcd-server, with
// etcdctl from etcd-client); .ci/run installs them.
package walkthrough
