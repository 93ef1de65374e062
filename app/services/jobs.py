"""Background jobs that any process of the app can poll: verifications and retrainings.

A job's record lives in the shared state (services/state.py), so that any process answers a poll. A job names the
process that runs it (its owner) and carries a heartbeat that the owner refreshes while it runs, with whatever the
job made known meanwhile (a retraining's progress); a job whose heartbeat stops ended with its process and is
reported as an error, so that a poller never waits on a dead job. One job runs a given piece of work (its key) at a
time: a second request for it, in any process, joins the first.
"""

import hashlib
import hmac
import os
import secrets
import socket
import threading
import time
import uuid
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import UTC, datetime

from flask import Flask, current_app, url_for

from ..domain.catalog import Model
from .extensions import state
from .parts import parts
from .refusals import NotYours

KEEP_JOB_SECONDS = 3600  # how long a finished job can still be polled


def rfc3339(seconds: float | None) -> str | None:
    """A time of the epoch as the API writes every time: RFC 3339 in UTC, to the millisecond."""
    return None if seconds is None else datetime.fromtimestamp(seconds, UTC).isoformat(timespec="milliseconds")


def owner_name() -> str:
    return f"{socket.gethostname()}:{os.getpid()}"


@dataclass
class LocalJobs:
    """The jobs this process runs (of every kind) and the threads they run on."""

    # The job's store key (its kind's, so that a job answers under its own kind alone) -> (job record,
    # threading.Event, that key)
    running: dict = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)
    executors: dict[str, ThreadPoolExecutor] = field(default_factory=dict)  # by kind
    heartbeat: threading.Thread | None = None


