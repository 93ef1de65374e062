"""Train the GPT recipe to sort four digits, on problems this file generates, and store its weights beside it.

    python train.py          # train (about a minute on one CPU core), write weights.safetensors, print the
                             # held-out exact-match rate
    python train.py --check  # retrain in memory and compare with the stored weights; exit status 1 if they differ

Needs torch, safetensors and the recipe kit (recipekit: the training loop). The data is made here: every one of
the 10,000 problems of four digits, split by a seeded shuffle into 1,000 held out and 9,000 to train on, each
followed by "=" and its digits in order.
"""

import torch
from torch import Tensor, nn

from recipekit import training, weights
from recipekit.script import package

__package__ = package(__file__, __package__)  # python train.py: its folder is the package the server loads
from .model import DIGITS, EQUALS, GPT, WEIGHTS, GPTConfig

TRAIN_SEED = 1337  # initial weights, the split and the order of the batches (nanoGPT's seed)
HELD_OUT = 1000  # problems never trained on
EPOCHS = 10
BATCH = 64
LEARNING_RATE = 3e-3
# Retraining reproduces the stored weights to within this (max |difference|): the same torch build gives
# identical bits; another build may round a few sums differently.
RETRAIN_TOLERANCE = 1e-3
# Where the kernels round otherwise (another vendor's processor), a retraining reaches other weights: what it
# guarantees there is what the model does, each figure within its bound of the stored one.
ELSEWHERE = training.Elsewhere(
    1.0,
    "10 epochs of AdamW amplify a last-bit difference: 0.11 apart seen on another vendor's processor",
    {
        "exact_match": training.Bound(0.02, "the held-out problems: 20 of 1,000"),
    },
)


def problems() -> tuple[Tensor, Tensor]:
    """Every problem (10000, DIGITS), split into (training, held-out) by a seeded shuffle."""
    every = torch.cartesian_prod(*[torch.arange(10)] * DIGITS)  # (10000, DIGITS)
    order = torch.randperm(len(every), generator=torch.Generator().manual_seed(TRAIN_SEED))
    return every[order[HELD_OUT:]], every[order[:HELD_OUT]]


def held_out() -> Tensor:
    return problems()[1]


def solved(problem: Tensor) -> Tensor:
    """Problems (B, DIGITS) -> whole sequences (B, 2·DIGITS + 1): the problem, "=" and its digits in order."""
    return torch.cat([problem, torch.full((len(problem), 1), EQUALS), problem.sort(1).values], 1)


def answer_loss(logits: Tensor, sequences: Tensor) -> Tensor:
    """Cross entropy of the answer digits only, each predicted from everything before it: the problem's own
    digits are random, and nothing could predict them."""
    targets = sequences[:, 1:].clone()  # (B, 2·DIGITS): the token after each position
    targets[:, :DIGITS] = -100  # positions that predict a problem digit or "=": not scored
    return nn.functional.cross_entropy(logits.flatten(0, 1), targets.flatten())


@torch.no_grad()
def greedy(model: GPT, problem: Tensor) -> Tensor:
    """The answer (B, DIGITS) written after "=" one token at a time, each the likeliest."""
    ids = torch.cat([problem, torch.full((len(problem), 1), EQUALS)], 1)
    for _ in range(DIGITS):
        ids = torch.cat([ids, model(ids)[:, -1:].argmax(-1)], 1)
    return ids[:, DIGITS + 1 :]


@torch.no_grad()
def exact_match(model: GPT, problem: Tensor) -> float:
    """The share of problems whose answer is exactly their digits in order."""
    return (greedy(model, problem) == problem.sort(1).values).all(1).float().mean().item()


def train() -> training.Fitted:
    """AdamW on batches in a seeded order, on one thread so that every machine sums alike: the model and the
    mean training loss of every epoch."""
    with training.one_thread(TRAIN_SEED):
        model = GPT(GPTConfig())
        optimizer = torch.optim.AdamW(model.parameters(), lr=LEARNING_RATE, weight_decay=0.01)
        training_problems, _ = problems()
        order = torch.Generator().manual_seed(TRAIN_SEED)

        def loss_of(batch: Tensor) -> Tensor:
            sequences = solved(training_problems[batch])  # (B, 2·DIGITS + 1)
            return answer_loss(model(sequences[:, :-1]), sequences)

        return training.fit(
            model,
            optimizer,
            EPOCHS,
            lambda: torch.randperm(len(training_problems), generator=order).split(BATCH),
            loss_of,
        )


def trained() -> training.Trained:
    fitted = train()
    measured = exact_match(fitted.model, held_out())
    # The tied head is the embedding, so it is stored once (as wte.weight).
    return training.Trained(
        files={
            WEIGHTS: (
                weights.state_of(fitted.model, leave_out=("lm_head.weight",)),
                training.metadata(
                    exact_match=measured, loss_per_epoch=fitted.losses, train_seed=TRAIN_SEED, epochs=EPOCHS
                ),
            )
        },
        summary=f"held-out exact match {measured:.4f} of {HELD_OUT} problems; loss per epoch "
        + ", ".join(f"{x:.3f}" for x in fitted.losses),
    )


def main(argv: list[str]) -> int:
    return training.train_main(argv, trained, RETRAIN_TOLERANCE, ELSEWHERE)


if __name__ == "__main__":
    training.run(main)
