"""Train the LeNet on scikit-learn's 8x8 digits and store its weights beside this file.

    python train.py          # train (a few seconds on one CPU core), write weights.safetensors and
                             # snapshots.safetensors, print the test accuracy
    python train.py --check  # retrain in memory and compare with the stored files; exit status 1 if they differ
    python train.py --knob epochs=5 --knob train_size=200   # a variant (recipe.toml's knobs), in variants/<id>/

Needs torch, scikit-learn (the digits ship with it), safetensors and the recipe kit (recipekit: the digits split
and the training loop). Replaying the recipe afterwards needs no scikit-learn.
"""

import json
from collections.abc import Mapping
from pathlib import Path

import torch
from torch import Tensor, nn

from recipekit import digits, knobs, training, weights
from recipekit.digits import pixels
from recipekit.script import package

__package__ = package(__file__, __package__)  # python train.py: its folder is the package the server loads
from .model import SNAPSHOTS, WEIGHTS, LeNet, LeNetConfig

TRAIN_SEED = 1989  # initial weights and batch order (LeCun et al., 1989)
KNOBS = knobs.declared(Path(__file__).parent)  # learning_rate, epochs, train_size
RECORDED = knobs.chosen(KNOBS, {})  # every knob at its default: the recorded model (50 epochs, Adam at 5e-3)
BATCH = 16
# The weights kept on the way (after this many epochs; 0 is the initialisation), so that a reader can see
# where learning happened; the last stage is the trained weights themselves (weights.safetensors).
SNAPSHOT_EPOCHS = (0, 1, 3, 10)
# Retraining reproduces the stored weights to within this (max |difference|): the same torch build gives
# identical bits; another build may round a few sums differently.
RETRAIN_TOLERANCE = 1e-3
# Where the kernels round otherwise (another vendor's processor), a retraining reaches other weights: what it
# guarantees there is what the model does, each figure within its bound of the stored one.
ELSEWHERE = training.Elsewhere(
    0.05,
    "5e-6 apart seen on another vendor's processor",
    {
        "test_accuracy": training.Bound(0.02, "the held-out digits: 7 of 360"),
    },
)


@torch.no_grad()
def accuracy(model: LeNet, images: Tensor, labels: Tensor) -> float:
    return digits.accuracy(model(pixels(images)).argmax(-1), labels)


def kept(epochs: int) -> tuple[int, ...]:
    """The snapshots a training of `epochs` epochs reaches."""
    return tuple(epoch for epoch in SNAPSHOT_EPOCHS if epoch < epochs)  # kept before each of these epochs


def train(split: dict[str, Tensor], settings: Mapping[str, knobs.Value] = RECORDED) -> training.Fitted:
    """Adam on mini-batches in a seeded order, on one thread so that every machine sums alike: the model, its
    loss per epoch, its test accuracy after each and its weights before each of SNAPSHOT_EPOCHS. A variant may
    train on the first `train_size` training digits alone."""
    with training.one_thread(TRAIN_SEED):
        model = LeNet(LeNetConfig())
        optimizer = torch.optim.Adam(model.parameters(), lr=float(settings["learning_rate"]))
        order = torch.Generator().manual_seed(TRAIN_SEED)
        size = int(settings["train_size"])
        x, y = pixels(split["train_images"][:size]), split["train_labels"][:size]
        return training.fit(
            model,
            optimizer,
            int(settings["epochs"]),
            lambda: torch.randperm(len(y), generator=order).split(BATCH),
            lambda batch: nn.functional.cross_entropy(model(x[batch]), y[batch]),
            keep=kept(int(settings["epochs"])),
            evaluate=digits.tested(accuracy, split),
        )


def trained(settings: Mapping[str, knobs.Value] = RECORDED) -> training.Trained:
    split = digits.split()
    fitted = train(split, settings)
    epochs = int(settings["epochs"])
    test_accuracy = accuracy(fitted.model, split["test_images"], split["test_labels"])
    stages = weights.stages(kept(epochs))
    return training.Trained(
        files={
            WEIGHTS: (
                weights.state_of(fitted.model),
                training.metadata(
                    test_accuracy=test_accuracy,
                    loss_per_epoch=fitted.losses,
                    train_seed=TRAIN_SEED,
                    split_seed=digits.SPLIT_SEED,
                    epochs=epochs,
                ),
            ),
            SNAPSHOTS: (
                weights.kept(fitted.snapshots),
                {"stages": json.dumps(stages), "trained": f"after {epochs} epochs (the recorded weights)"},
            ),
        },
        summary=f"test accuracy {test_accuracy:.4f} on {digits.TEST_SIZE} held-out digits",
        same={"same test split": digits.same_split(split)},
    )


def main(argv: list[str]) -> int:
    return training.train_main(argv, trained, RETRAIN_TOLERANCE, ELSEWHERE, knobs=KNOBS)


if __name__ == "__main__":
    training.run(main)
