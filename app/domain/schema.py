"""Validation of a model manifest: everything the pages, the API and verification rely on, checked when it is
loaded, so that no render, export or answer trips on a manifest later.

First its types, against the TypedDicts the API's document is generated from (shapes.Manifest): strictly, with
no member they do not name. Then what types cannot say: ids that are unique and that every reference names,
parents that never loop, rectangular matrices, names that fit a URL.
"""

import re
from typing import Any

SLUG = re.compile(r"[a-z0-9][a-z0-9-]{0,62}")  # each pattern is matched whole (fullmatch): no "\n" after
REVISION = re.compile(r"[0-9a-f]{8,64}")
FILE_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}")
# A case id is part of its page's and its exports' URLs: one part of a path, printable, and not ending like
# an export's extension. Unicode and quotes are fine.
CASE_ID = re.compile(r"(?!.*\.(?:json|csv)$)[^/\\\x00-\x1f\x7f]{1,100}")


# The recorded items of a case: (kind, the list that holds them, the field with their numbers).
ITEMS = (("matrix", "matrices", "values"), ("vector", "vectors", "values"), ("metric", "metrics", "value"))


class ManifestError(ValueError):
    """The manifest is not usable; the message says where and why."""


def _require(condition: bool, where: str, message: str) -> None:
    if not condition:
        raise ManifestError(f"{where}: {message}")


def _adapter():
    from .shapes import Manifest, validator

    return validator(Manifest)


# pydantic's words for a wrong type, as this project says them.
WORDS = ((re.compile(r"Input should be"), "must be"), (re.compile(r"String should"), "must"),
         (re.compile(r"Field required"), "is required"),
         (re.compile(r"a valid dictionary( or instance of \w+)?"), "a table"), (re.compile(r"a valid list"), "a list"),
         (re.compile(r"a valid string"), "text"), (re.compile(r"a valid integer"), "an integer"),
         (re.compile(r"a valid number"), "a number"), (re.compile(r"a valid boolean"), "true or false"))


def plain(message: str) -> str:
    """A validation message in this project's words, lower-case first: "must be an integer"."""
    for pattern, words in WORDS:
        message = pattern.sub(words, message)
    return message[:1].lower() + message[1:]


def _where(location: tuple) -> str:
    if len(location) == 1:  # a member of the manifest itself, named as the other top-level checks name theirs
        return f"manifest.{location[0]}"
    where = ""
    for part in location:
        where += f"[{part}]" if isinstance(part, int) else (f".{part}" if where else str(part))
    return where or "manifest"


def _typed(manifest: Any) -> None:
    """The manifest's types, as the API's document states them; ManifestError names the first member at fault."""
    from pydantic import ValidationError

    try:
        _adapter().validate_python(manifest, strict=True)
    except ValidationError as exc:
        error = exc.errors(include_url=False)[0]
        message = "is not a member a manifest has" if error["type"] == "extra_forbidden" else plain(error["msg"])
        raise ManifestError(f"{_where(tuple(error['loc']))}: {message}") from None
    except RecursionError:
        raise ManifestError("manifest: nests too deeply") from None


def _graph(manifest: dict) -> set[str]:
    """Unique layer ids, parents that name a module and never loop, connections between layers."""
    layers: dict[str, dict] = {}
    for i, layer in enumerate(manifest["layers"]):
        _require(layer["id"] != "", f"layers[{i}].id", "must not be empty")
        _require(layer["id"] not in layers, f"layers[{i}]", f"repeats id {layer['id']!r}")
        layers[layer["id"]] = layer
    for i, layer in enumerate(manifest["layers"]):
        parent = layer["parent"]
        _require(parent is None or parent in layers, f"layers[{i}].parent", f"names no layer: {parent!r}")
        _require(parent is None or layers[parent]["kind"] == "module", f"layers[{i}].parent",
                 f"{parent!r} is not a module, so it cannot hold other layers")
    _no_loops(layers)
    for i, edge in enumerate(manifest["connections"]):
        for end in ("source", "target"):
            _require(edge[end] in layers, f"connections[{i}].{end}", f"names no layer: {edge[end]!r}")
    return set(layers)


def _no_loops(layers: dict[str, dict]) -> None:
    """Each layer's chain of parents ends: walked once per layer overall (a chain is settled when it reaches a
    layer already settled), so that the check is linear in the layers however deep the modules nest."""
    settled: set[str] = set()
    for start in layers:
        chain: list[str] = []
        on_chain: set[str] = set()
        node: str | None = start
        while node is not None and node not in settled:
            if node in on_chain:
                _require(False, f"layer {node!r}", "is its own ancestor: its parents form a loop "
                                                   f"({' -> '.join([*chain[chain.index(node):], node][:6])})")
            chain.append(node)
            on_chain.add(node)
            node = layers[node]["parent"]
        settled.update(chain)


