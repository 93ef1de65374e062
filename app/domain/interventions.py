"""Interventions on a model's graph, checked against the recording before anything runs.

A request names graph nodes and what to do to their output: `zero`, `mean` (over the input's positions),
`scale` by a `factor`, or `patch` (the output of the same node in the run on another recorded case). On an
attention module the recipe declares in recipe.toml, a `head` narrows it to that head's context (the
input of the module's output projection, heads side by side on its last axis):

    [interventions.heads]
    "h.*.attn" = { count = "n_head", projection = "h.*.attn.c_proj" }

where `*` stands for a block's number, and `count` is the number of heads or the attention module's
attribute that holds it. The plan this module makes is what the recipe process runs (compute/intervene.py).
"""

import math
import re
from collections.abc import Collection
from dataclasses import dataclass
from typing import get_args

from .labs.fields import DeclarationError, FieldError
from .shapes import Action, Intervention

# What a request may say, as the API's document declares it (shapes.Intervention): read from there, not written again.
ACTIONS: tuple[str, ...] = get_args(Action)
KEYS = frozenset(Intervention.__annotations__)
MOST = 16  # interventions in one request
FACTOR = 1e6  # the largest |factor| a scale takes: beyond it, outputs overflow float32 soon


@dataclass(frozen=True)
class Heads:
    """An attention module's heads: how many (a number, or the module's attribute holding it) and the child
    whose input holds their context vectors side by side."""

    count: int | str
    projection: str


def declared_heads(declaration: dict, manifest: dict) -> dict[str, Heads]:
    """[interventions.heads] resolved against the recorded graph: every module a pattern names, with its
    projection, which must be a recorded child of it. DeclarationError says what is wrong."""
    modules = {layer["id"] for layer in manifest["layers"] if layer["kind"] in ("module", "layer")}
    found: dict[str, Heads] = {}
    for pattern, spec in declaration.get("heads", {}).items():
        where = f"interventions.heads.{pattern!r}"
        count, projection = spec.get("count"), spec.get("projection")
        if not (isinstance(count, int) and count > 0 or isinstance(count, str) and count.isidentifier()) \
                or not isinstance(projection, str):
            raise DeclarationError(f"{where}: needs a count (a number or an attribute) and a projection")
        matcher = re.compile(re.escape(pattern).replace(r"\*", r"(\d+)") + "$")
        matched = [(m, matcher.match(m)) for m in sorted(modules)]
        for module, match in ((m, x) for m, x in matched if x):
            child = projection
            for number in match.groups():
                child = child.replace("*", number, 1)
            if child not in modules or not child.startswith(module + "."):
                raise DeclarationError(f"{where}: {child!r} is not a recorded part of {module!r}")
            found[module] = Heads(count, child)
        if not any(x for _, x in matched):
            raise DeclarationError(f"{where}: names no module of the recorded graph")
    return found


def changeable(manifest: dict) -> list[str]:
    """Every node an intervention may name: the graph's modules and layers (not its ops, nor its inputs)."""
    return [layer["id"] for layer in manifest["layers"]
            if layer["kind"] in ("module", "layer") and "@" not in layer["id"].split("#", 1)[0]]


POSITIONS = (3, 4)  # the dimensions of an output that `mean` averages over positions of: (B, T, C), (B, C, H, W)


