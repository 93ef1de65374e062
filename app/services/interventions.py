"""Interventions through the compute service: a recorded case or a lab request run as it is and with the
interventions, the difference item by item, and how much every module's output moved.

    POST /api/models/<slug>/interventions
    {"case": "mask-a"} or {"request": {...}}, optional "endpoint", and
    "interventions": [{"node": "h.1.attn", "action": "zero", "head": 0}, ...]

A case runs as its preset request (the lab kind turns a recorded case into one), else as run.py's replay of
that case alone, so that every model with recorded cases can be changed, with or without a lab; a patch takes
its output from the run on another case, made the same way (services/subjects.py). The answer is cached under
everything it depends on (the run key, the entry, the request and the interventions), like a lab answer.
"""

import hashlib
import json
from dataclasses import asdict, replace

import numpy as np

from ..compute.errors import RecipeRefused
from ..compute.messages import InterveneArgs, OutlineArgs, RecipeCall, Reply
from ..domain.catalog import Model
from ..domain.interventions import Step, offered, plan
from ..domain.labs import Endpoint
from ..domain.schema import ITEMS
from ..domain.shapes import InterventionRequest, SubjectRequest
from . import runs
from .checkpoints import context
from .live import answered
from .subjects import checked, preset_requests, subject

NOTE = ("Computed live on the server by the model's recipe, once as asked and once with the interventions; "
        "not a recorded value.")


def run(model: Model, entry: str, args: dict, items, sources: dict[str, dict]) -> tuple[Reply, bool, list[Step]]:
    """The intervened run's reply (before, after, effects) and whether it was kept, with the plan; a patch
    runs the source of its case (`sources`, the subject's) first."""
    planned = plan(items, model.manifest, model.heads, sources)
    used = list(dict.fromkeys(step.from_case for step in planned if step.from_case is not None))  # each case once
    steps = [step if step.from_case is None else replace(step, source=used.index(step.from_case)) for step in planned]
    source_args = [sources[case] for case in used]
    run_key = runs.run_key(model)
    arguments = InterveneArgs(args, steps, source_args, model.manifest.get("className", ""), run_key)
    call = RecipeCall.make(model.recipe_dir, entry, arguments, context(model.checkpoint))
    asked = json.dumps(asdict(arguments), sort_keys=True)  # the request, the steps as run, the sources
    key = f"intervened:{entry}:{run_key}:{hashlib.sha256(asked.encode()).hexdigest()}"
    changed = ", ".join(dict.fromkeys(step.node for step in steps))
    blame = RecipeRefused(f"interventions: the changes to {changed} made the answer NaN or infinite, which "
                               "JSON cannot carry; a smaller factor, or another action, may keep it finite")
    reply, cached = runs.submit(call, key, blame)
    return reply, cached, steps


def options(model: Model, body) -> dict:
    """`POST .../interventions/options`: what What if? can change on this run (a case or a lab request), node by
    node, and why not the rest; from one run of the recipe over it and every other recorded case a patch may
    take outputs from (each kept, as a change asked next looks for it)."""
    checked(body, SubjectRequest)
    asked = subject(model, body)
    sources = {case: args for case, args in asked.sources.items() if case != body.get("case")}
    run_key = runs.run_key(model)
    requests = [asked.args, *sources.values()]
    outlines = OutlineArgs(requests, model.manifest.get("className", ""), run_key)
    call = RecipeCall.make(model.recipe_dir, asked.entry, outlines, context(model.checkpoint))
    asked_for = hashlib.sha256(json.dumps(requests, sort_keys=True).encode()).hexdigest()
    reply, _ = runs.submit(call, f"outline:{asked.entry}:{run_key}:{asked_for}")
    shown, *others = reply.result
    return {"endpoint": asked.name, "case": body.get("case"),
            "nodes": offered(model.manifest, shown, dict(zip(sources, others, strict=True)))}


