"""How far another processor's rounding may move each recorded value (numpy only, no torch).

When it records, the recorder replays the recipe again under other but legitimate roundings (other kernel families,
every module's output nudged by a few float32 ulps: compute/rounding.py) and measures, element by element, how far
each recorded item moved (`movement`). `fit` turns that evidence into the item's envelope, written beside it in the
manifest: the verification's rule |replayed − recorded| <= atol + rtol·|recorded| with the smallest atol and rtol
that allow FACTOR times every movement seen, and never less than float32's own tolerance. An item that rounding
barely moves keeps float32's tolerance; one whose computation amplifies rounding (x̂₀ = (x_t − √(1 − ᾱ_t) ε̂) / √ᾱ_t
divides by 0.07 at the start of a diffusion chain) gets what the evidence asks, and says so.
"""

import math

import numpy as np

from .compare import ENVELOPE, tolerance_for
from .schema import ITEMS

# An envelope allows this many times the largest movement measured: another processor's rounding moved the DDPM's
# most sensitive values 1.5 times as far as the recorder's measurement on the machine that recorded them.
FACTOR = 4.0
# A value moved by this much of itself, plus this much, is one no envelope should admit where rounding does not
# (the test every model's recording passes: such a move fails exactly its case).
TELLS_APART = 1e-3
# A value's computation amplifies rounding where another rounding moved it this many times further than float32's
# own tolerance allows: the DDPM's x̂₀ at the start of a chain (170 times); not a deep network's last layers, which
# rounding moves a few times float32's tolerance.
AMPLIFIED = 10.0


def movement(reference, others: list) -> np.ndarray:
    """Element by element, the largest |other − reference| over the other replays of one item (infinity where one is
    not a number, or another shape: no envelope can hold that)."""
    want = np.asarray(reference, dtype=np.float64)
    moved = np.zeros(want.shape)
    for other in others:
        got = np.asarray(other, dtype=np.float64)
        if got.shape != want.shape:
            return np.full(want.shape, np.inf)
        moved = np.maximum(moved, np.where(np.isfinite(got), np.abs(got - want), np.inf))
    return moved


def _ceil(value: float, digits: int = 2) -> float:
    """`value` rounded up to `digits` significant digits: an envelope is read by people, and never narrowed."""
    if value <= 0 or not math.isfinite(value):
        return value
    scale = 10.0 ** (math.floor(math.log10(value)) - digits + 1)
    return math.ceil(value / scale * (1 - 1e-12)) * scale


def fit(values, moved: np.ndarray, rtol: float, atol: float) -> dict:
    """The envelope of an item whose recorded `values` moved by `moved` (element by element) under other roundings,
    with float32's `rtol` and `atol` as the floor: {"rtol", "atol", "moved" (the largest movement), "amplifies"
    (whether rounding alone moved an element AMPLIFIED times past float32's tolerance)}. Of the (rtol, atol) pairs
    that allow FACTOR·moved everywhere, the one whose allowances sum least: a relative term where the movement grows
    with the value, an absolute one where it does not."""
    size = np.abs(np.asarray(values, dtype=np.float64)).ravel()
    moved = np.asarray(moved, dtype=np.float64).ravel()
    need = FACTOR * moved
    largest = float(moved.max(initial=0.0))
    amplifies = bool(np.any(moved > AMPLIFIED * (atol + rtol * size)))
    if not np.all(np.isfinite(need)):
        return {"rtol": math.inf, "atol": math.inf, "moved": math.inf, "amplifies": True}
    ratios = need[size > 0] / size[size > 0]
    candidates = np.unique(np.concatenate(([rtol], np.quantile(ratios[ratios > rtol], np.linspace(0, 1, 65))
                                           if np.any(ratios > rtol) else [])))
    best = None
    for r in candidates:
        a = max(atol, float(np.max(need - r * size, initial=0.0)))
        cost = a * size.size + r * float(size.sum())
        if best is None or cost < best[0]:
            best = (cost, float(r), a)
    _, r, a = best
    return {"rtol": _ceil(r) if r > rtol else rtol, "atol": _ceil(a) if a > atol else atol, "moved": largest,
            "amplifies": amplifies}


def tells_apart(envelope: dict) -> bool:
    """Whether a value moved by TELLS_APART of itself plus TELLS_APART fails under the envelope, whatever the value:
    atol + rtol·|v| < TELLS_APART·(1 + |v|) for every v."""
    return envelope["atol"] < TELLS_APART and envelope["rtol"] <= TELLS_APART


def amplified(item: dict) -> str | None:
    """What a page says under a recorded item whose computation amplifies rounding; None for any other."""
    envelope = item.get("envelope")
    if not envelope or not envelope["amplifies"]:
        return None
    return (f"Rounding is amplified here: under other roundings (other kernels, nudged outputs) these values moved by "
            f"up to {envelope['moved']:.2g} when they were recorded, far past float32's tolerance, so each is checked "
            f"within {envelope['atol']:.2g} + {envelope['rtol']:.2g}·|value|.")


def described(manifest: dict) -> dict | None:
    """What a model's page says of where its numbers come from: the machine that recorded them, how the envelopes
    were measured, how many values rounding was measured to move past float32's tolerance (and which), and the
    iterated processes checked step by step; None for a recording made before envelopes were (the seed's)."""
    rounding = manifest["experiment"].get("rounding")
    if rounding is None:
        return None
    floor = tolerance_for(manifest)
    items = [(case, item) for case in manifest["experiment"]["cases"] for _, group, _ in ITEMS
             for item in case.get(group, [])]
    widened = [(case, item) for case, item in items if floor.for_field(item, ENVELOPE).widened]
    return {"recorded_on": manifest["provenance"].get("recordedOn"), "factor": rounding["factor"],
            "measured_by": rounding["measuredBy"], "floor": {"rtol": floor.rtol, "atol": floor.atol},
            "values": len(items), "widened": len(widened),
            "amplified": [{"case": case["label"], "item": item["label"], "moved": item[ENVELOPE]["moved"]}
                          for case, item in widened if item[ENVELOPE]["amplifies"]],
            "processes": [{"case": case["label"], "key": process["key"], "steps": len(process["states"])}
                          for case in manifest["experiment"]["cases"] for process in case.get("steps", [])]}