def offered(manifest: dict, outline: dict[str, list], sources: dict[str, dict[str, list] | None]) -> dict[str, dict]:
    """What an intervention can do to each changeable node of one run, and why not the rest, from the run's
    outline (its outputs' shapes by node and call, compute/intervene.py's outlines) and those of the recorded
    cases a patch may take outputs from (None where that case's run failed): {node: {"actions", "from_cases",
    "why_not"}}. A change that a later part of the model cannot take is only found by running it (a 400)."""
    found = {}
    for node in changeable(manifest):
        shapes = outline.get(node)
        if shapes is None:
            reason = f"this input's run gets no output of numbers from {node} to change (it is not called itself)"
            found[node] = {"actions": [], "from_cases": [], "why_not": dict.fromkeys(ACTIONS, reason)}
            continue
        why_not = {}
        flat = next((shape for shape, _ in shapes if shape is not None and len(shape) not in POSITIONS), None)
        if flat is not None:
            why_not["mean"] = f"mean averages over positions, and {node}'s output has shape {flat}, which has none"
        from_cases = [case for case, other in sources.items() if other is not None and other.get(node) == shapes]
        if not from_cases:
            why_not["patch"] = (f"no other recorded case runs {node} with the same shapes as this input" if sources
                                else "there is no other recorded case to patch from")
        found[node] = {"actions": [action for action in ACTIONS if action not in why_not], "from_cases": from_cases,
                       "why_not": why_not}
    return found


def plan(items, manifest: dict, heads: dict[str, Heads], cases: Collection[str]) -> list[dict]:
    """The interventions of a request, checked, as the recipe process runs them; FieldError (a 400) names
    the field at fault. `cases` are the recorded cases a patch may take its output from."""
    if not isinstance(items, list) or not items:
        raise FieldError("interventions: send a list of one or more interventions")
    if len(items) > MOST:
        raise FieldError(f"interventions: at most {MOST} in one request, not {len(items)}")
    layers = {layer["id"]: layer for layer in manifest["layers"]}
    planned = []
    for index, item in enumerate(items):
        where = f"interventions[{index}]"
        if not isinstance(item, dict):
            raise FieldError(f"{where}: must be an object with node and action")
        unknown = sorted(set(item) - KEYS)
        if unknown:
            raise FieldError(f"{where}.{unknown[0]}: unknown field; the fields are {', '.join(sorted(KEYS))}")
        node, action = item.get("node"), item.get("action")
        module = node.split("#", 1)[0] if isinstance(node, str) else None
        layer = layers.get(node) if isinstance(node, str) else None
        if layer is None:
            raise FieldError(f"{where}.node: {str(node)[:80]!r} is not a node of the recorded graph")
        if layer["kind"] not in ("module", "layer") or "@" in module:
            raise FieldError(f"{where}.node: {node!r} is {'an op' if '@' in module else 'an ' + layer['kind']}, "
                             "not a module; interventions act on modules")
        if action not in ACTIONS:
            raise FieldError(f"{where}.action: must be one of {', '.join(ACTIONS)}")
        step = {"node": node, "action": action, "target": node, "on": "output"}
        if "head" in item:
            step |= _head(item["head"], heads.get(node), node, where)
        if action == "scale":
            factor = item.get("factor")
            if not isinstance(factor, int | float) or isinstance(factor, bool) or not math.isfinite(factor) \
                    or abs(factor) > FACTOR:
                raise FieldError(f"{where}.factor: a scale needs a finite number within ±{FACTOR:g}")
            step["factor"] = float(factor)
        elif "factor" in item:
            raise FieldError(f"{where}.factor: only a scale takes a factor")
        if action == "patch":
            case = item.get("from_case")
            if not isinstance(case, str) or case not in cases:
                raise FieldError(f"{where}.from_case: must be one of the recorded cases "
                                 f"{', '.join(cases) or '(this recording holds none)'}")
            step["from_case"] = case
        elif "from_case" in item:
            raise FieldError(f"{where}.from_case: only a patch takes a case to patch from")
        planned.append(step)
    return planned


def _head(head, declared: Heads | None, node: str, where: str) -> dict:
    if declared is None:
        raise FieldError(f"{where}.head: {node!r} has no heads the recipe declares")
    if not isinstance(head, int) or isinstance(head, bool) or head < 0 \
            or isinstance(declared.count, int) and head >= declared.count:
        count = f"0..{declared.count - 1}" if isinstance(declared.count, int) else "0 or more"
        raise FieldError(f"{where}.head: must be a head number, {count}")
    # The head is cut from the projection's input; `heads` is the count or the attribute that holds it.
    return {"head": head, "heads": declared.count, "target": declared.projection, "on": "input"}
