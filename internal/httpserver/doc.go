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
//     once (golang.org/x/net/netutil.LimitListener); further connections
//     wait in the kernel's accept queue and are taken as earlier ones close,
//     so a flood holds a bounded number of the process's file descriptors.
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
// Not guaranteed: fairness between clients (one client may take every
// connection of the cap; callers that need per-client limits add them in
// their handlers), protection of other listeners of the process (each has
// its own cap: size the caps with ConnectionCap so that their sum leaves
// descriptors for the rest of the process), and a reload of the client CA
// file (read once, at start).
package httpserver
