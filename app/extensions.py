"""Extensions, created unbound here and bound to an app in create_app."""

from flask import Flask, current_app

from .catalog import ManifestStore
from .runner import WorkerPool
from .state import SharedState


class RecipeRunner:
    """Flask extension owning the worker pool of the app it is bound to."""

    def init_app(self, app: Flask) -> None:
        app.extensions["tensorviz.pool"] = WorkerPool(
            size=int(app.config["RECIPE_WORKERS"]),
            timeout=float(app.config["RECIPE_TIMEOUT"]),
            torch_threads=int(app.config["RECIPE_TORCH_THREADS"]),
            seed=int(app.config["RECIPE_SEED"]),
            queue=int(app.config["RECIPE_QUEUE"]),
            memory_mb=int(app.config["RECIPE_MEMORY_MB"]),
        )

    @property
    def pool(self) -> WorkerPool:
        return current_app.extensions["tensorviz.pool"]


state = SharedState()
store = ManifestStore()
runner = RecipeRunner()
