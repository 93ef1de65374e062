"""Train the ResNet on scikit-learn's 8x8 digits and store its weights beside this file.

    python train.py          # train (seconds on one CPU core), write weights.safetensors, print the test accuracy
    python train.py --check  # retrain in memory and compare with the stored weights; exit status 1 if they differ

Needs torch, scikit-learn (the digits ship with it), safetensors and the recipe kit (recipekit: the digits split
and the training loop). Replaying the recipe afterwards needs no scikit-learn: the held-out digits are stored
with the kit.
"""

import torch
from torch import Tensor, nn

from recipekit import digits, training, weights
from recipekit.digits import pixels
from recipekit.script import package

__package__ = package(__file__, __package__)  # python train.py: its folder is the package the server loads
from .model import WEIGHTS, ResNet, ResNetConfig

TRAIN_SEED = 2015  # initial weights and batch order (He et al., 2015)
EPOCHS = 30
BATCH = 32
LEARNING_RATE = 5e-3
# Retraining reproduces the stored weights to within this (max |difference|): the same torch build gives
# identical bits; another build may round a few sums differently.
RETRAIN_TOLERANCE = 1e-3
# Where the kernels round otherwise (another vendor's processor), a retraining reaches other weights: what it
# guarantees there is what the model does, each figure within its bound of the stored one.
ELSEWHERE = training.Elsewhere(
    2.0,
    "30 epochs with batch statistics amplify a last-bit difference: 0.64 apart seen (a running variance) "
    "on another vendor's processor",
    {
        "test_accuracy": training.Bound(0.02, "the held-out digits: 7 of 360"),
    },
)


@torch.no_grad()
def accuracy(model: ResNet, images: Tensor, labels: Tensor) -> float:
    return digits.accuracy(model(pixels(images)).argmax(-1), labels)


def train(split: dict[str, Tensor]) -> training.Fitted:
    """Adam on mini-batches in a seeded order (BatchNorm learning its running statistics as it goes), on one
    thread so that every machine sums alike: the model, the mean training loss of every epoch and the test accuracy
    after each."""
    with training.one_thread(TRAIN_SEED):
        model = ResNet(ResNetConfig())
        optimizer = torch.optim.Adam(model.parameters(), lr=LEARNING_RATE)
        order = torch.Generator().manual_seed(TRAIN_SEED)
        x, y = pixels(split["train_images"]), split["train_labels"]
        return training.fit(
            model,
            optimizer,
            EPOCHS,
            lambda: torch.randperm(len(y), generator=order).split(BATCH),
            lambda batch: nn.functional.cross_entropy(model(x[batch]), y[batch]),
            evaluate=digits.tested(accuracy, split),
        )


def trained() -> training.Trained:
    split = digits.split()
    fitted = train(split)
    test_accuracy = accuracy(fitted.model, split["test_images"], split["test_labels"])
    return training.Trained(
        files={
            WEIGHTS: (
                weights.state_of(fitted.model),
                training.metadata(  # running statistics included
                    test_accuracy=test_accuracy,
                    loss_per_epoch=fitted.losses,
                    train_seed=TRAIN_SEED,
                    split_seed=digits.SPLIT_SEED,
                    epochs=EPOCHS,
                ),
            )
        },
        summary=f"test accuracy {test_accuracy:.4f} on {digits.TEST_SIZE} held-out digits; loss per epoch "
        + ", ".join(f"{x:.3f}" for x in fitted.losses),
        same={"same test split": digits.same_split(split)},
    )


def main(argv: list[str]) -> int:
    return training.train_main(argv, trained, RETRAIN_TOLERANCE, ELSEWHERE)


if __name__ == "__main__":
    training.run(main)
