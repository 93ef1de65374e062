"""The items a case is made of, in the manifest's shape: a recipe names its numbers, the kit writes the item.

    matrix("attention", "Attention weights (query × key)", weights, rows=tokens, columns=tokens)
    vector("probabilities", "Class probabilities (digits 0-9)", probs)
    metric("loss", "Cross entropy against the true digit", loss)

Values may be tensors (written as the nested lists `tolist()` gives) or plain lists and numbers. `rows` and
`columns` name a matrix's axes, `names` a vector's entries, and `first` the number of a vector's first entry (an
epoch curve starts at 1).
"""

import json
from collections.abc import Mapping, Sequence
from typing import Any


def _plain(values: Any) -> Any:
    """A tensor (or a NumPy array) as the nested lists or the number it holds; anything else as it is."""
    if hasattr(values, "tolist"):
        return values.tolist()
    return values


def matrix(
    key: str, label: str, values: Any, *, rows: Sequence[str] | None = None, columns: Sequence[str] | None = None
) -> dict:
    item = {"key": key, "label": label, "values": _plain(values)}
    if rows is not None:
        item["rows"] = list(rows)
    if columns is not None:
        item["columns"] = list(columns)
    return item


def vector(key: str, label: str, values: Any, *, names: Sequence[str] | None = None, first: int | None = None) -> dict:
    item = {"key": key, "label": label, "values": _plain(values)}
    if names is not None:
        item["names"] = list(names)
    if first is not None:
        item["first"] = first
    return item


def metric(key: str, label: str, value: Any) -> dict:
    return {"key": key, "label": label, "value": _plain(value)}


def loss_curve(metadata: Mapping[str, str]) -> dict:
    """train.py's mean training loss in each epoch (the `loss_per_epoch` its weights' metadata holds:
    recipekit.training.metadata), as a vector whose entries count epochs from 1."""
    return vector(
        "training_loss",
        "Mean training loss in each epoch, as train.py measured it",
        json.loads(metadata["loss_per_epoch"]),
        first=1,
    )
