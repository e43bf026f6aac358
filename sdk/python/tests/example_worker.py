"""The worker the Go test internal/testkit/pyworker runs against a real
fleet: the handlers py-echo, py-flaky, py-slow, py-chatty, py-steady and py-nan. Its settings come from
the environment: JOBFLEET_ORCHESTRATORS (comma-separated URLs),
JOBFLEET_TOKEN, JOBFLEET_WORKER_ID, MARKER_DIR (py-slow writes a file
named after its run there when it starts)."""

import os
import time

from jobfleet_worker import Worker

worker = Worker(
    os.environ["JOBFLEET_ORCHESTRATORS"].split(","),
    token=os.environ["JOBFLEET_TOKEN"],
    worker_id=os.environ["JOBFLEET_WORKER_ID"],
    concurrency=4,
    labels={"lang": "python"},
    poll_wait=1.0,
    shutdown_timeout=float(os.environ.get("SHUTDOWN_TIMEOUT", "1")),
)


@worker.handler("py-echo")
def echo(run):
    run.log("echo", run.job_id, "attempt", run.attempt)
    return {"echo": run.payload, "step": run.step, "needs": run.needs}


@worker.handler("py-flaky")
def flaky(run):
    if run.attempt == 1:
        raise RuntimeError("first attempts fail")
    run.log("succeeded at attempt", run.attempt)


@worker.handler("py-slow")
def slow(run):
    with open(os.path.join(os.environ["MARKER_DIR"], run.job_id.replace("/", "_")), "w") as f:
        f.write(run.run_id)
    while not run.cancelled.wait(0.05):
        pass
    run.log("stopped when asked")
    time.sleep(0.1)


@worker.handler("py-chatty")
def chatty(run):
    """Logs a numbered line every 50 ms until asked to stop: the test
    follows its live output while it runs, then cancels the run."""
    n = 0
    while not run.cancelled.wait(0.05):
        n += 1
        run.log("line", n)


@worker.handler("py-steady")
def steady(run):
    """Works payload["seconds"] seconds whatever happens (it does not look
    at run.cancelled), after writing its marker like py-slow."""
    with open(os.path.join(os.environ["MARKER_DIR"], run.job_id.replace("/", "_")), "w") as f:
        f.write(run.run_id)
    time.sleep(run.payload["seconds"])
    run.log("slept", run.payload["seconds"])


@worker.handler("py-nan")
def nan(run):
    """Returns a result that is not JSON (NaN): refused by the worker."""
    run.log("about to return NaN")
    return {"ratio": float("nan")}