def _steps(manifest: dict, layer_ids: set[str]) -> None:
    step_ids = []
    for i, step in enumerate(manifest["steps"]):
        _require(step["id"] not in step_ids, f"steps[{i}]", f"repeats id {step['id']!r}")
        step_ids.append(step["id"])
        _require(step["target"] in layer_ids, f"steps[{i}].target", f"names no layer: {step['target']!r}")
    _require(bool(step_ids), "manifest.steps", "must hold at least one step")
    opening = manifest.get("openingStep")
    _require(opening is None or opening in step_ids, "manifest.openingStep", "names no step")


def _numbers(values: list, where: str, depth: int) -> None:
    """A vector (depth 1) or a rectangular matrix (depth 2) of numbers, not empty."""
    _require(len(values) > 0, where, "must be a non-empty list")
    if depth == 2:
        width = len(values[0])
        for i, row in enumerate(values):
            _require(len(row) > 0, f"{where}[{i}]", "must be a non-empty list")
            _require(len(row) == width, f"{where}[{i}]", f"has {len(row)} values, row 0 has {width}")


def _names(names: list[str] | None, count: int, where: str) -> None:
    _require(names is None or len(names) == count, where, f"names {len(names or ())} entries of {count}")


def _experiment(manifest: dict) -> None:
    case_ids = set()
    for i, case in enumerate(manifest["experiment"]["cases"]):
        where = f"experiment.cases[{i}]"
        _require(bool(CASE_ID.fullmatch(case["id"])), f"{where}.id",
                 "must be 1 to 100 characters without '/', '\\' or control characters, not ending in .json or .csv")
        _require(case["id"] not in case_ids, where, f"repeats id {case['id']!r}")
        case_ids.add(case["id"])
        for j, matrix in enumerate(case.get("matrices", [])):
            _numbers(matrix["values"], f"{where}.matrices[{j}].values", 2)
            _names(matrix.get("rows"), len(matrix["values"]), f"{where}.matrices[{j}].rows")
            _names(matrix.get("columns"), len(matrix["values"][0]), f"{where}.matrices[{j}].columns")
        for j, vector in enumerate(case.get("vectors", [])):
            _numbers(vector["values"], f"{where}.vectors[{j}].values", 1)
            _require(vector.get("first", 0) >= 0, f"{where}.vectors[{j}].first", "must be a whole number from 0")
            _names(vector.get("names"), len(vector["values"]), f"{where}.vectors[{j}].names")
        processes = set()
        for j, process in enumerate(case.get("steps", [])):
            _require(process["key"] not in processes, f"{where}.steps[{j}]", f"repeats key {process['key']!r}")
            processes.add(process["key"])
            _require(len(process["states"]) > 0, f"{where}.steps[{j}].states", "must be a non-empty list")
            for k, state in enumerate(process["states"]):
                _require(len(state) > 0, f"{where}.steps[{j}].states[{k}]", "must be a non-empty list")
            _names(process["names"], len(process["states"]), f"{where}.steps[{j}].names")
    tolerance = manifest["experiment"].get("tolerance")
    _require(tolerance is None or tolerance["rtol"] >= 0 and tolerance["atol"] >= 0, "experiment.tolerance",
             "must give rtol and atol of 0 or more")


def validate_manifest(manifest: Any, slug: str) -> None:
    """Raise ManifestError naming the first problem; return quietly when the manifest is usable."""
    _require(isinstance(manifest, dict), "manifest", "must be a JSON object")
    _typed(manifest)
    _require(manifest["slug"] == slug, "manifest.slug", f"must equal its folder name {slug!r}")
    _require(bool(SLUG.fullmatch(slug)), "manifest.slug", "must be lowercase letters, digits and dashes")
    _require(bool(REVISION.fullmatch(manifest["revision"])), "manifest.revision", "must be 8 to 64 hex digits")
    for name in manifest["files"]:
        _require(bool(FILE_NAME.fullmatch(name)), f"manifest.files[{name!r}]", "is not a plain file name")
    for key in ("title", "question", "description", "category", "className"):
        _require(manifest[key].strip() != "", f"manifest.{key}", "must not be empty")
    _steps(manifest, _graph(manifest))
    _experiment(manifest)
