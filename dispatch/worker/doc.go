// Package worker is the jobfleet worker runtime: it pulls attempts from the
// fleet's orchestrators, runs them with the "http" and "shell" executors or
// with named handlers registered by Go code, and reports their results. It
// is what `jobfleet worker` runs, and can be embedded:
//
//	w, err := worker.New(worker.Config{
//		ID:            "billing-1",
//		Orchestrators: worker.MembersFrom("http://orchestrator:8080"),
//		Token:         os.Getenv("JOBFLEET_TOKEN"), // a credential of role worker
//		Logger:        logger,
//		Concurrency:   8,
//	})
//	w.Handle("send-invoice", func(ctx context.Context, run worker.Run) error { … })
//	err = w.Run(ctx) // until ctx is cancelled, then a graceful shutdown
//
// It links neither etcd nor gRPC: its documents are package api's, its
// HTTP destination policy is package egress, and the discovery of the
// orchestrators from etcd is a package a program opts into
// (dispatch/worker/etcddiscovery).
//
// # What it guarantees
//
//   - Bounded concurrency: the worker never holds more attempts than
//     Config.Concurrency. Each long poll (api.PollRequest) reserves
//     the slots it asks for (Max), across all orchestrators, and gives back
//     those the reply does not fill; an attempt keeps its slot until its
//     result is reported or it is dropped. An idle long poll holds one
//     slot, so a worker should have at least as many slots as there are
//     orchestrators; with fewer, polls are kept short (1s) and the
//     orchestrators take turns.
//   - Leases are kept: an attempt heartbeats its owner every third of its
//     lease, from the poll that returns it until its result is reported
//     (a delayed report does not let the lease expire). A 421 reply moves the attempt's heartbeats and
//     completion to the partition's new owner. A 409 reply (stale) or a
//     heartbeat reply asking to cancel stops the execution; a stale attempt
//     is dropped without a report, a cancelled one is reported failed.
//   - Every attempt taken ends in exactly one of: a completion delivered
//     (retried with back-off on network errors and 503 for up to
//     Config.ReportTimeout, following 421 redirects), a completion refused
//     as stale (409), or a logged failure to deliver after which the
//     orchestrator retries the run when the attempt's lease expires. None
//     is held silently.
//   - Timeouts: each attempt runs under its grant's Timeout; after it
//     the execution is cancelled and the attempt reported failed ("timed
//     out after …"). A shell command's whole process group is signalled
//     (SIGTERM, then SIGKILL after Config.KillGrace), and whatever remains
//     of the group when the command exits is killed, so no child outlives
//     its attempt unless it left the group. The group dies with the worker
//     too, however the worker dies (SIGKILL included): a guard process,
//     started from the worker's own executable, leads it and kills it
//     when the worker's end of a pipe closes. A program embedding the
//     worker that runs shell commands is therefore run again as that guard;
//     this package's initialisation takes such a run over before main.
//   - Graceful shutdown: when Run's context is cancelled the worker stops
//     polling, lets in-flight attempts finish for up to
//     Config.ShutdownTimeout, then cancels the rest and reports them failed
//     with the error "worker shutting down", so the orchestrator retries
//     them (if the job has attempts left). Run returns only after every
//     goroutine it started has exited.
//   - Handlers: a panic in a handler is recovered and reported as a
//     failure.
//   - Least privilege for the "http" executor: every connection is checked
//     against Config.HTTPPolicy (an egress.Policy) when it is made, on the
//     resolved address (deny list; the fleet's orchestrators, as discovery
//     reports them, and etcd endpoints, always; allow list; default denial
//     of loopback, link-local, unspecified, multicast and broadcast
//     addresses). A refused destination fails the attempt with an
//     *egress.DestinationError and is sent nothing. No proxy from the
//     environment unless Config.HTTPPolicy.ProxyFromEnvironment.
//     Redirects are followed only for
//     executors with follow_redirects, within the policy, at most 5, never
//     changing the method or dropping the body, and without the job's
//     headers for another origin. URLs with user:password are refused.
//   - Least privilege for the "shell" executor: a command's environment
//     is PATH, HOME, LANG, its run's JOBFLEET_* variables and the
//     variables Config.ShellEnv names, never the rest of the worker's
//     environment.
//   - Secret references ({"secret_env": "NAME"} in header values, the
//     payload, the body) are resolved just before execution from the
//     variables Config.SecretEnv allows; a missing one fails the attempt
//     with an error naming it, never a value.
//   - Credentials: every request to an orchestrator carries Config.Token
//     as a bearer token, over Config.TLS for https. A refused credential
//     (401, 403) is logged at once at error level, naming the orchestrator
//     and the fix, then once per change, and backed off, never spun on.
//     While no orchestrator has ever accepted the credential (the worker
//     was started without a valid one; only an accepted registration or
//     poll counts, not a members-list read, which a viewer's credential
//     may make), Run stops once the refusals have
//     lasted 5 seconds and returns an error wrapping ErrCredentialRefused
//     and the orchestrator's *CredentialError: a program embedding a
//     worker learns of it from Run, as it would from a failed connect,
//     rather than from a worker that polls in vain forever; the 5 seconds
//     let a credential made just before reach every orchestrator. Once
//     accepted, later refusals (a revoked credential, one orchestrator
//     misconfigured) are logged and retried, never fatal.
//   - Reports are safe to print: outputs and errors are valid UTF-8 with
//     control characters other than newline and tab escaped (\x1b), and
//     over their cap (api.MaxOutputBytes, 8 KiB for errors) keep
//     their head and tail with a marker saying how many bytes were cut.
//
// # What it does not guarantee
//
// Execution is at least once, not exactly once: a run may be executed more
// than once (a worker that dies or loses its lease, a report that could not
// be delivered, a retry after "worker shutting down"), and a cancelled
// attempt may have done part of its work. Receivers must de-duplicate on
// the run ID (the Jobfleet-Run-Id header, JOBFLEET_RUN_ID, Run.RunID), which
// is the same across the attempts of a run, and for an item of a sharded
// or broadcast run on its index too (Jobfleet-Shard-Index,
// JOBFLEET_SHARD_INDEX, Run.ShardIndex). A long poll that is cut short
// by shutdown or by the orchestrator leaving the members list may lose the
// attempts an orchestrator was handing out in that instant; they are
// retried after their lease.
//
// The destination policy knows the fleet's endpoints by the addresses the
// worker knows them by; an orchestrator or etcd also listening on other
// addresses must be kept out with Config.HTTPPolicy.Deny. A resolved secret
// reaches the job's receiver, which may echo it into the run's output.
//
// # Platforms
//
// The package builds for every platform Go supports; the shell executor
// runs only on unix systems (it stops a command's whole process group),
// and elsewhere fails its attempts saying so. CI vets it for Windows.
//
// # Orchestrators
//
// Discovery says which orchestrators to poll: StaticOrchestrators (a fixed
// list), MembersFrom (GET /v1/cluster/members from any known orchestrator,
// refreshed periodically), etcddiscovery.New (the members' registrations
// in etcd, watched; a Discovery that reads etcd implements EtcdEndpointer,
// and the worker refuses those endpoints to "http" jobs) or any other
// Discovery. Orchestrators that appear are polled at once; those
// that disappear stop being polled, while attempts they handed out are
// still heartbeated and reported to their owner.
package worker
