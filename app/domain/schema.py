"""Structural validation of a model manifest: what the pages, the API and verification rely on."""

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


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _string(data: dict, key: str, where: str) -> str:
    value = data.get(key)
    _require(isinstance(value, str) and value != "", f"{where}.{key}", "must be a non-empty string")
    return value


def _list(data: dict, key: str, where: str) -> list:
    value = data.get(key)
    _require(isinstance(value, list), f"{where}.{key}", "must be a list")
    return value


def _numbers(values: Any, where: str, depth: int) -> None:
    """A vector (depth 1) or a rectangular matrix (depth 2) of numbers."""
    _require(isinstance(values, list) and len(values) > 0, where, "must be a non-empty list")
    if depth == 1:
        _require(all(_is_number(v) for v in values), where, "must hold numbers only")
        return
    width = len(values[0]) if isinstance(values[0], list) else -1
    for i, row in enumerate(values):
        _numbers(row, f"{where}[{i}]", 1)
        _require(len(row) == width, f"{where}[{i}]", f"has {len(row)} values, row 0 has {width}")


def _graph(manifest: dict) -> set[str]:
    ids: set[str] = set()
    for i, layer in enumerate(_list(manifest, "layers", "manifest")):
        where = f"layers[{i}]"
        _require(isinstance(layer, dict), where, "must be an object")
        layer_id = _string(layer, "id", where)
        _string(layer, "op", where)
        _string(layer, "kind", where)
        _require(isinstance(layer.get("params", {}), dict), f"{where}.params", "must be an object when present")
        _require(layer_id not in ids, where, f"repeats id {layer_id!r}")
        ids.add(layer_id)
    for i, layer in enumerate(manifest["layers"]):
        parent = layer.get("parent")
        _require(parent is None or parent in ids, f"layers[{i}].parent", f"names no layer: {parent!r}")
    for i, edge in enumerate(_list(manifest, "connections", "manifest")):
        where = f"connections[{i}]"
        _require(isinstance(edge, dict), where, "must be an object")
        for end in ("source", "target"):
            _require(edge.get(end) in ids, f"{where}.{end}", f"names no layer: {edge.get(end)!r}")
    return ids


def _steps(manifest: dict, layer_ids: set[str]) -> None:
    step_ids = []
    for i, step in enumerate(_list(manifest, "steps", "manifest")):
        where = f"steps[{i}]"
        _require(isinstance(step, dict), where, "must be an object")
        step_ids.append(_string(step, "id", where))
        _string(step, "title", where)
        _string(step, "note", where)
        _require(step.get("target") in layer_ids, f"{where}.target", "names no layer")
    opening = manifest.get("openingStep")
    _require(opening is None or opening in step_ids, "manifest.openingStep", "names no step")


def _experiment(manifest: dict) -> None:
    experiment = manifest.get("experiment")
    _require(isinstance(experiment, dict), "manifest.experiment", "must be an object")
    case_ids = set()
    for i, case in enumerate(_list(experiment, "cases", "experiment")):
        where = f"experiment.cases[{i}]"
        _require(isinstance(case, dict), where, "must be an object")
        case_id = _string(case, "id", where)
        _require(bool(CASE_ID.fullmatch(case_id)), f"{where}.id",
                 "must be 1 to 100 characters without '/', '\\' or control characters, not ending in .json or .csv")
        _require(case_id not in case_ids, where, f"repeats id {case_id!r}")
        case_ids.add(case_id)
        _string(case, "label", where)
        _require(isinstance(case.get("request", {}), dict), f"{where}.request", "must be an object when present")
        for kind, depth in (("matrices", 2), ("vectors", 1)):
            for j, item in enumerate(case.get(kind, [])):
                _string(item, "label", f"{where}.{kind}[{j}]")
                _numbers(item.get("values"), f"{where}.{kind}[{j}].values", depth)
        for j, vector in enumerate(case.get("vectors", [])):
            first = vector.get("first", 0)
            _require(isinstance(first, int) and not isinstance(first, bool) and first >= 0,
                     f"{where}.vectors[{j}].first", "must be a whole number from 0 when present")
        for j, metric in enumerate(case.get("metrics", [])):
            _string(metric, "label", f"{where}.metrics[{j}]")
            _require(_is_number(metric.get("value")), f"{where}.metrics[{j}].value", "must be a number")
    tolerance = experiment.get("tolerance")
    if tolerance is not None:
        _require(
            isinstance(tolerance, dict) and all(_is_number(tolerance.get(k)) for k in ("rtol", "atol")),
            "experiment.tolerance",
            "must give numeric rtol and atol",
        )


def validate_manifest(manifest: Any, slug: str) -> None:
    """Raise ManifestError naming the first problem; return quietly when the manifest is usable."""
    _require(isinstance(manifest, dict), "manifest", "must be a JSON object")
    _require(manifest.get("schemaVersion") == 1, "manifest.schemaVersion", "must be 1")
    _require(manifest.get("slug") == slug, "manifest.slug", f"must equal its folder name {slug!r}")
    _require(bool(SLUG.fullmatch(slug)), "manifest.slug", "must be lowercase letters, digits and dashes")
    for key in ("title", "question", "description", "category", "className"):
        _string(manifest, key, "manifest")
    revision = _string(manifest, "revision", "manifest")
    _require(bool(REVISION.fullmatch(revision)), "manifest.revision", "must be 8 to 64 hex digits")
    tags = _list(manifest, "tags", "manifest")
    _require(all(isinstance(t, str) for t in tags), "manifest.tags", "must hold strings")
    files = manifest.get("files")
    _require(isinstance(files, dict), "manifest.files", "must be an object")
    for name in files:
        _require(bool(FILE_NAME.fullmatch(name)), f"manifest.files[{name!r}]", "is not a plain file name")
    _require(isinstance(manifest.get("milestone"), dict), "manifest.milestone", "must be an object")
    for i, paper in enumerate(manifest["milestone"].get("papers") or []):
        _require(isinstance(paper, dict) and isinstance(paper.get("title"), str)
                 and isinstance(paper.get("url", ""), str), f"milestone.papers[{i}]", "must have a title and a url")
    _require(isinstance(manifest.get("provenance"), dict), "manifest.provenance", "must be an object")
    _steps(manifest, _graph(manifest))
    _experiment(manifest)
