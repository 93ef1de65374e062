"""What training changed: a recorded case or a lab request run on every stage of weights the recipe kept
while it trained (at initialisation, after some epochs) and on the trained ones.

    POST /api/models/<slug>/training
    {"case": "zero"} or {"request": {...}}, optional "endpoint"

Each stage answers the lab's result (for a case endpoint, every item keyed like the recording) and, per
module of the graph, how far its weights and its output on this input had moved from initialisation
(||x - x0|| / ||x0||). Cached under everything it depends on, like a lab answer: the run key covers the
snapshots file, which is a recipe file.
"""

import hashlib
import json

from ..compute.messages import RecipeCall, TrainingArgs
from ..domain.catalog import Model
from ..domain.labs.fields import FieldError
from ..domain.schema import ITEMS
from ..domain.shapes import SubjectRequest
from . import runs
from .checkpoints import context
from .live import answered
from .subjects import checked, subject

NOTE = ("Computed live on the server by the model's recipe, once on each stage of the weights kept while it "
        "trained; not a recorded value.")


def answer(model: Model, body) -> dict:
    """`POST .../training`: the run on every stage of training, with each module's movement."""
    if model.training is None:
        raise FieldError(f"model: {model.slug} keeps no weights from its training (no [training] in its recipe)")
    checked(body, SubjectRequest)
    asked = subject(model, body)
    args = asked.args
    call = RecipeCall.make(model.recipe_dir, asked.entry, TrainingArgs(args, model.manifest.get("className", "")),
                         context(model.checkpoint))
    digest = hashlib.sha256(json.dumps(args, sort_keys=True).encode()).hexdigest()
    reply, cached = runs.submit(call, f"training:{asked.entry}:{runs.run_key(model)}:{digest}")
    stages = reply.result["stages"]
    if asked.answers_case:
        shown = {"items": labels(stages[-1]["result"]),
                 "stages": [{**stage, "values": values(stage.pop("result"))} for stage in stages]}
    else:
        shown = {"stages": stages}
    return answered(model, args, reply, cached, NOTE) | {"endpoint": asked.name, "case": body.get("case"),
                                                           **shown}


def labels(result: dict) -> dict:
    """Every item of a case answer: its kind and label, by its key."""
    return {item["key"]: {"kind": kind, "label": item["label"]}
            for kind, group, _ in ITEMS for item in result.get(group, [])}


def values(result: dict) -> dict:
    """Every item's value of a case answer, by its key."""
    return {item["key"]: item[field] for _, group, field in ITEMS for item in result.get(group, [])}
