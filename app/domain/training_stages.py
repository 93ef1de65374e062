"""The weights a recipe kept while it trained, as its recipe.toml declares them:

    [training]
    snapshots = "snapshots.safetensors"  # written by the recipe's train.py, beside it

The file holds `<stage>/<parameter>` tensors of the recorded model and, in its metadata, `stages` (a JSON
list of {"id", "label"}, first the initialisation) and `trained` (the label of the recorded weights). Only
the file's header is read here (no torch); the recipe process reads the tensors (compute/training_stages.py).
"""

import json
import re
import struct
from dataclasses import dataclass
from pathlib import Path

from .labs.fields import DeclarationError

STAGE_ID = re.compile(r"[a-z0-9][a-z0-9_-]{0,39}")
HEADER_LIMIT = 1 << 20  # a snapshots header larger than this is not one a recipe wrote


@dataclass(frozen=True)
class Training:
    """The recipe's snapshots file and its stages in order, the trained (recorded) weights last."""

    snapshots: str
    stages: tuple[dict, ...]


def header(path: Path) -> dict:
    """A safetensors file's JSON header: 8 bytes of little-endian length, then the header."""
    with path.open("rb") as stream:
        (length,) = struct.unpack("<Q", stream.read(8).ljust(8, b"\0"))
        if not 0 < length <= HEADER_LIMIT:
            raise ValueError(f"its header length {length} is not that of a safetensors file")
        return json.loads(stream.read(length))


def declared_training(declaration: dict, recipe_dir: Path) -> Training | None:
    """[training] checked against the snapshots file it names; DeclarationError says what is wrong."""
    name = declaration.get("snapshots")
    if name is None:  # a [training] of knobs alone keeps no snapshots
        return None
    if not isinstance(name, str) or "/" in name or "\\" in name or name.startswith(".") or not name:
        raise DeclarationError("training.snapshots: must be the name of a file in the recipe folder")
    try:
        meta = header(recipe_dir / name).get("__metadata__", {})
        kept = json.loads(meta.get("stages", "[]"))
    except (OSError, ValueError) as exc:
        raise DeclarationError(f"training.snapshots: {name} cannot be read ({exc})") from None
    if not isinstance(kept, list) or not kept or not all(
            isinstance(s, dict) and isinstance(s.get("id"), str) and STAGE_ID.fullmatch(s["id"])
            and isinstance(s.get("label"), str) for s in kept):
        raise DeclarationError(f"training.snapshots: {name} lists no stages as [{{\"id\", \"label\"}}, ...]")
    ids = [s["id"] for s in kept]
    if len(set(ids)) != len(ids) or "trained" in ids:
        raise DeclarationError(f"training.snapshots: {name} repeats a stage id or uses 'trained'")
    trained = {"id": "trained", "label": str(meta.get("trained", "trained"))}
    return Training(name, (*({"id": s["id"], "label": s["label"]} for s in kept), trained))
