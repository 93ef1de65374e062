"""One sparsity's model with your edits to W: features dropped, features turned.

    python lab.py 5                   # the model of sparsity 0.9 as trained
    python lab.py 5 --drop 4          # without feature 4
    python lab.py 5 --turn 0 30       # feature 0's column turned by 30 degrees

Needs torch, safetensors, model.py, train.py and run.py beside this file.
"""

import argparse
import json
import math

import torch

from recipekit.items import metric
from recipekit.script import package

__package__ = package(__file__, __package__)  # python lab.py: its folder is the package the server loads
from .model import build_model, weighted_loss
from .run import sparsity_case
from .train import held_out


@torch.no_grad()
def live_run(model: int = 5, drop: list[int] | None = None, turn: list[float] | None = None) -> dict:
    """The model of the `model`-th sparsity with its W edited: each feature in `drop` unwritten (its column zeroed)
    and each feature's column turned by `turn`'s degrees (anticlockwise); the case as the recorder records one, the
    held-out loss of the model as trained beside it."""
    edited = build_model()
    W = edited.W[model]  # (hidden, features), edited in place
    for feature, degrees in enumerate(turn or []):
        angle = math.radians(degrees)
        rotation = torch.tensor([[math.cos(angle), -math.sin(angle)], [math.sin(angle), math.cos(angle)]])
        W[:, feature] = rotation @ W[:, feature]
    for feature in drop or []:
        W[:, feature] = 0
    case = sparsity_case(edited, model)
    trained = weighted_loss(build_model(), held_out())[model]
    case["metrics"].append(metric("trained_loss", "The same, with W as trained", trained))
    return case


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("model", type=int)
    parser.add_argument("--drop", type=int, nargs="*", default=[])
    parser.add_argument("--turn", type=float, nargs=2, action="append", default=[], metavar=("FEATURE", "DEGREES"))
    args = parser.parse_args()
    turns = [0.0] * 5
    for feature, degrees in args.turn:
        turns[int(feature)] = degrees
    found = live_run(args.model, args.drop, turns)
    print(json.dumps({m["key"]: m["value"] for m in found["metrics"]}, indent=1))
