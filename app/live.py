"""Live computations on a model's recipe (what-if runs, corruption draws, traces), cached by request."""

import hashlib
import json

from flask import Flask, abort, current_app
from werkzeug.exceptions import HTTPException

from .catalog import Model
from .checkpoints import context
from .extensions import runner, state, store
from .runner import RecipeCrashed, RecipeError, RecipeRefused, RecipeTimeout, run_key

LIVE_NOTE = "Computed live on the server by the model's recipe for this request; not a recorded value."


def _key(model: Model, entry: str, args: dict) -> str:
    request = hashlib.sha256(json.dumps(args, sort_keys=True).encode()).hexdigest()
    return f"live:{entry}:{run_key(model)}:{request}"


def compute(model: Model, entry: str, args: dict) -> dict:
    """`entry(**args)` of the model's lab recipe in a worker; identical requests come from the cache.

    A failed run answers 503 (worker died, or no usable checkpoint), 504 (timeout), 502 (the recipe raised)
    or 400 (the recipe refused the request), with the reason.
    """
    if not model.has_lab:
        abort(404, f"model {model.slug!r} has no live lab")
    key = _key(model, entry, args)
    found = state.store.get(key)
    if found is not None:
        return found | {"cached": True}
    runner.pool.admit()
    try:
        reply = runner.pool.run(model.recipe_dir, "lab", entry, args, context(model.checkpoint))
    except RecipeRefused as exc:
        abort(exc.status, str(exc))
    except RecipeTimeout as exc:
        abort(504, str(exc))
    except RecipeCrashed as exc:
        abort(503, str(exc))
    except RecipeError as exc:
        abort(502, str(exc))
    finally:
        runner.pool.release()
    try:
        json.dumps(reply["result"], allow_nan=False)
    except ValueError:
        abort(502, f"the recipe's {entry}() answered NaN or infinity, which JSON cannot carry")
    result = {
        "model": model.slug,
        "revision": model.revision,
        "recorded": False,
        "note": LIVE_NOTE,
        "request": args,
        "result": reply["result"],
        "environment": reply["environment"],
        "compute_seconds": reply["compute_seconds"],
    }
    state.store.set(key, result, float(current_app.config["CACHE_SECONDS"]), cached=True)
    return result | {"cached": False}


def warm_up(app: Flask) -> None:
    """Start the app's recipe workers now, in the background, each importing every lab's recipe and calling
    its declared warm-up with the server's arguments (loading a checkpoint), so that the first runs after a
    start find them ready. A checkpoint missing now is not loaded: its lab says why when it is used."""
    with app.app_context():
        tasks = []
        for model in store.catalog.models.values():
            if not model.has_lab:
                continue
            try:
                arguments = context(model.checkpoint)
            except HTTPException:
                arguments = None
            tasks.append({"recipe_dir": str(model.recipe_dir), "context": arguments or {},
                          "warm": model.lab.warm if arguments is not None else ""})
        runner.pool.prestart(tasks)
