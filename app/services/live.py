"""Live computations on a model's recipe (what-if runs, corruption draws, traces), cached by request."""

import hashlib
import json

from ..compute.messages import RecipeCall, Reply
from ..domain.catalog import Model
from ..domain.labs import LabSpec
from . import runs
from .checkpoints import context, identity
from .refusals import NoLiveLab

LIVE_NOTE = "Computed live on the server by the model's recipe for this request; not a recorded value."


def _key(run_key: str, entry: str, args: dict) -> str:
    request = hashlib.sha256(json.dumps(args, sort_keys=True).encode()).hexdigest()
    return f"live-reply:{entry}:{run_key}:{request}"


def live_lab(model: Model) -> LabSpec:
    """The model's live lab; NoLiveLab (404) for a model without one: the one place that says so."""
    if not model.has_lab:
        raise NoLiveLab(f"model {model.slug!r} has no live lab")
    return model.lab


def lab_answer(model: Model, entry: str, args: dict) -> dict:
    """`entry(**args)` of the model's lab recipe, through the compute service (identical requests come from
    its cache); a failed run raises its error, which the web tier answers with its status (web/errors.py). The
    result is the JSON text the recipe process wrote (`result_json`, with its top-level `keys`), to be
    answered as it is. The model has a lab (live_lab)."""
    run_key = runs.run_key(model)
    call = RecipeCall.lab(model.recipe_dir, entry, args, context(model.checkpoint))
    reply, cached = runs.submit(call, _key(run_key, entry, args))
    return answered(model, args, reply, cached) | {"result_json": reply.result_json, "keys": reply.keys}


def answered(model: Model, args: dict, reply: Reply, cached: bool, note: str = LIVE_NOTE) -> dict:
    """What every live answer says of itself: the model and revision, not recorded, the request as run,
    where and how long it ran, and whether it was kept."""
    return {"model": model.slug, "revision": model.revision, "recorded": False, "note": note, "request": args,
            "environment": reply.environment, "compute_seconds": reply.compute_seconds, "cached": cached} \
        | identity(model.checkpoint)
