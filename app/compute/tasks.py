"""Recipe runs as Celery tasks, for a compute tier apart from the web tier, on any number of machines.

    celery -A compute_worker worker --concurrency 2   # the repository's entry point: docs/operations.md

Each worker child is one recipe process (compute/worker.py's RecipeProcess): torch loaded once when the
child starts, one task at a time, acknowledged after it ran (a child killed mid-task gives the task back to
the queue for another worker), time limits from the recipe timeout, a child replaced once it holds more
memory than the recipe's allowance. A task names its recipe folder by name; the worker runs the folder of
that name in its own recipes directory, so every machine holds the same recipes (the web tier's cache keys
hash them); a task for a learner's variant carries its files, laid over the worker's own folder of its recipe
(variant_folders.py). The web tier sends tasks by name and never imports this module, or torch.
"""

import tempfile
from pathlib import Path

import redis
from celery import Celery, signals
from celery.exceptions import SoftTimeLimitExceeded

from . import worker
from .errors import RecipeError, RecipeTimeout
from .messages import Failure, SharedRunsFolder
from .retraining import Cancelled, RetrainCall, retrain_watched
from .variant_folders import laid_out

TASK = "tensorviz.run_recipe"
VARIANT = "variant"  # a task's field for a learner's variant: its recipe and its own files (variant_folders.py)
RETRAIN = "tensorviz.retrain"
GRACE = 5.0  # seconds between the soft time limit (the recipe's timeout) and the hard one
PROGRESS = "PROGRESS"  # a retraining task's state while it trains: its meta is the Curve's progress


def cancel_key(task_id: str) -> str:
    """The broker key that asks the retraining task `task_id` to stop (set by the web tier, read by the task)."""
    return f"tensorviz:retraining:cancel:{task_id}"


def options(broker: str, backend: str | None, timeout: float, memory_mb: int) -> dict:
    """The Celery settings both tiers share: where tasks go and come back, and how they are run."""
    return {
        "broker_url": broker, "result_backend": backend or broker,
        "task_serializer": "json", "result_serializer": "json", "accept_content": ["json"],
        "task_acks_late": True, "task_reject_on_worker_lost": True, "worker_prefetch_multiplier": 1,
        "task_soft_time_limit": timeout, "task_time_limit": timeout + GRACE,
        "worker_max_memory_per_child": memory_mb * 1024 if memory_mb else None,  # KiB
        "result_expires": 3600, "broker_connection_retry_on_startup": True,
        # A task sent while the broker is down fails at once (503) instead of waiting for it. Redis gives a task
        # that a worker took and never acknowledged (the whole worker died) back to the queue after
        # `visibility_timeout` seconds: past the hard time limit, so that a task still running is never handed
        # to a second worker, and soon enough that a lost one runs again within minutes, not the default hour.
        "broker_transport_options": {"max_retries": 0, "visibility_timeout": visibility_timeout(timeout)},
        "task_publish_retry": False,
        # A task a worker took says so (STARTED): the web tier tells "queued, no worker took it" from "it ran too
        # long" and from "the worker that took it was lost".
        "task_track_started": True,
    }


def visibility_timeout(timeout: float) -> int:
    """Seconds Redis holds a task a worker took before giving it to another: the hard time limit and a margin."""
    return int(timeout + GRACE + 60)


