"""Verification: replay a model's recipe in a worker process and compare it with the recording.

Reports and the latest report are kept through the app's cache (services/cache.py), the jobs that make them
in the shared state (services/state.py), so that any process of the app can answer a poll. A job names the
process that runs it (its owner) and carries a heartbeat that the owner refreshes while it runs; a job whose
heartbeat stops ended with its process and is reported as an error, so that a poller never waits on a dead
job.
"""

import os
import socket
import threading
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import UTC, datetime

from flask import Flask, current_app, url_for

from ..compute.pool import RecipeCall, RecipeError, decoded
from ..domain.catalog import Model
from ..domain.checkpoints import CheckpointUnavailable
from ..domain.compare import compare_replay, tolerance_for
from ..domain.lru import SizedLRU
from ..domain.shapes import Job, Report
from . import budget, runs
from .cache import cache, raw
from .checkpoints import context, find
from .extensions import state
from .parts import parts

KEEP_JOB_SECONDS = 3600  # how long a finished job can still be polled
# A cached report read from the shared store is kept this long in the process that read it: its key names
# its content, so a copy cannot be wrong, and hot reports then cost no round trip to Redis or SQLite.
NEAR_SECONDS = 2.0
NEAR_BYTES = 2 * 2**20


def cache_key(model: Model) -> str:
    """A report holds for exactly what it checked: the recording's bytes, the recipe files, torch, the
    seed and the tolerance."""
    tol = tolerance_for(model.manifest)
    return f"verification:{runs.run_key(model)}:rtol-{tol.rtol!r}:atol-{tol.atol!r}"


def _latest_key(model: Model) -> str:
    return "latest-" + cache_key(model)


def _job_key(job_id: str) -> str:
    return f"verification-job:{job_id}"


def _running_key(key: str) -> str:
    return f"verification-running:{key}"


def _recipe_summary(model: Model) -> dict:
    recorded = model.manifest["provenance"].get("sourceSha256")
    served = model.files["model.py"].sha256
    return {
        "model_py_sha256": served,
        "run_py_sha256": model.files["run.py"].sha256,
        "recorded_source_sha256": recorded,
        "matches_recorded_source": served == recorded,
        "note": (
            "The recipe that ran is the model.py served with this model. "
            + ("It is byte-identical to the recorded capture source."
               if served == recorded else
               "The recording was captured from a different model.py (see recorded_source_sha256); "
               "the values below show whether this recipe reproduces it.")
        ),
    }


def _checkpoint_summary(model: Model) -> dict:
    """The checkpoint files the replay read, beside those the recording was made from."""
    used = find(model.checkpoint).sha256
    recorded = (model.manifest["provenance"].get("checkpoint") or {}).get("files")
    note = ("The replay read the checkpoint files the recording was made from." if used == recorded else
            "The recording was made without a checkpoint: it holds no case to compare." if recorded is None else
            "The replay read other checkpoint files than the recording was made from: the values below show "
            "whether this checkpoint reproduces it.")
    return {"used": used, "recorded": recorded, "matches_recording": used == recorded, "note": note}


def verify(model: Model) -> Report:
    """Re-execute the recipe and compare every recorded value; always returns a report."""
    started_at = rfc3339(time.time())
    clock = time.perf_counter()
    report: dict = {"model": model.slug, "revision": model.revision, "manifest_sha256": model.etag,
                    "started_at": started_at, "recipe": _recipe_summary(model)}
    try:
        reply = decoded(runs.run(RecipeCall.replay(model.recipe_dir, context(model.checkpoint))))
    except CheckpointUnavailable as exc:
        report |= {"status": "error", "message": exc.description}
    except RecipeError as exc:
        report |= {"status": "error", "message": str(exc)}
    else:
        report |= compare_replay(model.manifest, reply["result"])
        report |= {"environment": reply["environment"], "compute_seconds": reply["compute_seconds"]}
    if model.checkpoint is not None and report["status"] != "error":
        report["checkpoint"] = _checkpoint_summary(model)
    report["duration_seconds"] = time.perf_counter() - clock
    return report


