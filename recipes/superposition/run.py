"""Replay the recorded superposition cases and the five numerical checks.

    python run.py          # a readable table; exit status 1 when a check fails
    python run.py --json   # the same replay as JSON

Needs torch, safetensors, model.py and train.py (which makes the held-out features) beside this file.
"""

import json
import math
import sys
from functools import partial

import torch
from torch import Tensor

from recipekit import replay as kit
from recipekit import weights as stored
from recipekit.items import loss_curve, matrix, metric, vector
from recipekit.script import package

__package__ = package(__file__, __package__)  # python run.py: its folder is the package the server loads
from .model import SPARSITIES, WEIGHTS, ToyModel, build_model, weighted_loss
from .train import REPRESENTED, held_out

FEATURES = [f"feature {i}" for i in range(5)]
# A recorded input per sparsity: every feature at once, each at a value the model can be seen to keep or drop.
EXAMPLE = [0.9, 0.7, 0.5, 0.3, 0.1]


def case_id(sparsity: float) -> str:
    return f"sparsity-{round(100 * sparsity):02d}"


def angles(columns: Tensor) -> list[float]:
    """Each column's direction in degrees, from the first axis, anticlockwise (features,)."""
    return [math.degrees(math.atan2(y, x)) % 360 for x, y in columns.T.tolist()]


def gaps(columns: Tensor, kept: list[int]) -> list[float]:
    """The angles between neighbouring written features, going round the circle (one per written feature)."""
    around = sorted(angles(columns)[i] for i in kept)
    return [(around[(k + 1) % len(around)] - around[k]) % 360 for k in range(len(around))] if len(around) > 1 else []


@torch.no_grad()
def sparsity_case(model: ToyModel, index: int) -> dict:
    """One sparsity's model: where it writes each feature (W's columns, drawn as arrows), how long each column is,
    the biases, how much writing one feature moves every other's output (WᵀW), and the example read back."""
    W, b = model.W[index], model.b[index]  # (hidden, features), (features,)
    x = torch.zeros(1, len(SPARSITIES), 5)
    x[0, index] = torch.tensor(EXAMPLE)
    out = model(x)[0, index]
    norms = W.norm(dim=0)
    kept = [i for i, n in enumerate(norms.tolist()) if n > REPRESENTED]
    loss = weighted_loss(model, held_out())[index]
    return {
        "label": f"Sparsity {SPARSITIES[index]:g}: each feature zero {100 * SPARSITIES[index]:g}% of the time",
        "matrices": [
            matrix(
                "columns",
                "Where each feature is written in the two dimensions (a column of W)",
                W.T,
                rows=FEATURES,
                columns=["dimension 1", "dimension 2"],
            ),
            matrix(
                "interference",
                "How much writing one feature moves each feature's output (WᵀW)",
                W.T @ W,
                rows=FEATURES,
                columns=FEATURES,
            ),
        ],
        "vectors": [
            vector("lengths", "How strongly each feature is written (its column's length)", norms, names=FEATURES),
            vector("bias", "Each feature's bias", b, names=FEATURES),
            vector("example", "An example: every feature at once", EXAMPLE, names=FEATURES),
            vector("read_back", "The example read back out", out, names=FEATURES),
        ],
        "metrics": [
            metric("sparsity", "Sparsity: the chance that a feature is zero", SPARSITIES[index]),
            metric("features_written", "Features written (a column longer than 0.5) of 5", len(kept)),
            metric("held_out_loss", "Importance-weighted squared error on 4,096 held-out inputs", loss),
        ],
    }


@torch.no_grad()
def phase_case(model: ToyModel) -> dict:
    """Every sparsity at once: each feature's column length, the features written, and the held-out loss."""
    names = [f"S = {s:g}" for s in SPARSITIES]
    norms = model.W.norm(dim=1)  # (models, features)
    _, metadata = stored.read(WEIGHTS)
    return {
        "label": "Every sparsity: the phase diagram",
        "matrices": [
            matrix(
                "lengths_by_sparsity",
                "How strongly each feature is written, at each sparsity",
                norms,
                rows=names,
                columns=FEATURES,
            )
        ],
        "vectors": [
            vector(
                "features_written",
                "Features written of 5, at each sparsity",
                (norms > REPRESENTED).sum(-1),
                names=names,
            ),
            vector("held_out_losses", "Held-out loss, at each sparsity", weighted_loss(model, held_out()), names=names),
            loss_curve(metadata),
        ],
        "metrics": [metric("models", "Models, one per sparsity", len(SPARSITIES))],
    }


