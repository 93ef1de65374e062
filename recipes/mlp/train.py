"""Train the XOR network by back-propagation and store its weights beside this file.

    python train.py          # train (well under a second), write weights.safetensors, print the error
    python train.py --check  # retrain in memory and compare with the stored weights; exit status 1 if they differ
    python train.py --knob data=circles --knob hidden=8   # a variant (recipe.toml's knobs), in variants/<id>/

Needs torch, safetensors and the recipe kit (recipekit: the training loop). The data is XOR's four cases.
"""

from collections.abc import Mapping
from pathlib import Path

import torch
from torch import Tensor

from recipekit import knobs, training, weights
from recipekit.script import package

__package__ = package(__file__, __package__)  # python train.py: its folder is the package the server loads
from .model import MLP, WEIGHTS, MLPConfig, dataset
from .run import SIDE, picture

TRAIN_SEED = 1986  # the initial weights (Rumelhart, Hinton & Williams, 1986); seed 8 gets stuck: README
KNOBS = knobs.declared(Path(__file__).parent)  # learning_rate (the paper's η), hidden, data, noise, steps
RECORDED = knobs.chosen(KNOBS, {})  # every knob at its default: the recorded model (2,000 steps, η = 0.5, XOR)
MOMENTUM = 0.9  # the paper's α
PICTURES = 20  # how many times a watched training draws its decision regions
# Retraining reproduces the stored weights to within this (max |difference|): the same torch build gives
# identical bits; another build may round a few sums differently.
RETRAIN_TOLERANCE = 1e-4
# Where the kernels round otherwise (another vendor's processor), a retraining reaches other weights: what it
# guarantees there is what the model does, each figure within its bound of the stored one.
ELSEWHERE = training.Elsewhere(
    0.01,
    "1e-6 apart seen on another vendor's processor",
    {
        "error": training.Bound(0.0001, "the mean squared error on XOR's four cases, about 3e-4"),
    },
)


def squared_error(model: MLP, x: Tensor, target: Tensor) -> Tensor:
    """The mean squared difference of the outputs from the answers."""
    return ((model(x) - target) ** 2).mean()


def train(settings: Mapping[str, knobs.Value] = RECORDED) -> training.Fitted:
    """Gradient descent with momentum on all the cases at once, on one thread: the model and its error after every
    step (an epoch is the whole data: XOR's four cases as the paper had them, unless a knob moved it)."""
    with training.one_thread(TRAIN_SEED):
        model = MLP(MLPConfig(hidden=int(settings["hidden"])))
        optimizer = torch.optim.SGD(model.parameters(), lr=float(settings["learning_rate"]), momentum=MOMENTUM)
        x, target = dataset(str(settings["data"]), float(settings["noise"]))
        steps = int(settings["steps"])
        return training.fit(
            model,
            optimizer,
            steps,
            lambda: [None],
            lambda _: squared_error(model, x, target),
            draw=lambda m: picture(m, x, target, str(settings["data"]), SIDE),  # the regions as it learns
            draw_every=max(1, steps // PICTURES),
        )


def trained(settings: Mapping[str, knobs.Value] = RECORDED) -> training.Trained:
    fitted = train(settings)
    x, target = dataset(str(settings["data"]), float(settings["noise"]))
    with torch.no_grad():
        error = squared_error(fitted.model, x, target).item()
    return training.Trained(
        files={
            WEIGHTS: (
                weights.state_of(fitted.model),
                training.metadata(
                    error=error, loss_per_epoch=fitted.losses, train_seed=TRAIN_SEED, epochs=int(settings["steps"])
                ),
            )
        },
        summary=f"mean squared error {error:.6f} on its {len(x)} cases after {settings['steps']} steps",
    )


def main(argv: list[str]) -> int:
    return training.train_main(argv, trained, RETRAIN_TOLERANCE, ELSEWHERE, knobs=KNOBS)


if __name__ == "__main__":
    training.run(main)
