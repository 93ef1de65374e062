"""Train the graph convolutional network on Zachary's karate club with two members' sides given (Mr. Hi's and the
Officer's), and store its weights beside this file.

    python train.py          # train (under a second), write weights.safetensors, print the accuracy on the
                             # other 32 members
    python train.py --check  # retrain in memory and compare with the stored weights; exit status 1 if they differ

Needs torch, safetensors, the recipe kit and karate.safetensors (python data.py writes it from networkx). The lab
trains the same way on the graph and the members it is given.
"""

import torch
from torch import Tensor, nn

from recipekit import training, weights
from recipekit.script import package

__package__ = package(__file__, __package__)  # python train.py: its folder is the package the server loads
from .data import karate
from .model import GCN, WEIGHTS, GCNConfig, adjacency, features

TRAIN_SEED = 2017  # initial weights and dropout (Kipf & Welling, 2017)
EPOCHS = 200
LEARNING_RATE = 0.01
WEIGHT_DECAY = 5e-4  # the paper's L2 penalty
GIVEN = (0, 33)  # the members whose sides are given: Mr. Hi (side 0) and the Officer (side 1)
# Retraining reproduces the stored weights to within this (max |difference|): the same torch build gives
# identical bits; another build may round a few sums differently.
RETRAIN_TOLERANCE = 1e-3
# Where the kernels round otherwise (another vendor's processor), a retraining reaches other weights: what it
# guarantees there is what the model does, each figure within its bound of the stored one.
ELSEWHERE = training.Elsewhere(
    0.05,
    "3e-7 apart seen on another vendor's processor",
    {
        "accuracy": training.Bound(0.0625, "the 32 members not given: 2 of them"),
    },
)


def train(edges: Tensor | list, given: tuple[int, int] = GIVEN) -> training.Fitted:
    """Full-batch Adam on the cross entropy of the two given members only (given[0] on side 0, given[1] on side 1),
    every other member unlabelled (semi-supervised), with dropout from the seed, on one thread: the model (in eval
    mode) and each epoch's loss."""
    a, x = adjacency(edges), features()
    labels = torch.tensor([0, 1])
    with training.one_thread(TRAIN_SEED):
        model = GCN(GCNConfig())
        optimizer = torch.optim.Adam(model.parameters(), lr=LEARNING_RATE, weight_decay=WEIGHT_DECAY)

        def loss_of(_: None) -> Tensor:
            return nn.functional.cross_entropy(model(x, a)[list(given)], labels)

        return training.fit(model, optimizer, EPOCHS, lambda: [None], loss_of)


@torch.no_grad()
def accuracy(model: GCN, edges: Tensor | list, sides: Tensor, given: tuple[int, int] = GIVEN) -> float:
    """The share of the members not given whose predicted side is the side they joined."""
    predicted = model(features(), adjacency(edges)).argmax(1)
    others = [m for m in range(len(sides)) if m not in given]
    return (predicted[others] == sides[others]).double().mean().item()


def trained() -> training.Trained:
    graph = karate()
    fitted = train(graph["edges"])
    right = accuracy(fitted.model, graph["edges"], graph["sides"])
    return training.Trained(
        files={
            WEIGHTS: (
                weights.state_of(fitted.model),
                training.metadata(
                    accuracy=right,
                    loss_per_epoch=fitted.losses,
                    train_seed=TRAIN_SEED,
                    epochs=EPOCHS,
                    given=",".join(map(str, GIVEN)),
                ),
            )
        },
        summary=f"{right:.1%} of the 32 members not given placed on the side they joined; loss per epoch "
        + ", ".join(f"{x:.4f}" for x in fitted.losses[::20]),
    )


def main(argv: list[str]) -> int:
    return training.train_main(argv, trained, RETRAIN_TOLERANCE, ELSEWHERE)


if __name__ == "__main__":
    training.run(main)