# The five checks. Each measures something that a broken recipe would get wrong, and says what it saw.

CHECK_PENTAGON = "At sparsity 0.9 all five features are written, each about 1 long, 72° apart: a pentagon"
CHECK_DENSE = "At sparsity 0 only the two most important features are written, at right angles"
CHECK_PHASE = "The features written grow with sparsity, from 2 of 5 (dense) to 5 of 5"
CHECK_BIAS = (
    "A dropped feature answers its mean (bias about 0.5); five sharing two dimensions cut interference (bias < 0)"
)
CHECK_REPRODUCED = "The stored weights reproduce every sparsity's held-out loss measured when they were trained"
LENGTH = (0.8, 1.3)  # a written feature's column: about 1 (a little longer where a negative bias cuts into it)
ANGLE = 6.0  # degrees from the ideal: 72 for five, 90 for two
FLOAT32 = 1e-5  # a mean of 4,096 float32 squared errors summed in another order


def _index(sparsity: float) -> int:
    return SPARSITIES.index(sparsity)


@torch.no_grad()
def check_pentagon(model: ToyModel, sparsity: float = 0.9) -> dict:
    W = model.W[_index(sparsity)]
    lengths = W.norm(dim=0).tolist()
    between = gaps(W, list(range(5)))
    return {
        "passed": all(LENGTH[0] < n < LENGTH[1] for n in lengths) and all(abs(g - 72) < ANGLE for g in between),
        "detail": {"lengths": lengths, "angles_between_neighbours": between},
    }


@torch.no_grad()
def check_dense(model: ToyModel, sparsity: float = 0.0) -> dict:
    W = model.W[_index(sparsity)]
    lengths = W.norm(dim=0).tolist()
    kept = [i for i, n in enumerate(lengths) if n > REPRESENTED]
    between = gaps(W, kept)
    return {
        "passed": kept == [0, 1] and all(n < 0.1 for n in lengths[2:]) and abs(min(between) - 90) < ANGLE,
        "detail": {"lengths": lengths, "written": kept, "angle": min(between) if between else None},
    }


@torch.no_grad()
def check_phase(model: ToyModel) -> dict:
    counts = (model.W.norm(dim=1) > REPRESENTED).sum(-1).tolist()
    rising = all(a <= b for a, b in zip(counts, counts[1:], strict=False))
    return {
        "passed": rising and counts[0] == 2 and counts[-1] == 5,
        "detail": {str(s): c for s, c in zip(SPARSITIES, counts, strict=True)},
    }


@torch.no_grad()
def check_bias(model: ToyModel) -> dict:
    dense, sparse = model.b[_index(0.0)].tolist(), model.b[_index(0.9)].tolist()
    return {
        "passed": all(abs(v - 0.5) < 0.05 for v in dense[2:]) and all(v < -0.1 for v in sparse),
        "detail": {"dropped_features_bias_at_0": dense[2:], "bias_at_0.9": sparse},
    }


@torch.no_grad()
def check_reproduced(model: ToyModel) -> dict:
    _, metadata = stored.read(WEIGHTS)
    replayed, trained = weighted_loss(model, held_out()).tolist(), json.loads(metadata["held_out_loss"])
    worst = max(abs(a - b) for a, b in zip(replayed, trained, strict=True))
    found = kit.reproduced(worst, 0.0, FLOAT32, "a mean of 4,096 float32 squared errors, at each sparsity")
    found["detail"] |= {"replayed": replayed, "at_training": trained}
    return found


CHECKS = {
    CHECK_PENTAGON: check_pentagon,
    CHECK_DENSE: check_dense,
    CHECK_PHASE: check_phase,
    CHECK_BIAS: check_bias,
    CHECK_REPRODUCED: check_reproduced,
}


def replay(model: ToyModel | None = None, case: str | None = None) -> dict:
    """Every recorded case and every check, or the case named alone, on the stored weights unless a model is
    given."""
    model = model if model is not None else build_model()
    cases = {case_id(s): partial(sparsity_case, model, i) for i, s in enumerate(SPARSITIES)}
    cases["phase-diagram"] = partial(phase_case, model)
    return kit.cases(cases, {name: partial(check, model) for name, check in CHECKS.items()}, case)


if __name__ == "__main__":
    sys.exit(kit.main(replay, sys.argv[1:]))
