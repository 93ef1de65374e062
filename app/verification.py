"""Verification: replay a model's recipe in a worker process and compare it with the recording."""

import threading
import time
import uuid
from collections import OrderedDict
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import UTC, datetime

from flask import Flask, current_app

from .catalog import Model
from .compare import compare_replay
from .extensions import cache, runner
from .runner import RecipeError, torch_version

KEEP_JOBS = 200  # finished jobs remembered for polling in this process
KEEP_JOB_SECONDS = 3600  # and in the shared cache


def cache_key(model: Model) -> str:
    """A report stays valid while the model, its recording, its recipe and torch stay the same."""
    return f"verification:{model.slug}:{model.revision}:{model.recipe_sha256}:{torch_version()}"


def _latest_key(model: Model) -> str:
    return f"verification-latest:{model.slug}:{model.revision}"


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


def verify(model: Model) -> dict:
    """Re-execute the recipe and compare every recorded value; always returns a report."""
    started_at = datetime.now(UTC).isoformat(timespec="seconds")
    clock = time.perf_counter()
    report: dict = {"model": model.slug, "revision": model.revision, "started_at": started_at,
                    "recipe": _recipe_summary(model)}
    try:
        reply = runner.pool.run(model.recipe_dir, "run", "replay")
    except RecipeError as exc:
        report |= {"status": "error", "message": str(exc)}
    else:
        report |= compare_replay(model.manifest, reply["result"])
        report |= {"environment": reply["environment"], "compute_seconds": reply["compute_seconds"]}
    report["duration_seconds"] = time.perf_counter() - clock
    return report


@dataclass
class Job:
    """A verification running in the background, polled by its id."""

    model: Model
    key: str
    id: str = field(default_factory=lambda: uuid.uuid4().hex)
    created: float = field(default_factory=time.time)
    started: float | None = None
    finished: float | None = None
    report: dict | None = None
    done: threading.Event = field(default_factory=threading.Event)

    @property
    def state(self) -> str:
        return "done" if self.done.is_set() else "running" if self.started else "queued"

    def as_dict(self) -> dict:
        return with_elapsed({
            "id": self.id,
            "model": self.model.slug,
            "state": self.state,
            "created": self.created,
            "finished": self.finished,
            "location": f"/api/models/{self.model.slug}/verifications/{self.id}",
            "report": self.report,
        })


def with_elapsed(job: dict) -> dict:
    """Elapsed seconds as of now (or of the finish), also for a job another process published."""
    end = job["finished"] or time.time()
    return job | {"elapsed_seconds": round(end - job["created"], 3)}


def _job_key(job_id: str) -> str:
    return f"verification-job:{job_id}"


class Verifications:
    """Flask extension: background verification jobs with cached reports."""

    def init_app(self, app: Flask) -> None:
        app.extensions["tensorviz.verifications"] = {
            "jobs": OrderedDict(),
            "lock": threading.Lock(),
            "executor": ThreadPoolExecutor(max_workers=4, thread_name_prefix="verify"),
        }

    @property
    def _state(self) -> dict:
        return current_app.extensions["tensorviz.verifications"]

    def cached(self, model: Model) -> dict | None:
        """A finished report for this exact recipe, recording and torch, if one is cached."""
        report = cache.get(cache_key(model))
        return None if report is None else report | {"cached": True}

    def latest(self, model: Model) -> dict | None:
        return cache.get(_latest_key(model))

    def job(self, job_id: str) -> dict | None:
        """A job's state, from this process or, with a shared cache, from the one that runs it."""
        local = self._state["jobs"].get(job_id)
        if local is not None:
            return local.as_dict()
        published = cache.get(_job_key(job_id))
        return None if published is None else with_elapsed(published)

    @staticmethod
    def _publish(job: Job) -> None:
        cache.set(_job_key(job.id), job.as_dict(), timeout=KEEP_JOB_SECONDS)

    def start(self, model: Model) -> Job:
        """The running job for this model, or a new one; identical requests share one run."""
        state = self._state
        key = cache_key(model)
        with state["lock"]:
            for job in state["jobs"].values():
                if job.key == key and not job.done.is_set():
                    return job
            runner.pool.admit()  # PoolBusy when the queue is full: nothing is started
            job = Job(model, key)
            state["jobs"][job.id] = job
            while len(state["jobs"]) > KEEP_JOBS:
                state["jobs"].popitem(last=False)
        self._publish(job)
        state["executor"].submit(self._run, current_app._get_current_object(), job)
        return job

    def _run(self, app: Flask, job: Job) -> None:
        with app.app_context():
            job.started = time.time()
            self._publish(job)
            try:
                report = verify(job.model)
            except Exception as exc:  # never leave a poller waiting on a job that died
                app.logger.exception("verification of %s failed unexpectedly", job.model.slug)
                report = {"model": job.model.slug, "status": "error", "message": f"internal error: {exc}"}
            finally:
                runner.pool.release()
            report["cached"] = False
            if report["status"] != "error":  # a timeout or crash may pass on a retry; never cache it
                cache.set(job.key, report)
            cache.set(_latest_key(job.model), report)
            job.report = report
            job.finished = time.time()
            job.done.set()
            self._publish(job)


verifications = Verifications()
