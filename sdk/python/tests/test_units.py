"""Unit tests of the Python worker's pure parts; run by the Go test
internal/testkit/pyworker (python3 -m unittest discover)."""

import re
import http.client
import sys
import threading
import time
import unittest

import jobfleet_worker as jw


class DurationTest(unittest.TestCase):
    def test_parse(self):
        for text, want in [("30s", 30.0), ("1m0s", 60.0), ("500ms", 0.5), ("1h2m3.5s", 3723.5), ("250us", 0.00025)]:
            self.assertAlmostEqual(jw._parse_duration(text, -1), want, msg=text)

    def test_bad_is_default(self):
        for text in ["", "30", "s", "1x", None, 5, "1.2.3s"]:
            self.assertEqual(jw._parse_duration(text, -1), -1, msg=repr(text))

    def test_format(self):
        self.assertEqual(jw._duration(25.0), "25s")
        self.assertEqual(jw._duration(1.5), "1.5s")


class SafeTextTest(unittest.TestCase):
    def test_controls_escaped(self):
        self.assertEqual(jw._safe_text("a\x1b[31mb\tc\n\x7f\u009b", 100), "a\\x1b[31mb\tc\n\\x7f\\u009b")

    def test_cut_keeps_utf8(self):
        out = jw._safe_text("é" * 10, 5)
        self.assertLessEqual(len(out.encode()), 5)
        self.assertEqual(out, "éé")


class OutputTest(unittest.TestCase):
    def run_of(self):
        return jw.Run({"job_id": "j", "run_id": "j@1", "attempt": 1})

    def test_short_output_whole(self):
        r = self.run_of()
        r.log("a", 1)
        r.log("b")
        self.assertEqual(r._output(), "a 1\nb\n")

    def test_long_output_keeps_head_and_tail(self):
        r = self.run_of()
        for i in range(20000):
            r.log("line %05d" % i)
        out = r._output()
        self.assertLessEqual(len(out.encode()), jw.MAX_OUTPUT_BYTES)
        self.assertTrue(out.startswith("line 00000\n"))
        self.assertTrue(out.endswith("line 19999\n"))
        self.assertIn("bytes cut", out)

    def test_cut_keeps_the_tail_of_output_with_control_characters(self):
        # Escapes make the stored text longer than the logged text: the
        # head and tail are measured as stored, so the marker and the end
        # are kept.
        r = self.run_of()
        line = "line \x01\x02\x03\x04\x05\x06\x07\x08 \u0085\u0085\u0085\u0085 é"
        for _ in range(3000):
            r.log(line)
        r.log("THE END")
        out = r._output()
        self.assertLessEqual(len(out.encode()), jw.MAX_OUTPUT_BYTES)
        self.assertTrue(out.endswith("THE END\n"), out[-40:])
        self.assertTrue(out.startswith("line \\x01\\x02"), out[:40])
        m = re.search(r"\n\[\.\.\. (\d+) bytes cut \.\.\.\]\n", out)
        self.assertIsNotNone(m)
        stored = 3000 * len((jw._escape(line) + "\n").encode()) + len("THE END\n")
        head, tail = out[:m.start()], out[m.end():]
        self.assertEqual(int(m.group(1)), stored - len(head.encode()) - len(tail.encode()))

    def test_cut_counts_bytes_as_the_go_worker_does(self):
        r = self.run_of()
        line = "é" * 1000  # 1 000 characters, 2 000 bytes
        for _ in range(100):
            r.log(line)
        out = r._output()
        self.assertLessEqual(len(out.encode()), jw.MAX_OUTPUT_BYTES)
        m = re.search(r"\n\[\.\.\. (\d+) bytes cut \.\.\.\]\n", out)
        self.assertIsNotNone(m, out[:200])
        head, tail = out[:m.start()], out[m.end():]
        logged = 100 * (len(line.encode()) + 1)
        self.assertEqual(int(m.group(1)), logged - len(head.encode()) - len(tail.encode()))


class ConfigTest(unittest.TestCase):
    def test_refused(self):
        for kwargs in [dict(orchestrators=[]), dict(orchestrators=["ftp://x"]), dict(token=""),
                       dict(worker_id=""), dict(concurrency=0), dict(poll_wait=31)]:
            args = dict(orchestrators=["http://127.0.0.1:1"], token="t", worker_id="w")
            args.update(kwargs)
            with self.assertRaises(jw.WorkerError, msg=repr(kwargs)):
                jw.Worker(**args)

    def test_builtin_names_refused(self):
        w = jw.Worker(["http://127.0.0.1:1"], token="t", worker_id="w")
        for name in ["http", "shell", ""]:
            with self.assertRaises(jw.WorkerError):
                w.handle(name, lambda run: None)