def answer(model: Model, body) -> dict:
    """`POST .../interventions`: the run as asked and intervened, compared item by item."""
    checked(body, InterventionRequest)
    asked = subject(model, body)
    reply, cached, steps = run(model, asked.entry, asked.args, body.get("interventions"), asked.sources)
    result = reply.result
    before, after = result["before"], result["after"]
    if asked.answers_case:  # item by item, each named as its page names it, and the answer in words
        compared = items(before, after, model.vector_names(before), model.axes(before)) | {
            "outcome": {"before": model.outcome(before), "after": model.outcome(after)}}
    else:
        compared = {"before": before, "after": after, "delta": difference(before, after)}
    shown = model.case(body["case"]) if body.get("case") else None
    return answered(model, asked.args, reply, cached, NOTE) | {
        "endpoint": asked.name, "case": body.get("case"), **({"case_label": shown["label"]} if shown else {}),
        "interventions": steps_shown(steps), **compared,
        "effects": result["effects"], "plain_run_cached": result["plain_run_cached"]}


def lab_answer(model: Model, endpoint: Endpoint, args: dict, items) -> dict:
    """A lab endpoint's answer with `interventions` in its body: the intervened result where the plain one
    would be, with the interventions and each module's movement beside it."""
    reply, cached, steps = run(model, endpoint.entry, args, items, preset_requests(model, endpoint))
    result = reply.result
    return answered(model, args, reply, cached, NOTE) | {
        "result": result["after"], "interventions": steps_shown(steps), "effects": result["effects"],
        "plain_run_cached": result["plain_run_cached"]}


def steps_shown(steps: list[Step]) -> list[dict]:
    """The interventions as the client wrote them (the plan's internals left out)."""
    return [step.shown() for step in steps]


def items(before: dict, after: dict, names: dict[str, list[str]] | None = None,
          axes: dict[str, dict] | None = None) -> dict:
    """Every item of a case answer, keyed like the recording: its kind, label, value before and after the
    interventions, and their difference; a vector's entries by name where they are known (`names`, by key:
    Model.vector_names), and a matrix's rows and columns (`axes`, by key: Model.axes)."""
    found = {}
    for kind, group, field in ITEMS:
        new = {item["key"]: item for item in after.get(group, [])}
        for item in before.get(group, []):
            other = new.get(item["key"], {}).get(field)
            found[item["key"]] = {"kind": kind, "label": item["label"], "before": item[field], "after": other,
                                  "delta": difference(item[field], other)}
            if kind == "vector" and item["key"] in (names or {}):
                found[item["key"]]["names"] = names[item["key"]]
            if kind == "matrix" and item["key"] in (axes or {}):
                found[item["key"]]["axes"] = axes[item["key"]]
    return {"items": found}


def difference(before, after):
    """after - before, number by number through lists and objects of the same shape; None elsewhere."""
    if isinstance(before, bool) or isinstance(after, bool):
        return None
    if isinstance(before, int | float) and isinstance(after, int | float):
        return after - before
    if isinstance(before, list) and isinstance(after, list) and len(before) == len(after):
        at_once = array_difference(before, after)
        return at_once if at_once is not None else [difference(b, a) for b, a in zip(before, after, strict=True)]
    if isinstance(before, dict) and isinstance(after, dict):
        return {k: difference(v, after[k]) for k, v in before.items() if k in after}
    return None


def array_difference(before: list, after: list) -> list | None:
    """The difference of two lists that are arrays of numbers of one shape (a layer's vectors, a distribution),
    taken at once: the numbers `difference` gives one by one (float64 subtraction either way; ints stay ints,
    but where a list mixes ints and floats, all are floats), in a third of its time on a DataLab trace's
    100,000 numbers; None for any other pair of lists."""
    try:
        old, new = np.asarray(before), np.asarray(after)
    except ValueError:  # ragged
        return None
    if old.shape != new.shape or old.dtype.kind not in "if" or new.dtype.kind != old.dtype.kind:
        return None
    if old.dtype.kind == "i" and max(np.abs(old).max(initial=0), np.abs(new).max(initial=0)) >= 2**62:
        return None  # past what int64 subtracts without overflowing
    return (new - old).tolist()