def rfc3339(seconds: float | None) -> str | None:
    """A time of the epoch as the API writes every time: RFC 3339 in UTC, to the millisecond."""
    return None if seconds is None else datetime.fromtimestamp(seconds, UTC).isoformat(timespec="milliseconds")


def public(job: dict) -> Job:
    """A job as a client sees it: its times in RFC 3339, elapsed seconds as of now (or of the finish), and not
    what only the server needs (the host and process that own it, its cache key)."""
    end = job["finished"] or time.time()
    return {"id": job["id"], "model": job["model"], "state": job["state"], "location": job["location"],
            "created_at": rfc3339(job["created"]), "started_at": rfc3339(job.get("started")),
            "finished_at": rfc3339(job["finished"]), "heartbeat_at": rfc3339(job["heartbeat"]),
            "elapsed_seconds": round(end - job["created"], 3), "report": job["report"]}


def owner_name() -> str:
    return f"{socket.gethostname()}:{os.getpid()}"


@dataclass
class LocalJobs:
    """The verification jobs this process runs, and the reports it read lately."""

    running: dict = field(default_factory=dict)  # job id -> (job record, threading.Event)
    lock: threading.Lock = field(default_factory=threading.Lock)
    executor: ThreadPoolExecutor = field(
        default_factory=lambda: ThreadPoolExecutor(max_workers=4, thread_name_prefix="verify"))
    heartbeat: threading.Thread | None = None
    near: SizedLRU = field(default_factory=lambda: SizedLRU(NEAR_BYTES))  # key -> (monotonic expiry, JSON bytes)


