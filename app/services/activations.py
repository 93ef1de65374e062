"""What every node computes on one input, through the compute service: a recorded case or a lab request run once
with every module's output drawn small (or one node's drawn large), for the graph to show as its picture.

    POST /api/models/<slug>/activations
    {"case": "zero"} or {"request": {...}}, optional "endpoint" and "node"

The run is the one What if? changes (services/subjects.py) and the answer is cached under everything it depends
on: the run key, the entry, the request and the node asked for.
"""

import hashlib
import json

from ..compute.messages import ActivationsArgs, RecipeCall
from ..domain.catalog import Model
from ..domain.interventions import changeable
from ..domain.labs.fields import FieldError
from ..domain.shapes import ActivationsRequest
from . import runs
from .checkpoints import context
from .live import answered
from .subjects import checked, subject

NOTE = "Computed live on the server by the model's recipe, every node's output drawn within a bound; not recorded."
OUTPUT = "output"  # the compute side's name for the recorded model's own output


def entries(manifest: dict) -> tuple[dict[str, str], list[str]]:
    """Each input node and the first module it enters (whose input it is drawn as), and every input node in the
    recorded order (the model's positional arguments, for an input that enters an op first)."""
    kinds = {layer["id"]: layer["kind"] for layer in manifest["layers"]}
    hooked = set(changeable(manifest))  # the nodes a run's hooks see: modules, not ops
    found: dict[str, str] = {}
    for edge in manifest["connections"]:
        if kinds.get(edge["source"]) == "input" and edge["target"] in hooked:
            found.setdefault(edge["source"], edge["target"])
    return found, [layer_id for layer_id, kind in kinds.items() if kind == "input"]


def in_graph(manifest: dict, reached: dict[str, dict]) -> dict[str, dict]:
    """The run's nodes that are the graph's, in its order (a later call a capture did not trace is left out); a
    module that is only a container (a list of blocks, never called itself) stands for the last of its parts the run
    reached, as its closed box shows the output it hands on; the model's output, where the run's model is not of the
    recorded class (a checkpoint's), is what feeds it."""
    found = {}
    layers = manifest["layers"]
    feeding = {edge["target"]: edge["source"] for edge in manifest["connections"]}
    inside: dict[str, list[str]] = {}  # dotted prefix -> the reached nodes under it, in the graph's order
    for layer in layers:
        if layer["id"] in reached:
            parts = layer["id"].split(".")
            for depth in range(1, len(parts)):
                inside.setdefault(".".join(parts[:depth]), []).append(layer["id"])
    for layer in layers:
        if layer["id"] in reached:
            found[layer["id"]] = reached[layer["id"]]
        elif layer["kind"] == "output" and feeding.get(layer["id"]) in reached:  # a model of another class (a
            found[layer["id"]] = reached[feeding[layer["id"]]] | {"from_part": feeding[layer["id"]]}  # checkpoint's)
        elif layer["kind"] == "module" and (parts := inside.get(layer["id"])):
            depth = min(part.count(".") for part in parts)  # its outermost parts reached, the last of them (h.1,
            part = [part for part in parts if part.count(".") == depth][-1]  # not h.1.mlp's last op)
            found[layer["id"]] = reached[part] | {"from_part": part}
    return found


def answer(model: Model, body) -> dict:
    """`POST .../activations`: every node's output on the run asked for, drawn by its shape."""
    checked(body, ActivationsRequest)
    manifest = model.manifest
    node = body.get("node")
    if node is not None:
        known = {layer["id"]: layer["kind"] for layer in manifest["layers"]}
        if not isinstance(node, str):
            raise FieldError(f"node: must be a node's id, a string (not {type(node).__name__})")
        if node not in known:
            raise FieldError(f"node: {str(node)[:60]!r} is not a node of {model.slug}'s graph")
        if node not in changeable(manifest) and known[node] not in ("input", "output"):
            raise FieldError(f"node: {node} is an op, which no module call runs; its output is the input of the "
                             "node it feeds")
    asked = subject(model, body)
    inputs, arguments = entries(manifest)
    output = next((layer["id"] for layer in manifest["layers"] if layer["kind"] == "output"), OUTPUT)
    wanted = OUTPUT if node == output else node
    run_args = ActivationsArgs(asked.args, manifest.get("className", ""), inputs, arguments, wanted)
    call = RecipeCall.make(model.recipe_dir, asked.entry, run_args, context(model.checkpoint))
    digest = hashlib.sha256(json.dumps([asked.args, wanted], sort_keys=True).encode()).hexdigest()
    reply, cached = runs.submit(call, f"activations:{asked.entry}:{runs.run_key(model)}:{digest}")
    nodes = in_graph(manifest, {(output if name == OUTPUT else name): entry for name, entry in reply.result.items()})
    if node is not None and node not in nodes:
        raise FieldError(f"node: this input's run never reaches {node}")
    return answered(model, asked.args, reply, cached, NOTE) | {
        "endpoint": asked.name, "case": body.get("case"), "node": node,
        "nodes": {node: nodes[node]} if node is not None else nodes}
