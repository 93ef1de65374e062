"""The recipe workers started before the first request: each imports every lab's recipe and loads its
checkpoint."""

from flask import Flask

from ..compute.messages import Warmup
from ..domain.checkpoints import CheckpointUnavailable
from .checkpoints import context
from .extensions import models, workers


def warm_up(app: Flask) -> None:
    """Start the app's recipe workers now, in the background, each importing every lab's recipe and calling its
    declared warm-up with the server's arguments (loading a checkpoint), so that the first runs after a start find
    them ready. A checkpoint missing now is not loaded: its lab says why when it is used."""
    with app.app_context():
        tasks = []
        for model in models.catalog.models.values():
            if not model.has_lab and not model.manifest["experiment"]["cases"]:
                continue  # nothing to import ahead
            try:
                arguments = context(model.checkpoint)
            except CheckpointUnavailable:
                arguments = None
            loaded = arguments is not None
            tasks.append(Warmup(str(model.recipe_dir), model.lab.warm if model.has_lab and loaded else "",
                                arguments or {}))
        workers.pool.prestart(tasks)
