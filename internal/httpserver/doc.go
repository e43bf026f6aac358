// Package httpserver serves jobfleet's HTTP listeners (the orchestrator
// API, the metrics listeners, `jobfleet dev`'s echo endpoint) with the
// limits a server exposed to a network needs, and TLS from PEM files that
// are picked up again when they change.
//
// Guarantees:
//
//   - Every connection is bounded in time: request headers must arrive
//     within Config.ReadHeaderTimeout, the whole request (headers and body)
//     within Config.ReadTimeout, the reply must be written within
//     Config.WriteTimeout of the request's headers, and an idle keep-alive
//     connection is closed after Config.IdleTimeout. A body trickled in a
//     byte at a time is cut at the read timeout.
//   - At most Config.MaxConnections connections of a listener are open at
//     once (and one more accepted, waiting), so a flood holds a bounded
//     number of the process's file descriptors. At the cap a new
//     connection takes the place of the keep-alive connection idle the
//     longest, which is closed; only when none is idle does it wait, and
//     the connections after it wait in the kernel's accept queue, until
//     one closes or turns idle. So idle connections, however many, never
//     keep a new client out.
//   - At most Config.MaxConnectionsPerAddress connections of a listener
//     come from one client address (an IPv4 address or an IPv6 /64,
//     AddrKey); a further one is closed as soon as it is accepted, before
//     it is read from. One address cannot take the cap.
//   - Requests without a valid credential are rate-limited per client
//     address (Config.AnonymousRate): those that present no credential get
//     429 beyond the rate without reaching the handler; those the handler
//     answers 401 count against the same budget. A request that presents a
//     credential always reaches the handler, so a valid credential is
//     served whatever else its address sends.
//   - Each connection closed to stay fair and each 429 of the anonymous
//     limit is counted (jobfleet_http_connections_closed_total{reason},
//     jobfleet_http_anonymous_refused_total).
//   - Request headers above Config.MaxHeaderBytes are refused (431).
//   - Only HTTP/1.1 is served, with or without TLS, so a connection carries
//     one request at a time and the connection cap bounds requests too.
//   - With TLS (TLSFiles.Config): TLS 1.2 at least; the certificate and key
//     are re-read when their contents change, checked at most once per
//     TLSFiles.ReloadInterval during handshakes; a pair that does not load
//     keeps the previous one; each outcome is logged once. With a client CA,
//     every client must present a certificate that verifies against it, and
//     the request's TLS state carries the verified chains.
//
// Not guaranteed: fairness between clients with many addresses (each
// address, or IPv6 /64, has its own per-address limit and anonymous
// budget; N of them hold N times as much, and enough can fill the cap
// with active connections), fairness between callers with valid
// credentials (their rate is the handler's to limit), that a request sent
// on an idle connection at the instant it is closed for a new one is
// served (the client sees the connection closed and retries, as at the
// idle timeout), protection of other listeners of the process (each has
// its own cap: size the caps with ConnectionCap so that their sum leaves
// descriptors for the rest of the process), and a reload of the client CA
// file (read once, at start).
package httpserver
