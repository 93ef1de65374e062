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

import re
from collections.abc import Collection
from dataclasses import dataclass, replace
from typing import get_args

from pydantic import ValidationError

from .labs.fields import DeclarationError, FieldError
from .shapes import FACTOR, MOST_INTERVENTIONS, Action, Intervention, Interventions, validator
from .steps import Step

# What a request may say, as the API's document declares it (shapes.Intervention): read from there, not written again.
ACTIONS: tuple[str, ...] = get_args(Action)
KEYS = frozenset(Intervention.__annotations__)


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


# The order in which an intervention's faults are told: the item itself, a field it may not have, then its fields.
FIELDS = ("node", "action", "head", "factor", "from_case")


def _order(problem: dict) -> tuple[int, int]:
    loc = problem["loc"]
    if len(loc) < 2:
        return (loc[0] if loc else -1), 0
    return loc[0], 1 if problem["type"] == "extra_forbidden" else 2 + FIELDS.index(loc[1])


def plan(items, manifest: dict, heads: dict[str, Heads], cases: Collection[str]) -> list[Step]:
    """The interventions of a request, validated against their type (shapes.Interventions, as the API's document
    describes them) and checked against the recording, as the recipe process runs them; FieldError (a 400) names
    the field at fault, item by item. `cases` are the recorded cases a patch may take its output from."""
    layers = {layer["id"]: layer for layer in manifest["layers"]}
    try:
        validator(Interventions).validate_python(items)
    except ValidationError as exc:
        problem = min(exc.errors(), key=_order)
        for index, item in enumerate(items[:problem["loc"][0]] if problem["loc"] else []):
            _step(index, item, layers, heads, cases)  # an earlier item's fault is told first, as it comes first
        raise FieldError(_refusal(problem, items, heads, cases)) from None
    return [_step(index, item, layers, heads, cases) for index, item in enumerate(items)]


def _refusal(problem: dict, items, heads: dict[str, Heads], cases: Collection[str]) -> str:
    """What a request's interventions are refused with, for the first fault their type found."""
    loc, kind = problem["loc"], problem["type"]
    if not loc:
        if kind == "too_long":
            return f"interventions: at most {MOST_INTERVENTIONS} in one request, not {len(items)}"
        return "interventions: send a list of one or more interventions"
    where, item = f"interventions[{loc[0]}]", items[loc[0]]
    if len(loc) == 1:
        return f"{where}: must be an object with node and action"
    if kind == "extra_forbidden":
        return f"{where}.{loc[1]}: unknown field; the fields are {', '.join(sorted(KEYS))}"
    said = {"node": lambda: _not_a_node(item.get("node")), "action": lambda: f"must be one of {', '.join(ACTIONS)}",
            "head": lambda: _not_a_head(heads.get(item.get("node")), item.get("node")),
            "factor": lambda: _not_a_factor(), "from_case": lambda: _not_a_case(cases)}
    return f"{where}.{loc[1]}: {said[loc[1]]()}"


def _not_a_node(node) -> str:
    return f"{str(node)[:80]!r} is not a node of the recorded graph"


def _not_a_head(declared: Heads | None, node) -> str:
    if declared is None:
        return f"{node!r} has no heads the recipe declares"
    count = f"0..{declared.count - 1}" if isinstance(declared.count, int) else "0 or more"
    return f"must be a head number, {count}"


def _not_a_factor() -> str:
    return f"a scale needs a finite number within ±{FACTOR:g}"


def _not_a_case(cases: Collection[str]) -> str:
    return f"must be one of the recorded cases {', '.join(cases) or '(this recording holds none)'}"


def _step(index: int, item: dict, layers: dict[str, dict], heads: dict[str, Heads], cases: Collection[str]) -> Step:
    """One intervention of the type's shape checked against the recording: the step the recipe process runs."""
    where, node, action = f"interventions[{index}]", item["node"], item["action"]
    layer, module = layers.get(node), node.split("#", 1)[0]
    if layer is None:
        raise FieldError(f"{where}.node: {_not_a_node(node)}")
    if layer["kind"] not in ("module", "layer") or "@" in module:
        raise FieldError(f"{where}.node: {node!r} is {'an op' if '@' in module else 'an ' + layer['kind']}, "
                         "not a module; interventions act on modules")
    step = Step(node, action, node, "output")
    if "head" in item:
        step = _head(step, item["head"], heads.get(node), where)
    if action == "scale":
        if "factor" not in item:
            raise FieldError(f"{where}.factor: {_not_a_factor()}")
        step = replace(step, factor=float(item["factor"]))
    elif "factor" in item:
        raise FieldError(f"{where}.factor: only a scale takes a factor")
    if action == "patch":
        if item.get("from_case") not in cases:
            raise FieldError(f"{where}.from_case: {_not_a_case(cases)}")
        step = replace(step, from_case=item["from_case"])
    elif "from_case" in item:
        raise FieldError(f"{where}.from_case: only a patch takes a case to patch from")
    return step


def _head(step: Step, head: int, declared: Heads | None, where: str) -> Step:
    if declared is None or isinstance(declared.count, int) and head >= declared.count:
        raise FieldError(f"{where}.head: {_not_a_head(declared, step.node)}")
    # The head is cut from the projection's input; `heads` is the count or the attribute that holds it.
    return replace(step, head=head, heads=declared.count, target=declared.projection, on="input")
