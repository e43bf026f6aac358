"""A jobfleet worker in Python: runs named handlers for a jobfleet fleet.

It speaks the worker protocol of docs/api.md over HTTP(S) with the
standard library only: it registers with one orchestrator and refreshes
the registration, long-polls every orchestrator (each hands out the runs
of the partitions it owns), heartbeats each attempt to the orchestrator
that handed it out (following 421 to a new owner), reports the result,
and on stop() ends its polls (POST /v1/worker/poll:end: they answer at
once, and what they hand out still runs), lets running attempts finish
for up to shutdown_timeout seconds, reports the rest failed ("worker
shutting down") so that they are retried, and deregisters.

    from jobfleet_worker import Worker

    w = Worker(["http://127.0.0.1:8080"], token="jf_...", worker_id="py-1")

    @w.handler("resize-image")
    def resize(run):
        run.log("resizing", run.payload["path"])
        return {"width": 640}      # a step's result (JSON); None for none

    w.run()                        # until w.stop(), or SIGTERM with install_signal_handlers()

A handler that raises fails its attempt with the exception's text; the
job's retry policy decides what follows. What run.log() writes reaches
the orchestrator while the attempt runs (POST /v1/worker/output, at most
every output_push_interval seconds, sooner once 16 KiB are waiting):
`jobfleet run logs -f` and the console's live tail show it. run.cancelled is set when the
orchestrator asks the attempt to stop (the run was cancelled or
replaced) or the worker stops; long handlers should look at it.
"""

import collections
import http.client
import json
import logging
import os
import signal
import ssl
import threading
import time
import urllib.error
import urllib.parse
import urllib.request

__all__ = ["Worker", "Run", "WorkerError"]

# The protocol's paths (docs/api.md, "The worker protocol").
PATH_REGISTER = "/v1/worker/register"
PATH_DEREGISTER = "/v1/worker/deregister"
PATH_POLL = "/v1/worker/poll"
PATH_END_POLLS = "/v1/worker/poll:end"
PATH_HEARTBEAT = "/v1/worker/heartbeat"
PATH_COMPLETE = "/v1/worker/complete"
PATH_OUTPUT = "/v1/worker/output"

# What a completion carries at most (bytes of UTF-8), as the server checks.
MAX_OUTPUT_BYTES = 64 << 10
MAX_ERROR_BYTES = 8 << 10
# A step's result, at most (bytes of compact JSON).
MAX_RESULT_BYTES = 64 << 10
# A live output push carries at most this much (bytes of UTF-8); the
# worker holds at most as much not pushed yet (older lines are skipped:
# readers count them) and pushes early once PUSH_SOON_BYTES wait.
MAX_PUSH_BYTES = 64 << 10
PUSH_SOON_BYTES = 16 << 10

_MAX_REDIRECTS = 3

# The long-poll wait while the worker polls more orchestrators than it has
# slots: each poll holds the slots it asked for while it waits, so polls
# are kept short and the orchestrators take turns.
SHORT_POLL_WAIT = 1.0


class WorkerError(Exception):
    """The worker cannot go on: its credential or ID was refused, or a
    setting is invalid. The message says which."""


class _Reply:
    """An orchestrator's answer: status code, decoded JSON body (or {}),
    and Retry-After in seconds (0 if none)."""

    def __init__(self, status, body, retry_after=0.0):
        self.status = status
        self.body = body
        self.retry_after = retry_after

    def error(self):
        return self.body.get("error", "") if isinstance(self.body, dict) else ""


