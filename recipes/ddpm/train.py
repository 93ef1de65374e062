"""Train the diffusion model's noise predictor on scikit-learn's 8x8 digits and store its weights beside this file.

    python train.py          # train (about two minutes on one CPU core), write weights.safetensors, print the
                             # held-out loss
    python train.py --check  # retrain in memory and compare with the stored weights; exit status 1 if they differ

Needs torch, scikit-learn (the digits ship with it), safetensors and the recipe kit (recipekit: the digits split
and the training loop). Replaying the recipe afterwards needs no scikit-learn: the held-out digits are stored
with the kit.
"""

import torch
from torch import Tensor

from recipekit import digits, training, weights
from recipekit.script import package

__package__ = package(__file__, __package__)  # python train.py: its folder is the package the server loads
from .model import WEIGHTS, DDPMConfig, Schedule, UNet, simple_loss, to_model
from .run import HELD_OUT_SEED, held_out_loss

TRAIN_SEED = 2020  # initial weights, batch order, timesteps and noise (Ho, Jain & Abbeel, 2020)
EPOCHS = 200
BATCH = 64
LEARNING_RATE = 2e-3
# Retraining reproduces the stored weights to within this (max |difference|): the same torch build on the same
# machine gives identical bits; on another CPU a few sums round differently, and over 200 epochs that drifted the
# weights by up to 1.07e-3 (seen on an AMD EPYC with AVX2, the held-out loss the same 0.0644).
RETRAIN_TOLERANCE = 5e-3
# Where the kernels round otherwise (another vendor's processor), a retraining reaches other weights: what it
# guarantees there is what the model does, each figure within its bound of the stored one.
ELSEWHERE = training.Elsewhere(
    0.05,
    "1.1e-3 apart seen on another vendor's processor",
    {
        "test_loss": training.Bound(0.002, "the held-out L_simple, a mean over random timesteps: about 3% of it"),
    },
)


def train(split: dict[str, Tensor]) -> training.Fitted:
    """Adam on mini-batches in a seeded order, each image at a uniform timestep with fresh noise (the paper's
    Algorithm 1), on one thread so that every machine sums alike: the model and each epoch's mean loss."""
    config = DDPMConfig()
    schedule = Schedule(config)
    with training.one_thread(TRAIN_SEED):
        model = UNet(config)
        optimizer = torch.optim.Adam(model.parameters(), lr=LEARNING_RATE)
        draw = torch.Generator().manual_seed(TRAIN_SEED)
        x0 = to_model(split["train_images"])

        def loss_of(batch: Tensor) -> Tensor:
            t = torch.randint(1, config.steps + 1, (len(batch),), generator=draw)
            noise = torch.randn(len(batch), 1, config.side, config.side, generator=draw)
            return simple_loss(model, schedule, x0[batch], t, noise).mean()

        return training.fit(
            model, optimizer, EPOCHS, lambda: torch.randperm(len(x0), generator=draw).split(BATCH), loss_of
        )


def trained() -> training.Trained:
    split = digits.split()
    fitted = train(split)
    loss = held_out_loss(fitted.model, split["test_images"])
    return training.Trained(
        files={
            WEIGHTS: (
                weights.state_of(fitted.model),
                training.metadata(
                    test_loss=loss,
                    loss_per_epoch=fitted.losses,
                    train_seed=TRAIN_SEED,
                    split_seed=digits.SPLIT_SEED,
                    epochs=EPOCHS,
                    held_out_seed=HELD_OUT_SEED,
                ),
            )
        },
        summary=f"held-out L_simple {loss:.4f} on {digits.TEST_SIZE} digits; loss per epoch "
        + ", ".join(f"{x:.4f}" for x in fitted.losses[::20]),
        same={"same test split": digits.same_split(split)},
    )


def main(argv: list[str]) -> int:
    return training.train_main(argv, trained, RETRAIN_TOLERANCE, ELSEWHERE)


if __name__ == "__main__":
    training.run(main)
