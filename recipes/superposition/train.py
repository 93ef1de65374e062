"""Train the toy models of superposition, one for each sparsity, and store their weights beside them.

    python train.py          # train (seconds on one CPU core), write weights.safetensors, print what each learned
    python train.py --check  # retrain in memory and compare with the stored weights; exit status 1 if they differ

Needs torch, safetensors and the recipe kit (recipekit: the training loop). The data is made here, fresh for every
step from a seeded generator: each feature is zero with the model's sparsity, else uniform on [0, 1].
"""

import torch
from torch import Tensor

from recipekit import training, weights
from recipekit.script import package

__package__ = package(__file__, __package__)  # python train.py: its folder is the package the server loads
from .model import WEIGHTS, ToyConfig, ToyModel, weighted_loss

TRAIN_SEED = 2022  # initial weights and every batch (the paper's year)
HELD_OUT_SEED = 5
ROUNDS = 40  # a round is STEPS steps, then the held-out loss of every model
TRIES = 4  # models trained for each sparsity from other initial weights: the one with the lowest held-out loss is kept
STEPS = 250
BATCH = 1024
LEARNING_RATE = 1e-3
REPRESENTED = 0.5  # a feature whose column is longer than this is represented (a trained one is near 1, or near 0)
RETRAIN_TOLERANCE = 1e-4
ELSEWHERE = training.Elsewhere(
    1e-2,
    "5,000 steps of Adam amplify a last-bit difference in the sums",
    {"features_represented": training.Bound(0, "a count of columns near 1 or near 0: rounding moves none across 0.5")},
)


def features(count: int, generator: torch.Generator, config: ToyConfig | None = None) -> Tensor:
    """`count` batches of every model's features (count, models, features): each zero with its model's sparsity,
    else uniform on [0, 1]."""
    config = config or ToyConfig()
    shape = (count, len(config.sparsities), config.n_features)
    values = torch.rand(shape, generator=generator)
    kept = torch.rand(shape, generator=generator) >= torch.tensor(config.sparsities)[:, None]
    return values * kept


def held_out(config: ToyConfig | None = None) -> Tensor:
    return features(4096, torch.Generator().manual_seed(HELD_OUT_SEED), config)


def represented(model: ToyModel) -> Tensor:
    """How many features each model writes in its two dimensions (models,): columns longer than REPRESENTED."""
    return (model.W.norm(dim=1) > REPRESENTED).sum(-1)


def train() -> tuple[ToyModel, training.Fitted]:
    """Adam on fresh batches from a seeded generator, TRIES models for each sparsity at once, on one thread so that
    every machine sums alike; then, for each sparsity, the model with the lowest held-out loss (a try can settle in a
    worse arrangement: four features as two opposite pairs where five fit). The kept models, and the training."""
    config = ToyConfig()
    tried = ToyConfig(sparsities=tuple(s for s in config.sparsities for _ in range(TRIES)))
    with training.one_thread(TRAIN_SEED):
        model = ToyModel(tried)
        optimizer = torch.optim.Adam(model.parameters(), lr=LEARNING_RATE)
        data = torch.Generator().manual_seed(TRAIN_SEED)
        test = held_out(tried)

        def measured(m: ToyModel) -> dict[str, float]:
            best = weighted_loss(m, test).view(-1, TRIES).min(1).values
            return {f"loss_s{s}": v for s, v in zip(config.sparsities, best.tolist(), strict=True)}

        fitted = training.fit(
            model,
            optimizer,
            ROUNDS,
            lambda: [features(BATCH, data, tried) for _ in range(STEPS)],
            lambda batch: weighted_loss(model, batch).sum(),  # each model's loss moves its own weights alone
            evaluate=measured,
        )
    chosen = weighted_loss(model, test).view(-1, TRIES).argmin(1)  # (sparsities,)
    kept = ToyModel(config)
    with torch.no_grad():
        rows = torch.arange(len(config.sparsities)) * TRIES + chosen
        kept.W.copy_(model.W[rows])
        kept.b.copy_(model.b[rows])
    return kept.eval(), fitted


def trained() -> training.Trained:
    model, fitted = train()
    counts = represented(model).tolist()
    losses = weighted_loss(model, held_out()).tolist()
    return training.Trained(
        files={
            WEIGHTS: (
                weights.state_of(model),
                training.metadata(
                    features_represented=counts,
                    held_out_loss=losses,
                    loss_per_epoch=fitted.losses,
                    train_seed=TRAIN_SEED,
                    rounds=ROUNDS,
                    steps=STEPS,
                    tries=TRIES,
                ),
            )
        },
        summary="features represented at sparsity "
        + ", ".join(f"{s}: {c}" for s, c in zip(model.config.sparsities, counts, strict=True)),
    )


def main(argv: list[str]) -> int:
    return training.train_main(argv, trained, RETRAIN_TOLERANCE, ELSEWHERE)


if __name__ == "__main__":
    training.run(main)