class Run:
    """One attempt of a run, as a handler sees it.

    job_id, run_id, attempt (from 1), scheduled_at (RFC 3339 text), payload
    (the job's payload decoded from JSON, None without one), executor (the
    grant's executor document), item_index and item_count (of a sharded or
    broadcast run's item; None and 0 otherwise), item_param (the item's
    shards.params entry, None without), step (the step's ID in a run of
    steps, None otherwise), needs (the results of the steps this one
    needs, by step ID, None without), round (the run's round, 0 before
    any retry from a step). cancelled is a threading.Event set when the
    attempt should stop.
    """

    def __init__(self, grant):
        self.job_id = grant["job_id"]
        self.run_id = grant["run_id"]
        self.attempt = grant["attempt"]
        self.scheduled_at = grant.get("scheduled_at", "")
        self.executor = grant.get("executor", {})
        self.payload = grant.get("payload")
        item = grant.get("item")
        self.item_index = item["index"] if item else None
        self.item_count = item["count"] if item else 0
        self.item_param = item.get("param") if item else None
        step = grant.get("step")
        self.step = step["id"] if step else None
        self.needs = step.get("needs") if step else None
        self.round = grant.get("round", 0)
        self.cancelled = threading.Event()
        self._head = []  # the output's first lines, up to half the cap
        self._head_len = 0
        self._tail = collections.deque()  # the last lines after the head: (text, its UTF-8 bytes)
        self._tail_len = 0
        self._dropped = 0  # bytes (of UTF-8) left out between head and tail
        self._lock = threading.Lock()
        # Live output not pushed yet: lines (safe text) and their bytes;
        # _live_total counts every byte logged, so the first waiting byte
        # is at offset _live_total - _live_len.
        self._live = collections.deque()
        self._live_len = 0
        self._live_total = 0
        self._live_wake = threading.Event()  # set when enough waits, or the attempt ended
        self._ended = threading.Event()  # the handler returned

    def log(self, *parts):
        """Append a line (parts joined by spaces) to the attempt's output.
        The output reported is at most 64 KiB: its head and, once it is
        longer, its tail, with a marker counting what was left out."""
        text = " ".join(str(p) for p in parts)
        # Lone surrogates (os.fsdecode's for bytes that are not UTF-8)
        # become U+FFFD, as invalid bytes do in a shell job's output.
        text = text.encode("utf-8", "surrogatepass").decode("utf-8", "replace")
        # Escaped as it is kept, so that the head, the tail and the count
        # of what was cut are measured in the bytes that are stored.
        safe = _escape(text)
        line = safe + "\n"
        half = MAX_OUTPUT_BYTES // 2 - 64
        live = _cut(safe, MAX_PUSH_BYTES - 1) + "\n"
        n = len(live.encode("utf-8"))
        with self._lock:
            self._live.append((live, n))
            self._live_len += n
            self._live_total += n
            while self._live_len > MAX_PUSH_BYTES and len(self._live) > 1:
                self._live_len -= self._live.popleft()[1]
            if self._live_len >= PUSH_SOON_BYTES:
                self._live_wake.set()
            encoded = line.encode("utf-8")
            size = len(encoded)
            if not self._tail and self._head_len + size <= half:
                self._head.append(line)
                self._head_len += size
                return
            kept, kept_size = line, size
            if size > half:  # a line longer than the tail keeps its end, from a character on
                kept = encoded[size - half:].decode("utf-8", "ignore")
                kept_size = len(kept.encode("utf-8"))
            self._tail.append((kept, kept_size))
            self._tail_len += kept_size
            self._dropped += size - kept_size
            while self._tail_len > half and len(self._tail) > 1:
                _, gone = self._tail.popleft()
                self._tail_len -= gone
                self._dropped += gone

    def _take_live(self):
        """The output logged since the last call: (offset, text), text ""
        when nothing waits."""
        with self._lock:
            offset = self._live_total - self._live_len
            text = "".join(line for line, _ in self._live)
            self._live.clear()
            self._live_len = 0
            return offset, text

    def _output(self):
        with self._lock:
            text = "".join(self._head)
            if self._dropped:
                text += "\n[... %d bytes cut ...]\n" % self._dropped  # the Go worker's marker
            return _safe_text(text + "".join(t for t, _ in self._tail), MAX_OUTPUT_BYTES)


def _safe_text(s, limit):
    """s without control characters but newline and tab (written out as
    escapes, as the Go worker does), cut to at most limit bytes of UTF-8."""
    return _cut(_escape(s), limit)


def _cut(text, limit):
    """text cut to at most limit bytes of UTF-8, at a character."""
    b = text.encode("utf-8", "replace")
    if len(b) <= limit:
        return text
    return b[:limit].decode("utf-8", "ignore")