class PollSlotsTest(unittest.TestCase):
    """Poll loops of several orchestrators share the worker's slots: with
    one slot and two orchestrators that always have work, the worker never
    holds two attempts, and both orchestrators' attempts run (short polls:
    the loops take turns)."""

    def test_loops_share_the_slots(self):
        w = jw.Worker(["http://a.invalid", "http://b.invalid"], "t", "w1", concurrency=1, output_push_interval=-1)
        lock = threading.Lock()
        state = {"held": 0, "most": 0, "ran": [], "n": 0, "max": []}
        done = threading.Event()

        def handler(run):
            with lock:
                state["held"] += 1
                state["most"] = max(state["most"], state["held"])
                state["ran"].append(run.run_id)
            time.sleep(0.02)
            with lock:
                state["held"] -= 1

        w.handle("ok", handler)
        w._complete = lambda *args: None

        def post(base, path, doc, timeout=None):
            if path != jw.PATH_POLL:
                return jw._Reply(200, {})
            with lock:
                state["max"].append(doc["max"])
                state["n"] += 1
                n = state["n"]
                enough = len({r.split("-")[0] for r in state["ran"]}) == 2 and len(state["ran"]) >= 6
            if enough:
                done.set()
                w._stopping.wait(0.05)
                return jw._Reply(200, {"attempts": []})
            w._stopping.wait(0.05)  # the poll is held a moment: the other loop polls meanwhile
            grant = {"job_id": "j", "run_id": "%s-%d" % (base[7], n), "attempt": 1,
                     "executor": {"type": "ok"}, "lease": "30s"}
            return jw._Reply(200, {"attempts": [grant]})

        w._post = post
        loops = [threading.Thread(target=w._poll_loop, args=(u,), daemon=True) for u in w.orchestrators]
        for t in loops:
            t.start()
        self.assertTrue(done.wait(10), "both orchestrators' attempts did not run: %r" % state["ran"])
        w._stopping.set()
        for t in loops:
            t.join(5)
        self.assertEqual(state["most"], 1, "attempts running at once")
        self.assertEqual(max(state["max"]), 1, "a poll asked for more than the one slot")


