"""Retraining: a model's recipe trained again on the server, watched as it learns, and its weights compared with
the stored ones tensor by tensor.

    POST   /api/models/<slug>/retrainings             the kept report (200), or the job that makes it (202) with
                                                      the token that cancels it, for its starter alone
    GET    /api/models/<slug>/retrainings/<job id>    the job: the curves so far, then its report
    DELETE /api/models/<slug>/retrainings/<job id>    cancel it (Authorization: Bearer <the token>)

train.py runs in a process of its own (compute/retraining.py) with the kernels it takes when run alone, through
the app's executor: in a thread of the web process that took the request (local), or on a compute worker
(celery). One job runs a model's retraining of given recipe files at a time: a second request joins it, from any
process. A report is kept under the recipe's content (every recipe file, the recipe kit, torch), like every answer.

Retraining takes a core for minutes, so it is bounded where the CPU is, not per process (services/places.py):
RETRAINING_JOBS places for the whole machine, shared with the variants that learners train; a job waits queued for
one. A client has one training started at a time, and each start spends RETRAINING_COST of its budget however it
ends (passed, failed, cancelled, stopped). With the shared state out of reach nothing starts (503).
"""

import time

from flask import current_app

from ..compute.errors import RecipeError, RecipeTimeout
from ..compute.retraining import Cancelled, RetrainCall
from ..domain import requirements
from ..domain.catalog import Model
from ..domain.shapes import RetrainingReport
from . import history, places, runs
from .cache import cache
from .extensions import workers
from .jobs import Jobs, rfc3339
from .refusals import RequirementMissing
from .state import StateUnavailable

TRAINING_SCRIPT = "train.py"


def trained_here(model: Model) -> bool:
    """Whether the model's recipe trains it (its folder has train.py), so that it can be retrained."""
    return TRAINING_SCRIPT in model.files


def training_needs(model: Model) -> None:
    """Refuse, naming each package and the command that installs it, a retraining that needs a package this server
    lacks (a requirement only training needs: `; extra == "training"`), before anything starts."""
    listed = model.recipe_dir / requirements.REQUIREMENTS_FILE
    unmet, _ = requirements.unmet(listed.read_bytes() if listed.is_file() else b"", requirements.TRAINING)
    if unmet:
        raise RequirementMissing(f"retraining {model.slug} needs what this server lacks: " + "; ".join(unmet))


def cache_key(model: Model) -> str:
    """A retraining's report holds for exactly the recipe files (its weights, train.py, the kit) and torch."""
    return f"retraining:{runs.run_key(model)}"


def retrain(model: Model, record: dict) -> RetrainingReport:
    """Train the recipe again, telling the job's pollers each curve as it grows, and compare; always a report."""
    clock = time.perf_counter()
    report: dict = {"model": model.slug, "started_at": rfc3339(time.time())}
    call = RetrainCall(model.recipe_dir, current_app.config["RETRAINING_TIMEOUT"],
                       current_app.config["RECIPE_MEMORY_MB"])
    try:
        retrainings.made_known(record, state="queued")
        places.take(retrainings.job_key(record["id"]), lambda: retrainings.cancelled(record["id"]),
                    current_app.config["RETRAINING_TIMEOUT"])
        retrainings.made_known(record, state="running", started=time.time())
        report["started_at"] = rfc3339(time.time())
        reply = workers.pool.retrain(call, lambda progress: retrainings.made_known(record, progress=progress),
                                     lambda: retrainings.cancelled(record["id"]))
    except Cancelled as exc:
        report |= {"status": "cancelled", "message": str(exc)}
    except (RecipeTimeout, RecipeError, StateUnavailable) as exc:
        report |= {"status": "error", "message": str(exc)}
    else:
        retrainings.made_known(record, progress=reply.progress)  # the last epochs too, however fast they came
        compared = reply.report
        report |= {"status": "passed" if compared["passed"] else "failed",
                   **{k: compared[k] for k in ("summary", "tolerance", "largest_difference", "identical",
                                               "guarantee", "bound", "trained_here", "verdict", "elsewhere",
                                               "behaviour", "weights_sha256", "tensors", "figures", "facts")},
                   "curves": (reply.progress or {}).get("curves", []), "environment": reply.environment,
                   "compute_seconds": reply.compute_seconds}
    compared_files = {TRAINING_SCRIPT, *(t["file"] for t in report.get("tensors", []))}
    report["files"] = {name: model.files[name].sha256 for name in sorted(compared_files) if name in model.files}
    if "curves" not in report:
        report["curves"] = (record.get("progress") or {}).get("curves", [])  # as far as it got
    report["duration_seconds"] = time.perf_counter() - clock
    return report  # its place on the machine is given back when its end is recorded (the job's release)


class Retrainings(Jobs):
    """Flask extension: retraining jobs, joined, cancelled and polled from any process, with cached reports."""

    known = ("progress",)
    queues_itself = True  # queued until it holds one of the machine's places (places.take)

    def __init__(self) -> None:
        super().__init__("retraining", "api.retraining_job", threads=places.WAITING_THREADS)

    def cached(self, model: Model) -> dict | None:
        return cache.get(cache_key(model))

    def start(self, model: Model) -> tuple[dict, str | None]:
        """The job already retraining this model's recipe files (in any process), or a new one, which spends
        RETRAINING_COST of its client's budget; and the token that cancels it, for the client that started it
        (None for one that joins). BudgetSpent (429) while the client's last start still runs."""
        training_needs(model)
        key = cache_key(model)

        def admit(job_id: str):
            return places.admit_client(self.job_key(job_id), "retraining")

        def finished(report: dict) -> None:
            if report["status"] in ("passed", "failed"):  # an error or a cancel may end otherwise next time
                cache.set(key, report | {"cached": True}, timeout=current_app.config["CACHE_SECONDS"])
            history.retrained(model, report)

        return self.start_owned(model, key, lambda record: retrain(model, record), admit=admit,
                                limit=2 * current_app.config["RETRAINING_TIMEOUT"], finished=finished)


retrainings = Retrainings()