def _escape(s):
    """s with control characters but newline and tab written out as
    escapes (\\x01, \\u0085), as the Go worker writes them."""
    out = []
    for ch in s:
        o = ord(ch)
        if ch in "\n\t" or not (o < 0x20 or o == 0x7F or 0x80 <= o <= 0x9F):
            out.append(ch)
        elif o < 0x80:
            out.append("\\x%02x" % o)
        else:
            out.append("\\u%04x" % o)
    return "".join(out)


def _duration(seconds):
    """seconds as a Go duration text ("25s", "1.5s")."""
    return ("%.3f" % seconds).rstrip("0").rstrip(".") + "s"


def _parse_duration(text, default):
    """A Go duration text of the protocol ("30s", "1m0s", "500ms") in
    seconds; default if it does not parse."""
    units = {"h": 3600.0, "m": 60.0, "s": 1.0, "ms": 1e-3, "us": 1e-6, "µs": 1e-6, "ns": 1e-9}
    if not isinstance(text, str) or not text:
        return default
    total, num = 0.0, ""
    i = 0
    try:
        while i < len(text):
            c = text[i]
            if c.isdigit() or c == ".":
                num += c
                i += 1
                continue
            for u in ("ms", "us", "µs", "ns", "h", "m", "s"):
                if text.startswith(u, i):
                    total += float(num) * units[u]
                    num = ""
                    i += len(u)
                    break
            else:
                return default
        return total if not num else default
    except ValueError:
        return default


class _Slots:
    """The worker's free attempt slots. A poll takes the slots it asks for
    before it is sent, so the worker never holds more attempts than its
    concurrency however many orchestrators it polls. Takes are served
    first come, first served: a poll loop that gives its slots back (an
    idle poll returning empty) and asks again at once queues behind the
    loops already waiting instead of starving them. Safe for concurrent
    use."""

    def __init__(self, n):
        self._cond = threading.Condition()
        self._free = n
        self._queue = collections.deque()

    def take(self, want, stopping):
        """Waits until a slot is free and every earlier take is served,
        then takes up to want (at least one) of the free slots and returns
        how many; returns 0 once the event stopping is set."""
        ticket = object()
        with self._cond:
            self._queue.append(ticket)
            try:
                while self._queue[0] is not ticket or self._free <= 0:
                    if stopping.is_set():
                        return 0
                    self._cond.wait(0.1)
                n = min(self._free, max(want, 1))
                self._free -= n
                return n
            finally:
                self._queue.remove(ticket)
                self._cond.notify_all()

    def put(self, n):
        """Gives n slots back."""
        if n <= 0:
            return
        with self._cond:
            self._free += n
            self._cond.notify_all()


class _HeldSlot:
    """The slot an attempt holds: release gives it back to slots the first
    time it is called and does nothing after. Used by the attempt's own
    thread only."""

    def __init__(self, slots):
        self._slots = slots
        self._held = True

    def release(self):
        if self._held:
            self._held = False
            self._slots.put(1)


