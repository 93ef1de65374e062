"""Train the variational autoencoder on scikit-learn's 8x8 digits and store its weights beside this file.

    python train.py          # train (about a minute on one CPU core), write weights.safetensors, print the
                             # held-out negative ELBO
    python train.py --check  # retrain in memory and compare with the stored weights; exit status 1 if they differ
    python train.py --knob beta=4 --knob epochs=20   # a variant (recipe.toml's knobs), in variants/<id>/

Needs torch, scikit-learn (the digits ship with it), safetensors and the recipe kit (recipekit: the digits split
and the training loop). Replaying the recipe afterwards needs no scikit-learn: the held-out digits are stored
with the kit.
"""

from collections.abc import Mapping
from pathlib import Path

import torch
from torch import Tensor

from recipekit import digits, knobs, training, weights
from recipekit.digits import pixels
from recipekit.script import package

__package__ = package(__file__, __package__)  # python train.py: its folder is the package the server loads
from .model import VAE, WEIGHTS, VAEConfig, loss_terms

TRAIN_SEED = 2013  # initial weights, batch order and the sampled noise (Kingma & Welling, 2013)
KNOBS = knobs.declared(Path(__file__).parent)  # beta (the KL term's weight), epochs
RECORDED = knobs.chosen(KNOBS, {})  # every knob at its default: the recorded model (β = 1, the ELBO; 200 epochs)
BATCH = 32
LEARNING_RATE = 3e-3
# Retraining reproduces the stored weights to within this (max |difference|): the same torch build gives
# identical bits; another build may round a few sums differently.
RETRAIN_TOLERANCE = 1e-3
# Where the kernels round otherwise (another vendor's processor), a retraining reaches other weights: what it
# guarantees there is what the model does, each figure within its bound of the stored one.
ELSEWHERE = training.Elsewhere(
    0.05,
    "2e-5 apart seen on another vendor's processor",
    {
        "test_loss": training.Bound(0.25, "the held-out negative ELBO, about 23 nats: 1% of it"),
    },
)


@torch.no_grad()
def held_out(model: VAE, images: Tensor) -> dict[str, float]:
    """The mean negative ELBO and its two terms over held-out images, with z = μ (no sampling)."""
    loss, reconstruction, kl = loss_terms(model, pixels(images))
    return {"loss": loss.mean().item(), "reconstruction": reconstruction.mean().item(), "kl": kl.mean().item()}


def train(split: dict[str, Tensor], settings: Mapping[str, knobs.Value] = RECORDED) -> training.Fitted:
    """Adam on mini-batches in a seeded order, each image's code sampled with seeded noise (one sample per
    image, as the paper's L = 1), minimising the negative ELBO (a variant: the reconstruction plus β times the KL
    term, as β-VAE), on one thread so that every machine sums alike: the model and the mean training loss of every
    epoch."""
    beta = float(settings["beta"])
    with training.one_thread(TRAIN_SEED):
        model = VAE(VAEConfig())
        optimizer = torch.optim.Adam(model.parameters(), lr=LEARNING_RATE)
        order = torch.Generator().manual_seed(TRAIN_SEED)
        x = pixels(split["train_images"])

        def loss_of(batch: Tensor) -> Tensor:
            noise = torch.randn(len(batch), model.config.latent, generator=order)  # after the batch's order
            _, reconstruction, kl = loss_terms(model, x[batch], noise)
            return (reconstruction + beta * kl).mean()  # β = 1: the negative ELBO, bit for bit

        return training.fit(
            model,
            optimizer,
            int(settings["epochs"]),
            lambda: torch.randperm(len(x), generator=order).split(BATCH),
            loss_of,
        )


def trained(settings: Mapping[str, knobs.Value] = RECORDED) -> training.Trained:
    split = digits.split()
    fitted = train(split, settings)
    test = held_out(fitted.model, split["test_images"])
    return training.Trained(
        files={
            WEIGHTS: (
                weights.state_of(fitted.model),
                training.metadata(
                    test_loss=test["loss"],
                    test_reconstruction=test["reconstruction"],
                    test_kl=test["kl"],
                    loss_per_epoch=fitted.losses,
                    train_seed=TRAIN_SEED,
                    split_seed=digits.SPLIT_SEED,
                    epochs=int(settings["epochs"]),
                ),
            )
        },
        summary=f"held-out negative ELBO {test['loss']:.3f} (reconstruction {test['reconstruction']:.3f}, KL "
        f"{test['kl']:.3f}) on {digits.TEST_SIZE} digits; loss per epoch "
        + ", ".join(f"{x:.3f}" for x in fitted.losses),
        same={"same test split": digits.same_split(split)},
    )


def main(argv: list[str]) -> int:
    return training.train_main(argv, trained, RETRAIN_TOLERANCE, ELSEWHERE, knobs=KNOBS)


if __name__ == "__main__":
    training.run(main)