class Verifications:
    """Flask extension: background verification jobs with cached reports, in the shared state."""

    def init_app(self, app: Flask) -> None:
        parts(app).jobs = LocalJobs()

    @property
    def _local(self) -> LocalJobs:
        return parts().jobs

    def cached(self, model: Model) -> bytes | None:
        """A finished report for exactly this recording, recipe, torch and tolerance, if one is cached: its
        JSON bytes, served as they are kept."""
        key = cache_key(model)
        near = self._local.near
        kept = near.get(key)
        if kept is not None and kept[0] > time.monotonic():
            return kept[1]
        found = raw(key)
        if found is not None:
            near.put(key, (time.monotonic() + NEAR_SECONDS, found), len(found))
        return found

    def latest(self, model: Model) -> dict | None:
        return cache.get(_latest_key(model))

    def job(self, job_id: str) -> dict | None:
        """A job's state, whichever process runs it; a job whose owner stopped ends here as an error."""
        record = state.store.get(_job_key(job_id), strict=True)  # a store down is a 503, not "no such job"
        if record is None:
            return None
        stale = float(current_app.config["JOB_STALE_SECONDS"])
        if record["state"] != "done" and time.time() - record["heartbeat"] > stale:
            record = self._finish(record, {
                "model": record["model"], "status": "error", "cached": False,
                "message": f"the server process running this verification stopped before it finished (no heartbeat "
                           f"for {stale:g} s); start a new verification"})
            if state.store.get(_running_key(record["key"])) == job_id:
                state.store.delete(_running_key(record["key"]))  # the next request starts afresh
        return record

    def wait(self, job_id: str, seconds: float) -> dict | None:
        """The job's report if it is done within `seconds` (waiting only on jobs this process runs)."""
        local = self._local.running.get(job_id)
        if local is not None:
            return local[0]["report"] if local[1].wait(timeout=seconds) else None
        record = self.job(job_id)
        return record["report"] if record is not None and record["state"] == "done" else None

    def _running(self, key: str) -> dict | None:
        """The job that runs this verification now, in any process, if there is one."""
        job_id = state.store.get(_running_key(key))
        found = self.job(job_id) if job_id is not None else None
        return found if found is not None and found["state"] != "done" else None

    def start(self, model: Model) -> dict:
        """The job already running this exact verification (in any process), or a new one."""
        key = cache_key(model)
        found = self._running(key)
        if found is not None:
            return found
        budget.spend()  # only a verification that starts counts against its client's budget
        ticket = runs.admit()  # PoolBusy when the queue is full: nothing is started
        now = time.time()
        job_id = uuid.uuid4().hex
        record = {"id": job_id, "model": model.slug, "key": key, "state": "queued", "created": now,
                  "finished": None, "owner": owner_name(), "heartbeat": now,
                  "location": url_for("api.verification_job", slug=model.slug, job_id=job_id), "report": None}
        timeout = float(current_app.config["RECIPE_TIMEOUT"])
        # A job the shared store cannot hold (Redis down) is not promised to a poller: its request waits for the
        # report instead (api.verify).
        record["recorded"] = state.store.set(_job_key(job_id), record, KEEP_JOB_SECONDS)
        if record["recorded"] and not state.store.add(_running_key(key), job_id, ttl=2 * timeout + 60):
            winner = self._running(key)
            if winner is not None:  # another process started the same verification a moment ago
                ticket.release()
                state.store.delete(_job_key(job_id))
                return winner
        local = self._local
        with local.lock:
            local.running[job_id] = (record, threading.Event())
            self._ensure_heartbeat(current_app._get_current_object())
        local.executor.submit(self._run, current_app._get_current_object(), model, key, record, ticket)
        return record

    def _ensure_heartbeat(self, app: Flask) -> None:
        """One thread per process refreshes the heartbeat of every job it runs."""
        local = self._local
        if local.heartbeat is not None and local.heartbeat.is_alive():
            return

        def beat() -> None:
            every = float(app.config["JOB_HEARTBEAT_SECONDS"])
            with app.app_context():
                while True:
                    time.sleep(every)
                    # Under the lock a job's end is written under too, so that no beat writes a job's running
                    # state after its end (a poll would then see it running until it went stale).
                    with local.lock:
                        for record, done in local.running.values():
                            if not done.is_set():
                                record["heartbeat"] = time.time()
                                state.store.set(_job_key(record["id"]), record, KEEP_JOB_SECONDS)

        local.heartbeat = threading.Thread(target=beat, name="verify-heartbeat", daemon=True)
        local.heartbeat.start()

    def _finish(self, record: dict, report: dict) -> dict:
        record = record | {"state": "done", "finished": time.time(), "report": report, "heartbeat": time.time()}
        state.store.set(_job_key(record["id"]), record, KEEP_JOB_SECONDS)
        return record

    def _run(self, app: Flask, model: Model, key: str, record: dict, ticket: runs.Ticket) -> None:
        with app.app_context():
            record["state"] = "running"
            record["started"] = record["heartbeat"] = time.time()
            state.store.set(_job_key(record["id"]), record, KEEP_JOB_SECONDS)
            try:
                report = verify(model)
            except Exception as exc:  # never leave a poller waiting on a job that died
                app.logger.exception("verification of %s failed unexpectedly", model.slug)
                report = {"model": model.slug, "status": "error", "message": f"internal error: {exc}"}
            finally:
                ticket.release()
            report["cached"] = False
            seconds = int(app.config["CACHE_SECONDS"])
            if report["status"] != "error":  # a timeout or crash may pass on a retry; never cache it
                cache.set(key, report | {"cached": True}, timeout=seconds)
            cache.set(_latest_key(model), report, timeout=seconds)
            local = parts(app).jobs
            with local.lock:  # the heartbeat's lock: the job's end is its last write
                record.update(self._finish(record, report))
                _, done = local.running.pop(record["id"])
            state.store.delete(_running_key(key))
            done.set()


verifications = Verifications()