class PollFailureSlotsTest(unittest.TestCase):
    """A poll whose reply is cut short or malformed, a grant that does not
    decode and a handler that escapes every except give their slots back:
    with one slot, the worker goes on running attempts."""

    def test_failures_give_slots_back(self):
        w = jw.Worker(["http://a.invalid", "http://b.invalid"], "t", "w1", concurrency=1, output_push_interval=-1)
        w._complete = lambda *args: None
        ran = []
        w.handle("ok", lambda run: ran.append(run.run_id))
        w.handle("exit", lambda run: sys.exit(3))  # a BaseException: the attempt's thread ends with it
        lock = threading.Lock()
        polls = {"n": 0}

        def post(base, path, doc, timeout=None):
            with lock:
                polls["n"] += 1
                n = polls["n"]
            w._stopping.wait(0.01)
            if base == "http://a.invalid":
                bad = [http.client.IncompleteRead(b"{"), jw._Reply(200, ["not", "a", "dict"]),
                       jw._Reply(200, {"attempts": "nope"}), jw._Reply(200, {"attempts": [{"no": "run id"}]}),
                       jw._Reply(200, {"attempts": [{"job_id": "j", "run_id": "x-%d" % n, "attempt": 1,
                                                     "executor": {"type": "exit"}, "lease": "30s"}]})]
                r = bad[min(n // 2, len(bad) - 1)] if n < 12 else jw._Reply(200, {"attempts": []})
                if isinstance(r, Exception):
                    raise r
                return r
            return jw._Reply(200, {"attempts": [{"job_id": "j", "run_id": "b-%d" % n, "attempt": 1,
                                                 "executor": {"type": "ok"}, "lease": "30s"}]})

        w._post = post
        loops = [threading.Thread(target=w._poll_loop, args=(u,), daemon=True) for u in w.orchestrators]
        for t in loops:
            t.start()
        wait_until(lambda: polls["n"] > 14 and len(ran) >= 5)
        w._stopping.set()
        for t in loops:
            t.join(5)
        wait_until(lambda: not w._running)
        self.assertEqual(w._slots.take(5, threading.Event()), 1)  # the one slot is back, and no more


if __name__ == "__main__":
    unittest.main()


class LiveOutputTest(unittest.TestCase):
    def run_of(self):
        return jw.Run({"job_id": "j", "run_id": "j@1", "attempt": 1})

    def test_taken_once_with_offsets(self):
        r = self.run_of()
        r.log("é")
        r.log("b")
        self.assertEqual(r._take_live(), (0, "é\nb\n"))
        self.assertEqual(r._take_live(), (5, ""))
        r.log("c\x1b")
        self.assertEqual(r._take_live(), (5, "c\\x1b\n"))

    def test_bounded_skips_oldest(self):
        r = self.run_of()
        line = "x" * 1023
        for _ in range(100):
            r.log(line)
        offset, text = r._take_live()
        self.assertLessEqual(len(text.encode()), jw.MAX_PUSH_BYTES)
        self.assertEqual(offset + len(text), 100 * 1024)
        self.assertEqual(offset % 1024, 0)  # whole lines skipped

    def test_wakes_early_when_much_waits(self):
        r = self.run_of()
        r.log("small")
        self.assertFalse(r._live_wake.is_set())
        r.log("y" * jw.PUSH_SOON_BYTES)
        self.assertTrue(r._live_wake.is_set())


class HostileTextTest(unittest.TestCase):
    def run_of(self):
        return jw.Run({"job_id": "j", "run_id": "j@1", "attempt": 1})

    def test_lone_surrogate_logged(self):
        r = self.run_of()
        r.log("name", "caf\udce9", "\ud800")  # os.fsdecode's, and a lone one
        out = r._output()
        out.encode("utf-8")  # valid UTF-8
        self.assertIn("\ufffd", out)
        _, live = r._take_live()
        live.encode("utf-8")

    def test_long_line_counted_and_live_line_ends(self):
        r = self.run_of()
        r.log("START")
        r.log("a" * (1 << 20))
        _, live = r._take_live()
        self.assertTrue(live.endswith("a\n"))  # cut, its newline kept
        self.assertLessEqual(len(live.encode()), jw.MAX_PUSH_BYTES)
        r.log("END")
        out = r._output()
        self.assertTrue(out.startswith("START\n"), out[:20])
        self.assertTrue(out.endswith("END\n"))
        left = int(out.split("[... ")[1].split(" bytes cut")[0])
        self.assertGreater(left, (1 << 20) - jw.MAX_OUTPUT_BYTES)
        _, live = r._take_live()
        self.assertEqual(live, "END\n")


def wait_until(cond, timeout=10.0):
    deadline = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > deadline:
            raise AssertionError("condition not met within %ss" % timeout)
        time.sleep(0.01)


class SlotTest(unittest.TestCase):
    """A slot serves the next attempt while a result is reported, as far
    as there are report places (as many as slots)."""

    def test_slot_serves_next_attempt_while_reporting(self):
        w = jw.Worker(["http://127.0.0.1:9"], "t", "w1", concurrency=1, output_push_interval=-1)
        w.handle("ok", lambda run: None)
        release = {"j@1": threading.Event(), "j@2": threading.Event()}
        reporting = []

        def complete(grant, addr, success, err, output, result):
            reporting.append(grant["run_id"])
            release[grant["run_id"]].wait(10)

        w._complete = complete

        def grant(n):
            return {"job_id": "j", "run_id": "j@%d" % n, "attempt": 1, "executor": {"type": "ok"}, "lease": "30s"}

        stop = threading.Event()
        self.assertEqual(w._slots.take(1, stop), 1)  # as a poll does
        w._start(grant(1), "http://127.0.0.1:9")
        wait_until(lambda: reporting == ["j@1"])
        self.assertEqual(w._active(), 0)  # reporting in a report place
        self.assertEqual(w._slots.take(1, stop), 1)  # its slot was given back
        w._start(grant(2), "http://127.0.0.1:9")
        wait_until(lambda: len(reporting) == 2)
        self.assertEqual(w._active(), 1)  # no report place left: it keeps its slot
        release["j@1"].set()
        wait_until(lambda: len(w._running) == 1)
        self.assertEqual(w._active(), 1)
        release["j@2"].set()
        wait_until(lambda: not w._running)
        self.assertEqual(w._active(), 0)
        self.assertEqual(w._slots.take(5, stop), 1)  # every slot back, and no more


class SlotsTest(unittest.TestCase):
    """A poll takes its slots first; takes are bounded by the free slots
    and served first come, first served."""

    def test_takes_are_bounded_and_served_in_turn(self):
        s = jw._Slots(2)
        stop = threading.Event()
        self.assertEqual(s.take(5, stop), 2)
        got = []

        def taker(name):
            got.append((name, s.take(3, stop)))

        first = threading.Thread(target=taker, args=("first",))
        first.start()
        wait_until(lambda: len(s._queue) == 1)
        second = threading.Thread(target=taker, args=("second",))
        second.start()
        wait_until(lambda: len(s._queue) == 2)
        s.put(1)
        wait_until(lambda: len(got) == 1)
        self.assertEqual(got, [("first", 1)])  # the one waiting longest, and only what is free
        s.put(2)
        wait_until(lambda: len(got) == 2)
        self.assertEqual(got[1], ("second", 2))
        stop.set()
        self.assertEqual(s.take(1, stop), 0)  # none free: a stopping take gives up
        first.join(5)
        second.join(5)
