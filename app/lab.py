"""Live-lab requests, validated against the model's own sizes as its manifest graph records them."""

import math
import re
from dataclasses import dataclass

from werkzeug.exceptions import BadRequest

ATTENTION = ("bidirectional", "causal")
RUN_FIELDS = {"input_ids", "segment_ids", "mlm_positions", "original_ids", "nsp_label", "attention"}
CORRUPTION_FIELDS = {"input_ids", "seed", "segment_ids"}
TRACE_FIELDS = {"input_ids", "segment_ids", "position", "attention"}
MAX_SEED = 2**63 - 1


@dataclass(frozen=True)
class Limits:
    """What a request may contain: sequence length, vocabulary and segment count, special token ids."""

    length: int
    vocab: int
    segments: int
    special: dict[str, int]


def limits_for(manifest: dict) -> Limits:
    """Sizes from the embedding layers' parameters; special ids from the recording's own case note."""
    params = {layer["id"]: layer.get("params", {}) for layer in manifest["layers"]}
    note = manifest["experiment"]["cases"][0].get("note", "")
    special = {name: int(value) for name, value in re.findall(r"\b([A-Z]{2,})=(\d+)", note)}
    return Limits(
        length=params["position_embeddings"]["num_embeddings"],
        vocab=params["word_embeddings"]["num_embeddings"],
        segments=params["segment_embeddings"]["num_embeddings"],
        special=special,
    )


def _fail(field: str, message: str) -> None:
    raise BadRequest(f"{field}: {message}")


def _object(body, allowed: set[str]) -> dict:
    if not isinstance(body, dict):
        _fail("body", "send a JSON object (Content-Type: application/json)")
    unknown = sorted(set(body) - allowed)
    if unknown:
        _fail(unknown[0], f"unknown field; the fields are {', '.join(sorted(allowed))}")
    return body


def _int(value, field: str, low: int, high: int) -> int:
    """An integer in [low, high); JSON true/false and 2.0 are not integers here."""
    if not isinstance(value, int) or isinstance(value, bool):
        _fail(field, f"must be an integer, not {type(value).__name__}")
    if not low <= value < high:
        _fail(field, f"{value} is out of range {low}..{high - 1}")
    return value


def _ids(body: dict, field: str, length: int, high: int) -> list[int]:
    values = body.get(field)
    if values is None:
        _fail(field, "is required")
    if not isinstance(values, list):
        _fail(field, f"must be a list of {length} integers")
    if len(values) != length:
        _fail(field, f"must hold exactly {length} values, not {len(values)}")
    return [_int(v, f"{field}[{i}]", 0, high) for i, v in enumerate(values)]


def _attention(value, field: str = "attention") -> str:
    if value not in ATTENTION:
        _fail(field, f"must be one of {', '.join(ATTENTION)}")
    return value


def default_segments(input_ids: list[int], limits: Limits) -> list[int]:
    """BERT's convention: segment A up to and including the first SEP, segment B after it."""
    sep = limits.special.get("SEP")
    first = input_ids.index(sep) if sep in input_ids else len(input_ids) - 1
    return [0 if i <= first else min(1, limits.segments - 1) for i in range(len(input_ids))]


def run_request(body, limits: Limits) -> dict:
    """A what-if run: the model input, the positions the MLM loss scores and what they are scored against."""
    body = _object(body, RUN_FIELDS)
    input_ids = _ids(body, "input_ids", limits.length, limits.vocab)
    segment_ids = _ids(body, "segment_ids", limits.length, limits.segments)
    positions = body.get("mlm_positions")
    if not isinstance(positions, list) or not positions:
        _fail("mlm_positions", "must be a non-empty list of positions; the MLM loss needs at least one")
    positions = [_int(p, f"mlm_positions[{i}]", 0, limits.length) for i, p in enumerate(positions)]
    if len(set(positions)) != len(positions):
        _fail("mlm_positions", "names a position twice")
    original_ids = _ids(body, "original_ids", limits.length, limits.vocab) if "original_ids" in body else input_ids
    return {
        "input_ids": input_ids,
        "segment_ids": segment_ids,
        "mlm_positions": sorted(positions),
        "original_ids": original_ids,
        "nsp_label": _int(body.get("nsp_label", 0), "nsp_label", 0, 2),
        "attention": _attention(body.get("attention", "bidirectional")),
    }


def corruption_request(body, limits: Limits) -> dict:
    """A draw of BERT's corruption sampler: the clean sequence and a seed."""
    body = _object(body, CORRUPTION_FIELDS)
    input_ids = _ids(body, "input_ids", limits.length, limits.vocab)
    if "seed" not in body:
        _fail("seed", "is required (any integer 0.." + str(MAX_SEED) + ")")
    seed = _int(body["seed"], "seed", 0, MAX_SEED + 1)
    segment_ids = (_ids(body, "segment_ids", limits.length, limits.segments) if "segment_ids" in body
                   else default_segments(input_ids, limits))
    return {"input_ids": input_ids, "seed": seed, "segment_ids": segment_ids}


def _query_ids(args, field: str, length: int, high: int) -> list[int]:
    raw = args.get(field)
    if raw is None:
        _fail(field, "is required, as comma-separated integers")
    try:
        values = [int(v) for v in raw.split(",")]
    except ValueError:
        _fail(field, f"must be comma-separated integers, not {raw[:40]!r}")
    return _ids({field: values}, field, length, high)


def trace_request(args, limits: Limits) -> dict:
    """A trace from query parameters; the position defaults to the first MASK."""
    unknown = sorted(set(args) - TRACE_FIELDS)
    if unknown:
        _fail(unknown[0], f"unknown parameter; the parameters are {', '.join(sorted(TRACE_FIELDS))}")
    input_ids = _query_ids(args, "input_ids", limits.length, limits.vocab)
    segment_ids = (_query_ids(args, "segment_ids", limits.length, limits.segments) if "segment_ids" in args
                   else default_segments(input_ids, limits))
    mask = limits.special.get("MASK")
    if "position" in args:
        try:
            position = int(args["position"])
        except ValueError:
            _fail("position", f"must be an integer, not {args['position'][:40]!r}")
        position = _int(position, "position", 0, limits.length)
    elif mask in input_ids:
        position = input_ids.index(mask)
    else:
        _fail("position", f"is required when input_ids holds no MASK ({mask})")
    return {"input_ids": input_ids, "segment_ids": segment_ids, "position": position,
            "attention": _attention(args.get("attention", "bidirectional"))}


def recorded_run_request(case: dict, limits: Limits) -> dict:
    """The what-if run that replays a recorded case. The recording keeps no NSP label; the one whose
    cross entropy, -log p(label), equals the recorded sentence-pair loss is it."""
    vectors = {v["label"]: v["values"] for v in case["vectors"]}
    metrics = {m["label"]: m["value"] for m in case["metrics"]}
    nsp_probs = vectors["Sentence pair · IsNext / NotNext probabilities"]
    loss = metrics["Sentence-pair cross entropy"]
    label = min(range(len(nsp_probs)), key=lambda i: abs(-math.log(nsp_probs[i]) - loss))
    selected = vectors["MLM loss positions · 1 means selected"]
    return {
        "input_ids": vectors["Corrupted token IDs"],
        "segment_ids": default_segments(vectors["Corrupted token IDs"], limits),
        "mlm_positions": [i for i, flag in enumerate(selected) if flag],
        "original_ids": vectors["Original token IDs"],
        "nsp_label": label,
        "attention": "bidirectional",
    }
