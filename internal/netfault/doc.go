// Package netfault injects network faults between a client and a TCP
// server: a Bridge forwards connections and can stall them (a network
// partition that loses no bytes) or drop them. Tests cut a member off from
// etcd with it (through the test harnesses), and the rebalance
// benchmark crashes members with it, so it imports no test package and
// may be linked into the jobfleet binary.
//
// Guarantees: bytes held by a cut are delivered in order when the bridge
// is restored; Close stops every goroutine it started and waits for them.
// Not guaranteed: any shaping of latency, loss or bandwidth.
package netfault
