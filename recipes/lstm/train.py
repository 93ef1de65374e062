"""Train the bracket-counting LSTM on strings this file generates, and store its weights beside it.

    python train.py          # train (seconds on one CPU core), write weights.safetensors and
                             # snapshots.safetensors, print the held-out accuracy
    python train.py --check  # retrain in memory and compare with the stored files; exit status 1 if they differ

Needs torch, safetensors and the recipe kit (recipekit: the training loop). The data is made here: random
strings of brackets that never close more than they opened and never nest deeper than 8, each token labelled
with the depth it leaves.
"""

import json

import torch
from torch import Tensor, nn

from recipekit import training, weights
from recipekit.script import package

__package__ = package(__file__, __package__)  # python train.py: its folder is the package the server loads
from .model import SNAPSHOTS, WEIGHTS, BracketLSTM, LSTMConfig, depths_of

TRAIN_SEED = 1997  # initial weights, the training strings and their order (Hochreiter & Schmidhuber, 1997)
TEST_SEED = 2000  # the held-out strings (Gers et al., 2000)
TRAIN_STRINGS, TEST_STRINGS = 2000, 500
LENGTHS = (2, 20)  # string lengths, both included; the recorded cases also try longer ones
EPOCHS = 15
BATCH = 32
LEARNING_RATE = 1e-2
SNAPSHOT_EPOCHS = (0, 1, 3, 10)  # the weights kept on the way (0 is the initialisation)
# Retraining reproduces the stored weights to within this (max |difference|): the same torch build gives
# identical bits; another build may round a few sums differently.
RETRAIN_TOLERANCE = 1e-3
# Where the kernels round otherwise (another vendor's processor), a retraining reaches other weights: what it
# guarantees there is what the model does, each figure within its bound of the stored one.
ELSEWHERE = training.Elsewhere(
    1.0,
    "15 epochs of Adam amplify a last-bit difference: 0.14 apart seen on another vendor's processor",
    {
        "token_accuracy": training.Bound(0.01, "the held-out tokens: 1 in 100"),
        "string_accuracy": training.Bound(0.02, "the held-out strings: 10 of 500"),
    },
)


def bracket_strings(
    count: int, seed: int, lengths: tuple[int, int] = LENGTHS, deepest: int = LSTMConfig.depths - 1
) -> list[list[int]]:
    """Random strings of brackets (0 opens, 1 closes) that never go below depth 0 nor above `deepest`."""
    generator = torch.Generator().manual_seed(seed)
    strings = []
    for _ in range(count):
        length = int(torch.randint(lengths[0], lengths[1] + 1, (), generator=generator))
        depth, tokens = 0, []
        for _ in range(length):
            opens = depth == 0 or (depth < deepest and bool(torch.rand((), generator=generator) < 0.5))
            tokens.append(0 if opens else 1)
            depth += 1 if opens else -1
        strings.append(tokens)
    return strings


def batch_of(strings: list[list[int]]) -> tuple[Tensor, Tensor]:
    """Tokens (B, T) padded with 0 and depths (B, T) padded with -100, which the loss ignores."""
    longest = max(map(len, strings))
    tokens = torch.zeros(len(strings), longest, dtype=torch.int64)
    depths = torch.full((len(strings), longest), -100, dtype=torch.int64)
    for row, string in enumerate(strings):
        tokens[row, : len(string)] = torch.tensor(string)
        depths[row, : len(string)] = torch.tensor(depths_of(string))
    return tokens, depths


@torch.no_grad()
def scores(model: BracketLSTM, strings: list[list[int]]) -> dict[str, float]:
    """Held-out accuracy per token, and the share of strings whose every depth is right."""
    tokens, depths = batch_of(strings)
    right = (model(tokens).argmax(-1) == depths) | (depths == -100)
    counted = depths != -100
    return {
        "token_accuracy": (right & counted).sum().item() / counted.sum().item(),
        "string_accuracy": right.all(1).float().mean().item(),
    }


def train() -> training.Fitted:
    """Adam on mini-batches in a seeded order, on one thread so that every machine sums alike: the model, its
    weights before each of SNAPSHOT_EPOCHS, and the mean training loss of every epoch."""
    with training.one_thread(TRAIN_SEED):
        model = BracketLSTM(LSTMConfig())
        optimizer = torch.optim.Adam(model.parameters(), lr=LEARNING_RATE)
        strings = bracket_strings(TRAIN_STRINGS, TRAIN_SEED)
        order = torch.Generator().manual_seed(TRAIN_SEED)

        def loss_of(batch: Tensor) -> Tensor:
            tokens, depths = batch_of([strings[i] for i in batch])
            return nn.functional.cross_entropy(model(tokens).flatten(0, 1), depths.flatten())

        return training.fit(
            model,
            optimizer,
            EPOCHS,
            lambda: torch.randperm(len(strings), generator=order).split(BATCH),
            loss_of,
            keep=SNAPSHOT_EPOCHS,
        )


def trained() -> training.Trained:
    fitted = train()
    held_out = scores(fitted.model, bracket_strings(TEST_STRINGS, TEST_SEED))
    return training.Trained(
        files={
            WEIGHTS: (
                weights.state_of(fitted.model),
                training.metadata(
                    token_accuracy=held_out["token_accuracy"],
                    string_accuracy=held_out["string_accuracy"],
                    loss_per_epoch=fitted.losses,
                    train_seed=TRAIN_SEED,
                    test_seed=TEST_SEED,
                    epochs=EPOCHS,
                ),
            ),
            SNAPSHOTS: (
                weights.kept(fitted.snapshots),
                {
                    "stages": json.dumps(weights.stages(SNAPSHOT_EPOCHS)),
                    "trained": f"after {EPOCHS} epochs (the recorded weights)",
                },
            ),
        },
        summary=f"held-out accuracy {held_out['token_accuracy']:.4f} per token, {held_out['string_accuracy']:.4f} of "
        f"{TEST_STRINGS} strings wholly right",
    )


def main(argv: list[str]) -> int:
    return training.train_main(argv, trained, RETRAIN_TOLERANCE, ELSEWHERE)


if __name__ == "__main__":
    training.run(main)