class Worker:
    """A worker running named handlers for the orchestrators it is given.

    orchestrators: the members' URLs ("https://orch-1:8080"); token: a
    worker credential's secret (jobfleet token create --role worker);
    worker_id: this worker's ID, bound to the credential (1 to 128 bytes);
    concurrency: attempts at once (1 to 1024); labels: a dict of labels
    for placement selectors; ca_file: a PEM file of CAs to trust for
    https URLs (default: the system's); cert_file and key_file: a client
    certificate, for members that ask for one; poll_wait: seconds a poll
    waits (at most 30); request_timeout: seconds for other requests;
    shutdown_timeout: seconds running attempts may finish after stop();
    output_push_interval: seconds between live output pushes of a running
    attempt (a negative value pushes none).

    Safe to call stop() from any thread or a signal handler.
    """

    def __init__(self, orchestrators, token, worker_id, concurrency=4, labels=None,
                 ca_file=None, cert_file=None, key_file=None, poll_wait=25.0,
                 request_timeout=10.0, shutdown_timeout=30.0, logger=None,
                 output_push_interval=0.25):
        if not orchestrators:
            raise WorkerError("orchestrators: give at least one URL")
        for u in orchestrators:
            p = urllib.parse.urlparse(u)
            if p.scheme not in ("http", "https") or not p.netloc:
                raise WorkerError("orchestrators: %r is not an http or https URL" % u)
        if not token:
            raise WorkerError("token: a worker credential's secret is required")
        if not worker_id or len(worker_id.encode()) > 128:
            raise WorkerError("worker_id: 1 to 128 bytes")
        if not 1 <= concurrency <= 1024:
            raise WorkerError("concurrency: 1 to 1024, got %r" % concurrency)
        if not 0 < poll_wait <= 30:
            raise WorkerError("poll_wait: more than 0 and at most 30 seconds")
        self.orchestrators = [u.rstrip("/") for u in orchestrators]
        self.token = token
        self.worker_id = worker_id
        self.concurrency = concurrency
        self.labels = dict(labels or {})
        self.poll_wait = poll_wait
        self.request_timeout = request_timeout
        self.shutdown_timeout = shutdown_timeout
        self.output_push_interval = output_push_interval
        self.log = logger or logging.getLogger("jobfleet_worker")
        self._handlers = {}
        self._ssl = None
        if any(u.startswith("https:") for u in self.orchestrators):
            self._ssl = ssl.create_default_context(cafile=ca_file)
            if cert_file:
                self._ssl.load_cert_chain(cert_file, key_file)
        self._stopping = threading.Event()
        # Set once the running attempts ended (or were given up): the
        # registration is refreshed until then, so that attempts still
        # running while the worker stops are not taken for lost.
        self._drained = threading.Event()
        self._fatal = None
        self._lock = threading.Lock()
        self._running = {}  # (run_id, item, attempt) -> Run, until reported
        # Attempts of _running whose handler returned and whose slot serves
        # the next attempt while their result is reported: at most
        # concurrency of them (past that, an attempt keeps its slot).
        self._reporting = 0
        self._slots = _Slots(concurrency)
        self._threads = []

    # -- handlers ---------------------------------------------------------

    def handler(self, name):
        """A decorator registering fn as the handler of executor type name."""
        def register(fn):
            self.handle(name, fn)
            return fn
        return register

    def handle(self, name, fn):
        """Run fn(run) for attempts of jobs whose executor type is name. fn's
        return value, when not None, is the attempt's result (JSON; a
        step's result, passed to the steps that need it)."""
        if not name or len(name.encode()) > 64 or name in ("http", "shell"):
            raise WorkerError("handler name: 1 to 64 bytes, not a built-in executor (%r)" % name)
        if self._threads:
            raise WorkerError("handle: register handlers before run()")
        self._handlers[name] = fn

    # -- lifecycle --------------------------------------------------------

    def install_signal_handlers(self):
        """Make SIGTERM and SIGINT call stop() (main thread only)."""
        for s in (signal.SIGTERM, signal.SIGINT):
            signal.signal(s, lambda *_: self.stop())

    def stop(self):
        """Ask run() to stop gracefully; returns at once."""
        self._stopping.set()

    def run(self):
        """Register, poll and run attempts until stop(). Raises WorkerError
        if the credential or the worker ID is refused."""
        if not self._handlers:
            raise WorkerError("no handlers: call handle() first")
        ttl = self._register(first=True)
        refresher = threading.Thread(target=self._refresh, args=(ttl,), name="register", daemon=True)
        refresher.start()
        pollers = []
        for u in self.orchestrators:
            t = threading.Thread(target=self._poll_loop, args=(u,), name="poll " + u, daemon=True)
            t.start()
            pollers.append(t)
        self._threads = pollers + [refresher]
        self._stopping.wait()
        self._end_polls()
        for t in pollers:
            t.join(self.poll_wait + self.request_timeout + 1)
        self._drain()
        self._drained.set()
        self._deregister()
        if self._fatal:
            raise WorkerError(self._fatal)

    def _fail(self, msg):
        self.log.error("%s", msg)
        self._fatal = msg
        self._stopping.set()

    def _drain(self):
        """Waits shutdown_timeout for running attempts; the rest are
        cancelled and reported failed, so that they are retried."""
        deadline = time.monotonic() + self.shutdown_timeout
        while time.monotonic() < deadline:
            with self._lock:
                if not self._running:
                    return
            time.sleep(0.05)
        with self._lock:
            left = list(self._running.values())
        for r in left:
            r.cancelled.set()
        deadline = time.monotonic() + 2
        while time.monotonic() < deadline:
            with self._lock:
                if not self._running:
                    return
            time.sleep(0.05)

    # -- requests ---------------------------------------------------------

    def _post(self, base, path, doc, timeout=None):
        body = json.dumps(doc, separators=(",", ":")).encode()
        req = urllib.request.Request(base + path, data=body, method="POST", headers={
            "Authorization": "Bearer " + self.token,
            "Content-Type": "application/json",
            "User-Agent": "jobfleet-worker-python/0.1",
        })
        try:
            with urllib.request.urlopen(req, timeout=timeout or self.request_timeout, context=self._ssl) as resp:
                return _Reply(resp.status, _decode(resp.read()))
        except urllib.error.HTTPError as e:
            retry = e.headers.get("Retry-After", "0") if e.headers else "0"
            try:
                retry = float(retry)
            except ValueError:
                retry = 1.0
            return _Reply(e.code, _decode(e.read()), retry)

    def _register(self, first=False, base=None):
        doc = {"worker": self.worker_id, "executors": sorted(self._handlers),
               "concurrency": self.concurrency, "active": self._active()}
        if self.labels:
            doc["labels"] = self.labels
        # The orchestrator of the last registration first, while it answers.
        last_at = getattr(self, "_registered_at", None)
        order = [base] if base else ([last_at] if last_at else []) + [u for u in self.orchestrators if u != last_at]
        last = "no orchestrator answered"
        for u in order:
            try:
                r = self._post(u, PATH_REGISTER, doc)
            except OSError as e:
                last = "%s: %s" % (u, e)
                continue
            if r.status == 200:
                self._registered_at = u
                return _parse_duration(r.body.get("ttl"), 6.0)
            if r.status in (400, 401, 403, 409):
                raise WorkerError("register with %s: %d %s" % (u, r.status, r.error()))
            last = "%s: %d %s" % (u, r.status, r.error())
        if first:
            raise WorkerError("register: " + last)
        self.log.warning("register: %s", last)
        return None

    def _refresh(self, ttl):
        while not self._drained.wait(max(ttl / 3.0, 0.5)):
            try:
                got = self._register(base=None)
            except WorkerError as e:
                self._fail(str(e))
                return
            if got:
                ttl = got

    def _end_polls(self):
        """Asks every orchestrator to answer this worker's waiting polls at
        once, with what they hold for it, so that stopping takes no poll
        wait; the pollers still read the replies (and run what they hand
        out). An orchestrator of an earlier version answers 404: its poll
        then ends with its wait."""
        timeout = min(2.0, self.request_timeout)

        def end(u):
            try:
                self._post(u, PATH_END_POLLS, {"worker": self.worker_id}, timeout=timeout)
            except (OSError, http.client.HTTPException, ValueError) as e:
                self.log.debug("end polls %s: %s", u, e)

        # All at once, within one bound: an orchestrator that does not
        # answer costs the stop its timeout once, not once each.
        enders = [threading.Thread(target=end, args=(u,), name="end polls " + u, daemon=True) for u in self.orchestrators]
        for t in enders:
            t.start()
        deadline = time.monotonic() + timeout + 1
        for t in enders:
            t.join(max(0.0, deadline - time.monotonic()))

    def _deregister(self):
        for u in self.orchestrators:
            try:
                r = self._post(u, PATH_DEREGISTER, {"worker": self.worker_id})
                if r.status == 200:
                    return
            except OSError:
                continue

    def _active(self):
        """The attempts holding slots: running, or reporting without a
        report place."""
        with self._lock:
            return len(self._running) - self._reporting

    # -- polling and attempts ---------------------------------------------

    def _poll_loop(self, base):
        """Long-polls base until the worker stops. Each poll takes the slots
        it asks for first (_Slots) and gives back those its reply does not
        fill. With one orchestrator it asks for every free slot; with
        several, for a fair share at first, then one after an empty reply
        (an idle poll holds a single slot, leaving the rest to orchestrators
        with work) and twice what it got after a reply."""
        backoff = 0.1
        several = len(self.orchestrators) > 1
        want = max(1, self.concurrency // len(self.orchestrators)) if several else 100
        wait = self.poll_wait
        if len(self.orchestrators) > self.concurrency:
            wait = min(wait, SHORT_POLL_WAIT)
        while not self._stopping.is_set():
            n = self._slots.take(min(want, 100), self._stopping)
            if n == 0:
                return
            if self._stopping.is_set():
                # Stopped while taking the slots: a poll sent now would
                # race the end of polls, and could take new attempts.
                self._slots.put(n)
                return
            doc = {"worker": self.worker_id, "executors": sorted(self._handlers), "max": n,
                   "free": self.concurrency - self._active(), "wait": _duration(wait), "features": ["items"]}
            try:
                r = self._post(base, PATH_POLL, doc, timeout=wait + self.request_timeout)
                got = r.body.get("attempts") if r.status == 200 and isinstance(r.body, dict) else None
                if r.status == 200 and not (got is None or isinstance(got, list) and all(isinstance(g, dict) for g in got)):
                    raise ValueError("attempts: not a list of objects")
            except (OSError, http.client.HTTPException, ValueError) as e:
                # A reply cut short or malformed is a failed poll too: its
                # slots go back.
                self._slots.put(n)
                self.log.debug("poll %s: %s", base, e)
                self._stopping.wait(backoff)
                backoff = min(backoff * 2, 5.0)
                continue
            if r.status in (401, 403) or (r.status == 409 and "held by another credential" in r.error()):
                self._slots.put(n)
                self._fail("poll %s: %d %s" % (base, r.status, r.error()))
                return
            if r.status != 200:
                self._slots.put(n)
                self._stopping.wait(max(r.retry_after, backoff))
                backoff = min(backoff * 2, 5.0)
                continue
            backoff = 0.1
            got = got or []
            self._slots.put(n - min(len(got), n))
            for g in got[:n]:
                # Even one taken while stopping runs: failing it at once
                # would spend one of its run's attempts on nothing; the
                # drain gives it shutdown_timeout like the others.
                self._start(g, base)
            for g in got[n:]:
                # More than asked for (a protocol violation): holding them
                # would break the concurrency bound; they are reported
                # failed, so that they are retried.
                self.log.error("poll %s: %d attempts handed out for %d asked; reporting %s failed",
                               base, len(got), n, g.get("run_id"))
                threading.Thread(target=self._complete, name="refuse " + str(g.get("run_id")), daemon=True,
                                 args=(g, g.get("owner_addr") or base, False,
                                       "worker: more attempts handed out than the poll asked for", "", None)).start()
            if several:
                want = max(1, 2 * len(got))

    def _start(self, grant, base):
        """Runs grant's attempt in a thread of its own. The attempt holds
        one of the slots its poll took: it gives it back once its handler
        returned and its result has a report place, else once reported."""
        key = None
        try:
            run = Run(grant)
            key = (run.run_id, run.item_index, run.attempt)
            with self._lock:
                self._running[key] = run
            owner = grant.get("owner_addr") or base
            t = threading.Thread(target=self._execute, args=(grant, run, key, owner), name="attempt " + run.run_id, daemon=True)
            t.start()
        except Exception as e:  # a grant that does not decode, or no thread to run it
            # Not started: its slot goes back, and its owner hands the
            # attempt out again once its lease expires.
            if key is not None:
                with self._lock:
                    self._running.pop(key, None)
            self._slots.put(1)
            self.log.error("attempt of run %r not started: %s", grant.get("run_id") if isinstance(grant, dict) else grant, e)

    def _execute(self, grant, run, key, owner):
        """Runs the attempt (_attempt); whatever it raises, the attempt
        leaves _running and its slot goes back, once."""
        slot = _HeldSlot(self._slots)
        try:
            self._attempt(grant, run, key, owner, slot)
        finally:
            with self._lock:
                self._running.pop(key, None)
            slot.release()

    def _attempt(self, grant, run, key, owner, slot):
        holder = {"addr": owner}
        lease = _parse_duration(grant.get("lease"), 30.0)
        beat = threading.Thread(target=self._heartbeat, args=(grant, run, holder, lease), daemon=True)
        beat.start()
        pusher = None
        if self.output_push_interval >= 0:
            pusher = threading.Thread(target=self._push_output, args=(grant, run, holder), daemon=True)
            pusher.start()
        fn = self._handlers.get((grant.get("executor") or {}).get("type"))
        success, err, result = False, "", None
        # The run's timeout: the handler is asked to stop (run.cancelled),
        # and an attempt that outlives it fails.
        timeout = _parse_duration(grant.get("timeout"), 0.0)
        timer = threading.Timer(timeout, run.cancelled.set) if timeout > 0 else None
        if timer:
            timer.daemon = True
            timer.start()
        began = time.monotonic()
        try:
            if fn is None:
                raise RuntimeError("no handler for executor type %r" % (grant.get("executor") or {}).get("type"))
            result = fn(run)
            success = True
        except Exception as e:  # the handler's failure is the attempt's
            err = "%s: %s" % (type(e).__name__, e) if str(e) else type(e).__name__
        finally:
            if timer:
                timer.cancel()
        if timeout > 0 and time.monotonic() - began >= timeout:
            success, err = False, "timed out after %s" % _duration(timeout)
        elif run.cancelled.is_set() and self._stopping.is_set():
            success, err = False, "worker shutting down"
        res = None
        if success and result is not None:
            try:
                text = json.dumps(result, separators=(",", ":"), allow_nan=False, ensure_ascii=False)
                res = json.loads(text)
                if len(text.encode("utf-8")) > MAX_RESULT_BYTES:
                    success, err, res = False, "result: longer than %d bytes of JSON" % MAX_RESULT_BYTES, None
            except (TypeError, ValueError, RecursionError) as e:  # UnicodeEncodeError is a ValueError; RecursionError: nested too deep
                success, err, res = False, "result: not JSON: %s" % e, None
        run.cancelled.set()  # stops the heartbeat
        run._ended.set()
        run._live_wake.set()
        if pusher:
            pusher.join(self.request_timeout)  # its last push goes before the report
        # The handler has returned: its slot serves the next attempt while
        # the result is on its way, if a report place is free.
        with self._lock:
            placed = self._reporting < self.concurrency
            if placed:
                self._reporting += 1
        if placed:
            slot.release()
        try:
            self._complete(grant, holder["addr"], success, err, run._output(), res)
        finally:
            with self._lock:
                if placed:
                    self._reporting -= 1
                self._running.pop(key, None)

    def _ids(self, grant):
        doc = {"worker": self.worker_id, "run_id": grant["run_id"], "attempt": grant["attempt"]}
        if grant.get("item"):
            doc["item"] = grant["item"]["index"]
        return doc

    def _send(self, holder_or_addr, path, doc):
        """Posts doc to the attempt's owner, following 421 to a new one.
        Returns the reply, or None when no orchestrator answered."""
        holder = holder_or_addr if isinstance(holder_or_addr, dict) else {"addr": holder_or_addr}
        for _ in range(_MAX_REDIRECTS + 1):
            try:
                r = self._post(holder["addr"], path, doc)
            except OSError as e:
                self.log.debug("%s to %s: %s", path, holder["addr"], e)
                return None
            if r.status == 421 and r.body.get("owner_addr"):
                holder["addr"] = r.body["owner_addr"]
                continue
            return r
        return None

    def _push_output(self, grant, run, holder):
        """Pushes what the attempt logs to its owner while it runs, and
        once more when it ends, until the owner holds no more of it
        (held false), refuses it, or does not know the route (an older
        orchestrator). Bytes of a push that fails are not sent again:
        readers count them as skipped; the report carries the output."""
        doc = self._ids(grant)
        while True:
            run._live_wake.wait(self.output_push_interval)
            run._live_wake.clear()
            ended = run._ended.is_set()
            offset, data = run._take_live()
            if data:
                r = self._send(holder, PATH_OUTPUT, dict(doc, offset=offset, data=data))
                if r is not None and (r.status in (400, 403, 404, 409) or (r.status == 200 and not r.body.get("held", True))):
                    if r.status != 200:
                        self.log.debug("live output of %s %d refused: %d %s", run.run_id, run.attempt, r.status, r.error())
                    return
            if ended:
                return

    def _heartbeat(self, grant, run, holder, lease):
        doc = self._ids(grant)
        interval = max(lease / 3.0, 0.2)
        while not run.cancelled.wait(interval):
            r = self._send(holder, PATH_HEARTBEAT, doc)
            if r is None:
                interval = 0.5
                continue
            if r.status == 409:
                self.log.warning("attempt %s %d is stale; stopping it", run.run_id, run.attempt)
                run.cancelled.set()
                return
            if r.status == 200:
                if r.body.get("cancel"):
                    self.log.info("orchestrator cancelled attempt %s %d", run.run_id, run.attempt)
                    run.cancelled.set()
                    return
                lease = _parse_duration(r.body.get("lease"), lease)
                interval = max(lease / 3.0, 0.2)

    def _complete(self, grant, addr, success, err, output, result):
        doc = self._ids(grant)
        doc["success"] = bool(success)
        if err:
            doc["error"] = _safe_text(err, MAX_ERROR_BYTES)
        if output:
            doc["output"] = output
        if result is not None:
            doc["result"] = result
        holder = {"addr": addr}
        for attempt in range(10):
            r = self._send(holder, PATH_COMPLETE, doc)
            if r is not None and r.status == 200:
                self.log.info("attempt %s %d reported: %s", grant["run_id"], grant["attempt"], r.body.get("status"))
                return
            if r is not None and r.status == 400 and (doc.get("success") or "result" in doc):
                # The report itself was refused (its result, say): report
                # the attempt failed with why, rather than leave it to
                # its run lease.
                self.log.warning("completion of %s %d refused: %s; reporting it failed", grant["run_id"], grant["attempt"], r.error())
                doc.pop("result", None)
                doc["success"] = False
                doc["error"] = _safe_text("the orchestrator refused the attempt's report: " + r.error(), MAX_ERROR_BYTES)
                continue
            if r is not None and r.status in (400, 403, 409):
                self.log.warning("completion of %s %d refused: %d %s", grant["run_id"], grant["attempt"], r.status, r.error())
                return
            time.sleep(min(0.1 * 2 ** attempt, 2.0))
            if r is None:
                # The owner does not answer: another member may own the
                # partition now and redirect.
                holder["addr"] = self.orchestrators[attempt % len(self.orchestrators)]
        self.log.error("completion of %s %d not delivered; the run lease decides", grant["run_id"], grant["attempt"])


def _decode(b):
    try:
        return json.loads(b.decode("utf-8")) if b else {}
    except ValueError:
        return {"error": b.decode("utf-8", "replace")[:200]}


def main():
    """Command line: python -m jobfleet_worker MODULE:WORKER runs a Worker
    object defined in an importable module (its handlers registered),
    stopping gracefully on SIGTERM or SIGINT."""
    import importlib
    import sys
    if len(sys.argv) != 2 or ":" not in sys.argv[1]:
        print("usage: python -m jobfleet_worker MODULE:WORKER", file=sys.stderr)
        return 2
    mod, _, attr = sys.argv[1].partition(":")
    w = getattr(importlib.import_module(mod), attr)
    logging.basicConfig(level=os.environ.get("JOBFLEET_LOG_LEVEL", "INFO"))
    w.install_signal_handlers()
    try:
        w.run()
    except WorkerError as e:
        print("jobfleet worker: %s" % e, file=sys.stderr)
        return 1
    return 0
