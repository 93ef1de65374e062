"""Train the XOR network by back-propagation and store its weights beside this file.

    python train.py          # train (well under a second), write weights.safetensors, print the error
    python train.py --check  # retrain in memory and compare with the stored weights; exit status 1 if they differ

Needs torch, safetensors and the recipe kit (recipekit: the training loop). The data is XOR's four cases.
"""

import torch
from torch import Tensor

from recipekit import training, weights
from recipekit.script import package

__package__ = package(__file__, __package__)  # python train.py: its folder is the package the server loads
from .model import MLP, WEIGHTS, MLPConfig, xor

TRAIN_SEED = 1986  # the initial weights (Rumelhart, Hinton & Williams, 1986); seed 8 gets stuck: README
EPOCHS = 2000  # each a step on all four cases (the paper's batch learning)
LEARNING_RATE = 0.5  # the paper's η
MOMENTUM = 0.9  # the paper's α
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


def train() -> training.Fitted:
    """Gradient descent with momentum on the four cases at once, on one thread: the model and its error after
    every step (an epoch is the four cases)."""
    with training.one_thread(TRAIN_SEED):
        model = MLP(MLPConfig())
        optimizer = torch.optim.SGD(model.parameters(), lr=LEARNING_RATE, momentum=MOMENTUM)
        x, target = xor()
        return training.fit(model, optimizer, EPOCHS, lambda: [None], lambda _: squared_error(model, x, target))


def trained() -> training.Trained:
    fitted = train()
    with torch.no_grad():
        error = squared_error(fitted.model, *xor()).item()
    return training.Trained(
        files={
            WEIGHTS: (
                weights.state_of(fitted.model),
                training.metadata(error=error, loss_per_epoch=fitted.losses, train_seed=TRAIN_SEED, epochs=EPOCHS),
            )
        },
        summary=f"mean squared error {error:.6f} on XOR's four cases after {EPOCHS} steps",
    )


def main(argv: list[str]) -> int:
    return training.train_main(argv, trained, RETRAIN_TOLERANCE, ELSEWHERE)


if __name__ == "__main__":
    training.run(main)
