// Package egress is the HTTP destination policy: where the worker's "http"
// executor (package dispatch/worker) and an orchestrator's run
// notifications may connect. A Policy lists what is allowed, denied and
// the fleet's own endpoints; a Guard enforces it on URLs (CheckURL) and on
// connections (DialContext, HTTPTransport); a Transport is an
// http.RoundTripper that does both. It imports nothing of the server, so
// that a program embedding a worker links neither etcd nor gRPC.
//
// # Guarantees
//
//   - Every connection is checked when it is made, on the address it is
//     made to (a host name is resolved by the Guard, each address checked,
//     and the dialer's Control hook checks the address actually
//     connected to), so a name cannot be re-pointed past the check (DNS
//     rebinding). Host names are also checked as written, before any
//     request is sent.
//   - The fleet's endpoints (Policy.Fleet, AddFleet, the orchestrators of
//     SetOrchestrators and the etcd endpoints of LearnEtcd) are refused
//     by address and port whatever Allow says; etcd's ports 2379 and 2380
//     are refused on every host unless an Allow entry names the port;
//     loopback, link-local (cloud metadata), unspecified, multicast and
//     broadcast addresses are refused unless allowed. The rules and their
//     order are documented on Policy.
//   - Every refusal is a *DestinationError (errors.Is
//     ErrDestinationDenied) naming the destination and the rule; nothing
//     was sent to it. A URL carrying user:password is refused.
//   - Connections are not kept alive, so each request is checked against
//     the fleet's endpoints as they are then.
//   - Guard and Transport are safe for concurrent use (AddFleet excepted:
//     call it before the checks start).
//
// # Not guaranteed
//
//   - Through a proxy (Policy.ProxyFromEnvironment) only the host as
//     written in the URL, and the proxy's own address, are checked: the
//     proxy resolves and connects to the destination itself.
//   - The policy does not limit what is sent or how much is read; callers
//     bound their requests and replies.
//   - Redirects are the caller's: an http.Client's CheckRedirect should
//     call CheckURL (the worker does, and follows them only when the job
//     asks; notification delivery does not follow them).
package egress
