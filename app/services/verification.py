"""Verification: replay a model's recipe in a worker process and compare it with the recording.

Reports and the latest report are kept through the app's cache (services/cache.py), the jobs that make them
in the shared state (services/jobs.py), so that any process of the app can answer a poll.
"""

import hashlib
import time

from flask import current_app

from ..compute.errors import RecipeError
from ..compute.messages import RecipeCall
from ..domain.catalog import Model
from ..domain.checkpoints import CheckpointUnavailable
from ..domain.compare import compare_replay, recorded_states, tolerance_for
from ..domain.shapes import Report
from . import budget, history, runs
from .cache import cache, raw
from .checkpoints import context, find
from .jobs import Jobs, rfc3339


def cache_key(model: Model) -> str:
    """A report holds for exactly what it checked: the recording's bytes, the recipe files, torch, the
    seed and the tolerance."""
    tol = tolerance_for(model.manifest)
    return f"verification:{runs.run_key(model)}:rtol-{tol.rtol!r}:atol-{tol.atol!r}"


def _latest_key(model: Model) -> str:
    return "latest-" + cache_key(model)


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
        reply = runs.run(RecipeCall.replay(model.recipe_dir, context(model.checkpoint),
                                           recorded_states(model.manifest)))
    except CheckpointUnavailable as exc:
        report |= {"status": "error", "message": exc.description}
    except RecipeError as exc:
        report |= {"status": "error", "message": str(exc)}
    else:
        report |= compare_replay(model.manifest, reply.result)
        report |= {"environment": reply.environment, "compute_seconds": reply.compute_seconds,
                   "replay_sha256": hashlib.sha256(reply.result_json.encode()).hexdigest()}
    if model.checkpoint is not None and report["status"] != "error":
        report["checkpoint"] = _checkpoint_summary(model)
    report["duration_seconds"] = time.perf_counter() - clock
    return report


class Verifications(Jobs):
    """Flask extension: background verification jobs with cached reports, in the shared state."""

    def __init__(self) -> None:
        super().__init__("verification", "api.verification_job", threads=4)

    def cached(self, model: Model) -> bytes | None:
        """A finished report for exactly this recording, recipe, torch and tolerance, if one is cached: its
        JSON bytes, served as they are stored."""
        return raw(cache_key(model))

    def latest(self, model: Model) -> dict | None:
        return cache.get(_latest_key(model))

    def start(self, model: Model) -> dict:
        """The job already running this exact verification (in any process), or a new one; only a verification
        that starts counts against its client's budget and takes a place in the pool (PoolBusy when the queue is
        full: nothing is started)."""
        key = cache_key(model)

        def admit(job_id: str):
            budget.spend()
            return runs.admit().release

        def finished(report: dict) -> None:
            seconds = current_app.config["CACHE_SECONDS"]
            if report["status"] != "error":  # a timeout or crash may pass on a retry; never cache it
                cache.set(key, report | {"cached": True}, timeout=seconds)
            history.verified(model, report)
            cache.set(_latest_key(model), report, timeout=seconds)

        return super().start(model, key, lambda record: verify(model), admit=admit,
                             limit=current_app.config["RECIPE_TIMEOUT"], finished=finished)


verifications = Verifications()