def make_celery(settings: dict) -> Celery:
    """The compute tier's Celery application. `settings` are the app's (Config, TENSORVIZ_* overrides), checked and
    typed (services/config.settings, as compute_worker.py reads them): CELERY_BROKER_URL (else REDIS_URL),
    CELERY_RESULT_BACKEND, RECIPES_DIR and the RECIPE_* limits."""
    broker = settings.get("CELERY_BROKER_URL") or settings.get("REDIS_URL")
    if not broker:
        raise ValueError("the compute tier needs a broker: set TENSORVIZ_CELERY_BROKER_URL or TENSORVIZ_REDIS_URL")
    app = Celery("tensorviz-compute")
    app.conf.update(options(broker, settings.get("CELERY_RESULT_BACKEND"), settings["RECIPE_TIMEOUT"],
                            settings["RECIPE_MEMORY_MB"]))
    recipes = Path(settings["RECIPES_DIR"])
    # The variants this worker's children lay out, apart from any a web process on this machine unpacks.
    variants = Path(settings.get("VARIANTS_DIR") or tempfile.mkdtemp(prefix="tensorviz-variants-")) / "_compute"
    made: dict = {}  # this child's recipe process, made when the child starts, and its broker client

    def recipe_process() -> worker.RecipeProcess:
        # No address-space cap here: Celery's own children hold more than a pipe worker, and
        # worker_max_memory_per_child replaces one that grew.
        if "process" not in made:
            made["process"] = worker.start(settings["RECIPE_TORCH_THREADS"], settings["RECIPE_SEED"], 0,
                                           settings.get("RECIPE_KERNELS", "native"),
                                           SharedRunsFolder.configured(settings))
        return made["process"]

    def local_folder(task: dict) -> Path | dict:
        """This machine's folder of the task's recipe (named by name: every machine holds the same recipes), or of the
        learner's variant it carries (laid over this machine's folder of its recipe); else the Failure the task
        answers (a machine set up with other recipes than the web tier's, a variant that carries code)."""
        variant = task.get(VARIANT)
        name = Path(variant["of"] if variant is not None else task["recipe_dir"]).name
        try:
            found = recipes / name if variant is None else \
                laid_out(variant, recipes, variants, settings["VARIANTS_KEPT"])
        except RecipeError as exc:
            return Failure(str(exc), str(exc)).wire()
        if found is None or not found.is_dir():
            said = f"this compute worker has no recipe folder {name}"
            return Failure(said, said).wire()
        return found

    signals.worker_process_init.connect(lambda **_: recipe_process(), weak=False)  # torch loaded before a task

    @app.task(name=TASK)
    def run_recipe(task: dict) -> dict:
        """One recipe task, as a pipe worker runs it, in this machine's folder of the same name."""
        process = recipe_process()  # made here where no child started it (a solo pool)
        folder = local_folder(task)
        if isinstance(folder, dict):
            return folder
        return process.answer(task | {"recipe_dir": str(folder)}, timeouts=(SoftTimeLimitExceeded,))

    # Acknowledged when taken, unlike a recipe run: a retraining runs for minutes, past the broker's visibility
    # timeout, and must never be handed to a second worker while the first trains; one whose worker died is lost,
    # and the web tier's job says so. Its time limits come with each task (the retraining's own).
    @app.task(name=RETRAIN, bind=True, acks_late=False)
    def retrain_recipe(self, task: dict) -> dict:
        """One retraining (compute/retraining.py) in this machine's folder of the same name: its progress written as
        the task's state, a stop asked through the broker (cancel_key) heard while it trains."""
        folder = local_folder(task)
        if isinstance(folder, dict):
            return folder
        if "broker" not in made:
            made["broker"] = redis.Redis.from_url(broker, socket_timeout=2, socket_connect_timeout=2)

        def cancelled() -> bool:
            try:
                return bool(made["broker"].exists(cancel_key(self.request.id)))
            except redis.RedisError:
                return False  # the broker out of reach for a moment: train on, the time limit still holds

        try:
            reply = retrain_watched(RetrainCall.read(task, folder),
                                    lambda progress: self.update_state(state=PROGRESS, meta=progress), cancelled)
        except Cancelled as exc:
            return Failure(str(exc), str(exc), cancelled=True).wire()
        except (RecipeTimeout, SoftTimeLimitExceeded) as exc:
            return Failure(str(exc), str(exc), timed_out=True).wire()
        except RecipeError as exc:
            return Failure(str(exc), str(exc)).wire()
        return reply.wire()

    return app
