"""Extensions, created unbound here and bound to an app in create_app; each keeps its part in `parts()`."""

import math
import time
from pathlib import Path

from flask import Flask, current_app

from ..compute.executor import Executor
from ..compute.messages import SharedRunsFolder
from ..compute.pool import WorkerPool
from ..domain.catalog import Catalog, LiveCatalog, Model
from . import suspensions
from .parts import parts
from .refusals import ModelMissing, ModelUnavailable
from .state import SharedState

UNAVAILABLE_RETRY_AFTER = 60  # seconds: a model that waits for its files to change is asked for again after this


class Models:
    """The catalog of models of the app it is bound to."""

    def init_app(self, app: Flask) -> None:
        parts(app).catalog = LiveCatalog(Path(app.config["MANIFESTS_DIR"]), Path(app.config["RECIPES_DIR"]),
                                         app.config["CATALOG_RELOAD_SECONDS"],
                                         app.config["MANIFEST_MAX_BYTES"])

    @property
    def catalog(self) -> Catalog:
        suspensions.follow(current_app, max(current_app.config["CATALOG_RELOAD_SECONDS"], suspensions.FOLLOW_FLOOR))
        return parts().catalog.current()

    def get(self, slug: str) -> Model | None:
        return self.catalog.models.get(slug)

    def get_or_404(self, slug: str) -> Model:
        """The model with this slug, else ModelMissing (a 404) where no model has it, or ModelUnavailable (a 503
        with the reason and Retry-After) where its folder cannot be served now: until a hang's suspension ends, or
        UNAVAILABLE_RETRY_AFTER where only a change of its files serves it again."""
        model = self.get(slug)
        if model is None:
            gone = self.catalog.unavailable.get(slug)
            if gone is not None:
                wait = UNAVAILABLE_RETRY_AFTER if gone.until is None else math.ceil(gone.until - time.time())
                raise ModelUnavailable(self.why_missing(slug), max(1, wait))
            raise ModelMissing(self.why_missing(slug))
        return model

    def why_missing(self, slug: str) -> str:
        """Why no model answers to this slug, for an error message."""
        gone = self.catalog.unavailable.get(slug)
        return f"model {slug!r} is unavailable: {gone.reason}" if gone else f"no model {slug!r}"


class Workers:
    """Where the app it is bound to runs recipes (EXECUTOR): `local`, a pool of recipe processes inside each
    web process, or `celery`, the compute tier's Celery workers over a broker (compute/celery_executor.py).
    Both are an Executor (compute/executor.py)."""

    def init_app(self, app: Flask) -> None:
        config = app.config
        if config["EXECUTOR"] == "local":
            parts(app).pool = WorkerPool(
                size=config["RECIPE_WORKERS"],
                timeout=config["RECIPE_TIMEOUT"],
                torch_threads=config["RECIPE_TORCH_THREADS"],
                seed=config["RECIPE_SEED"],
                kernels=config["RECIPE_KERNELS"],
                queue=config["RECIPE_QUEUE"],
                memory_mb=config["RECIPE_MEMORY_MB"],
                warmup_timeout=config["WARMUP_TIMEOUT"],
                # A recipe whose process cannot start, or whose run hangs, is its model's fault alone: the model is
                # suspended. A run waits behind another model's for RECIPE_PATIENCE seconds at most.
                on_failing=lambda folder, reason: suspensions.suspend(app, folder, reason),
                on_hang=lambda folder: suspensions.hung(app, folder),
                patience=config["RECIPE_PATIENCE"],
                shared=SharedRunsFolder.configured(config),
            )
        else:  # "celery", the one other value settings() admits
            from ..compute.celery_executor import CeleryExecutor  # Celery is loaded only where it is used

            broker = config["CELERY_BROKER_URL"] or config["REDIS_URL"]
            parts(app).pool = CeleryExecutor(broker, config["CELERY_RESULT_BACKEND"], config["RECIPE_TIMEOUT"],
                                             config["RECIPE_QUEUE"], config["RECIPE_MEMORY_MB"],
                                             Path(config["RECIPES_DIR"]),
                                             on_hang=lambda folder: suspensions.hung(app, folder))

    @property
    def pool(self) -> Executor:
        return parts().pool


state = SharedState()
models = Models()
workers = Workers()