class Jobs:
    """One kind of job (`kind`: "verification", "retraining"), polled at the API endpoint `endpoint`, run `threads`
    at a time in each process: started, joined, polled, made known as it runs (the fields `known` names), and ended
    with a report."""

    known: tuple[str, ...] = ()  # what a job of this kind tells its pollers as it runs (None until it does)
    queues_itself = False  # whether its work says when it starts running (it waits for a place first), or the thread

    def __init__(self, kind: str, endpoint: str, threads: int) -> None:
        self.kind = kind
        self.endpoint = endpoint
        self.threads = threads

    def init_app(self, app: Flask) -> None:
        local = parts(app).jobs
        if local is None:
            local = parts(app).jobs = LocalJobs()
        local.executors[self.kind] = ThreadPoolExecutor(max_workers=self.threads, thread_name_prefix=self.kind)

    @property
    def _local(self) -> LocalJobs:
        return parts().jobs

    def public(self, job: dict) -> dict:
        """A job as a client sees it: its times in RFC 3339, elapsed seconds as of now (or of the finish), what it
        made known as it ran, and not what only the server needs (the host and process that own it, its key)."""
        end = job["finished"] or time.time()
        return {"id": job["id"], "model": job["model"], "state": job["state"], "location": job["location"],
                "created_at": rfc3339(job["created"]), "started_at": rfc3339(job.get("started")),
                "finished_at": rfc3339(job["finished"]), "heartbeat_at": rfc3339(job["heartbeat"]),
                "elapsed_seconds": round(end - job["created"], 3), **{k: job.get(k) for k in self.known},
                "report": job["report"]}

    def job_key(self, job_id: str) -> str:
        return f"{self.kind}-job:{job_id}"

    def _running_key(self, key: str) -> str:
        return f"{self.kind}-running:{key}"

    def job(self, job_id: str) -> dict | None:
        """A job's state, whichever process runs it (this one's as it stands, the others' as their heartbeat last
        wrote it); a job whose owner stopped ends here as an error."""
        local = self._local.running.get(self.job_key(job_id))
        if local is not None:
            with self._local.lock:
                return dict(local[0])
        record = state.store.get(self.job_key(job_id), strict=True)  # a store down is a 503, not "no such job"
        if record is None:
            return None
        stale = current_app.config["JOB_STALE_SECONDS"]
        if record["state"] != "done" and time.time() - record["heartbeat"] > stale:
            record = self._finish(record, {
                "model": record["model"], "status": "error", "cached": False,
                "message": f"the server process running this {self.kind} stopped before it finished (no heartbeat "
                           f"for {stale:g} s); start a new {self.kind}"})
            state.store.delete_if(self._running_key(record["key"]), job_id)  # the next request starts afresh
        return record

    def wait(self, job_id: str, seconds: float) -> dict | None:
        """The job's report if it is done within `seconds` (waiting only on jobs this process runs)."""
        local = self._local.running.get(self.job_key(job_id))
        if local is not None:
            return local[0]["report"] if local[1].wait(timeout=seconds) else None
        record = self.job(job_id)
        return record["report"] if record is not None and record["state"] == "done" else None

    def running(self, key: str) -> dict | None:
        """The job that runs this work now, in any process, if there is one."""
        job_id = state.store.get(self._running_key(key))
        found = self.job(job_id) if job_id is not None else None
        return found if found is not None and found["state"] != "done" else None

    def start(self, model: Model, key: str, work: Callable[[dict], dict], *,
              admit: Callable[[str], Callable[[], None]], limit: float, finished: Callable[[dict], None],
              private: dict | None = None) -> dict:
        """The job already running the work `key` names (in any process), or a new one that runs `work(record)` for
        its report in a thread of this process. `admit(job id)` is asked first (it spends the client's budget,
        claims a place, and may refuse with an HTTP error) and answers what releases that place (and whatever else
        the job held), called once the job's end is recorded; `limit` is the most
        the work may take, in seconds; `finished(report)` keeps the report (caches it) before the job ends. `private`:
        what the server keeps on a new job's record and never shows a poller (a digest of its cancel token)."""
        found = self.running(key)
        if found is not None:
            return found
        job_id = uuid.uuid4().hex
        now = time.time()
        record = {"id": job_id, "model": model.slug, "key": key, "state": "queued", "created": now,
                  "finished": None, "owner": owner_name(), "heartbeat": now,
                  "location": url_for(self.endpoint, slug=model.slug, job_id=job_id), "report": None,
                  **dict.fromkeys(self.known), **(private or {})}
        # The record is written before the job is admitted: what admission claims names this record, and a claim
        # whose record is not there yet would be taken for a dead job's (a second start of the same client beside
        # the first). A job the shared store cannot hold (Redis down) is not promised to a poller: its request
        # waits for the report instead (the API's own choice).
        record["recorded"] = state.store.set(self.job_key(job_id), record, KEEP_JOB_SECONDS)
        try:
            release = admit(job_id)
        except BaseException:
            state.store.delete(self.job_key(job_id))
            raise
        if record["recorded"] and not state.store.add(self._running_key(key), job_id, ttl=2 * limit + 60):
            winner = self.running(key)
            if winner is not None:  # another process started the same work a moment ago
                release()
                state.store.delete(self.job_key(job_id))
                return winner
        local = self._local
        with local.lock:
            local.running[self.job_key(job_id)] = (record, threading.Event(), self.job_key(job_id))
            _ensure_heartbeat(current_app._get_current_object())
        local.executors[self.kind].submit(self._run, current_app._get_current_object(), model, work, record, release,
                                          finished)
        return record

    def start_owned(self, model: Model, key: str, work: Callable[[dict], dict], **start) -> tuple[dict, str | None]:
        """start(), for a job its starter may cancel: the job, and the token that cancels it for the client that
        started it (None for one that joins a job already running)."""
        token = secrets.token_urlsafe(24)
        job = Jobs.start(self, model, key, work, private={"cancel_sha256": _digest(token)}, **start)  # not a kind's own
        return job, token if job.get("cancel_sha256") == _digest(token) else None

    def _cancel_key(self, job_id: str) -> str:
        return f"{self.kind}-cancel:{job_id}"

    def cancelled(self, job_id: str) -> bool:
        """Whether the job's starter asked it to stop (in whichever process it was asked)."""
        return state.store.get(self._cancel_key(job_id)) is not None

    def cancel(self, job: dict, token: str | None) -> None:
        """Ask the job to stop, whichever process runs it: it ends as cancelled at its next look (within a second).
        Only its starter's token cancels it (NotYours, 403, otherwise)."""
        digest = job.get("cancel_sha256")
        if not token or not digest or not hmac.compare_digest(_digest(token), digest):
            raise NotYours(f"only the client that started this {self.kind} can cancel it: send the cancel_token its "
                           f"POST answered, as Authorization: Bearer <token>")
        state.store.set(self._cancel_key(job["id"]), True, KEEP_JOB_SECONDS)

    def made_known(self, record: dict, **fields) -> None:
        """What a running job tells its pollers (a retraining's progress): kept on its record, which the heartbeat
        writes to the shared state."""
        with self._local.lock:
            record.update(fields)

    def _finish(self, record: dict, report: dict) -> dict:
        record = record | {"state": "done", "finished": time.time(), "report": report, "heartbeat": time.time()}
        state.store.set(self.job_key(record["id"]), record, KEEP_JOB_SECONDS)
        return record

    def _run(self, app: Flask, model: Model, work: Callable[[dict], dict], record: dict, release: Callable[[], None],
             finished: Callable[[dict], None]) -> None:
        with app.app_context():
            if not self.queues_itself:
                record["state"] = "running"
                record["started"] = time.time()
            record["heartbeat"] = time.time()
            state.store.set(self.job_key(record["id"]), record, KEEP_JOB_SECONDS)
            try:
                try:
                    report = work(record)
                except Exception as exc:  # never leave a poller waiting on a job that died
                    app.logger.exception("%s of %s failed unexpectedly", self.kind, model.slug)
                    report = {"model": model.slug, "status": "error", "message": f"internal error: {exc}"}
                report["cached"] = False
                finished(report)
                local = parts(app).jobs
                with local.lock:  # the heartbeat's lock: the job's end is its last write
                    record.update(self._finish(record, report))
                    _, done, _ = local.running.pop(self.job_key(record["id"]))
                state.store.delete(self._running_key(record["key"]))
            finally:
                # What the job holds (a run's place, a retraining's place on the machine) is given back once its end
                # is recorded: no poller sees it running beside the job that took its place.
                release()
            done.set()


def _digest(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def _ensure_heartbeat(app: Flask) -> None:
    """One thread per process refreshes the heartbeat of every job it runs, with what each made known."""
    local = parts(app).jobs
    if local.heartbeat is not None and local.heartbeat.is_alive():
        return

    def beat() -> None:
        every = app.config["JOB_HEARTBEAT_SECONDS"]
        with app.app_context():
            while True:
                time.sleep(every)
                # Under the lock a job's end is written under too, so that no beat writes a job's running state
                # after its end (a poll would then see it running until it went stale).
                with local.lock:
                    for record, done, key in local.running.values():
                        if not done.is_set():
                            record["heartbeat"] = time.time()
                            state.store.set(key, record, KEEP_JOB_SECONDS)

    local.heartbeat = threading.Thread(target=beat, name="job-heartbeat", daemon=True)
    local.heartbeat.start()
