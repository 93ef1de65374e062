"""Replay the recorded VAE cases and the three numerical checks on the stored weights.

    python run.py          # a readable table; exit status 1 when a check fails
    python run.py --json   # the same replay as JSON

Needs torch, safetensors, model.py and the two .safetensors files beside this file.
"""

import json
import sys
from functools import partial

import torch
from torch import Tensor

from recipekit import digits
from recipekit import replay as kit
from recipekit import weights as stored
from recipekit.digits import pixels
from recipekit.items import matrix, metric, vector
from recipekit.script import package

__package__ = package(__file__, __package__)  # python run.py: its folder is the package the server loads
from .model import VAE, WEIGHTS, build_model, kl_term, loss_terms

# The recorded digits, by position in the test split (the LeNet recipe's split).
DIGITS = {"zero": 0, "three": 14, "seven": 5, "two": 345}
BETWEEN = ("three", "seven")  # the interpolation case walks from the first digit's code to the second's
STEPS = 8  # images along the interpolation
MAP_STEPS, MAP_EXTENT = 7, 2.4  # the latent map: 7 x 7 codes from -2.4 to 2.4 on each axis
NOISE_SEED = 1312  # the noise ε of the ELBO check (the paper: arXiv 1312.6114)


def test_split() -> tuple[Tensor, Tensor, dict[str, str]]:
    """The held-out digits (N, 8, 8) in grey levels 0..16, their labels (N,), and the weights' metadata."""
    images, labels = digits.held_out()
    return images, labels, stored.read(WEIGHTS)[1]


@torch.no_grad()
def decode(model: VAE, codes: Tensor) -> Tensor:
    """Codes (B, latent) as images (B, side, side) in grey levels: each pixel's probability of ink × 16."""
    return model.decoder(codes)[:, 0] * digits.LEVELS


@torch.no_grad()
def encode(model: VAE, image: list[list[int]]) -> tuple[Tensor, Tensor]:
    """A drawing's code: the mean μ and the standard deviation σ of q(z | x), each (latent,)."""
    mean, logvar = model.encoder(pixels(image))
    return mean[0], torch.exp(0.5 * logvar[0])


@torch.no_grad()
def run_case(model: VAE, image: list[list[int]], title: str = "Live run") -> dict:
    """A case in the manifest's shape: the drawing, its reconstruction from the most likely code z = μ, the
    code's mean and standard deviation, and the two terms of the negative ELBO (at z = μ)."""
    x = pixels(image)
    loss, reconstruction, kl = loss_terms(model, x)
    mean, sigma = encode(model, image)
    drawn = matrix("image", "Input image (grey levels 0-16)", [list(r) for r in image])
    decoded = decode(model, mean[None])[0]  # (side, side) grey levels
    rebuilt = matrix("reconstruction", "Reconstruction from z = μ (probability of ink × 16)", decoded)
    case = {
        "label": title,
        "matrices": [drawn, rebuilt],
        "vectors": [
            vector("mean", "Latent code: the mean μ of q(z | x), one value per dimension", mean.tolist()),
            vector("sigma", "Latent code: the standard deviation σ of q(z | x)", sigma.tolist()),
        ],
        "metrics": [
            metric("reconstruction_term", "Reconstruction term −log p(x | z = μ) (nats)", reconstruction.item()),
            metric("kl", "KL(q(z | x) ‖ N(0, I)) (nats)", kl.item()),
            metric("loss", "Negative ELBO: reconstruction + KL (nats)", loss.item()),
            digits.looks_like(image, "drawn_looks_like", "the drawing"),
            digits.looks_like(decoded, "looks_like", "the reconstruction"),
        ],
    }
    return case


@torch.no_grad()
def interpolation(model: VAE, a: list[list[int]], b: list[list[int]], steps: int = STEPS) -> tuple[Tensor, Tensor]:
    """The codes (steps, latent) on the straight line from a's mean to b's, and their images (steps, side, side)."""
    start, end = encode(model, a)[0], encode(model, b)[0]
    t = torch.linspace(0, 1, steps)[:, None]
    codes = (1 - t) * start + t * end
    return codes, decode(model, codes)


@torch.no_grad()
def latent_map(model: VAE, steps: int = MAP_STEPS, extent: float = MAP_EXTENT) -> tuple[Tensor, Tensor]:
    """The decoder's image at every code of a steps x steps grid over [-extent, extent]²: the axis (steps,) and
    the images (steps, steps, side, side), rows running down z₂ from +extent, columns along z₁."""
    axis = torch.linspace(-extent, extent, steps)
    codes = torch.stack([axis.repeat(steps), axis.flip(0).repeat_interleave(steps)], dim=1)  # (steps², 2)
    images = decode(model, codes)  # (steps², side, side)
    return axis, images.view(steps, steps, *images.shape[1:])


def side_by_side(images: Tensor) -> list[list[float]]:
    """Images (..., side, side) laid out as one matrix: (rows, cols, side, side) as a grid, (n, side, side) in a row."""
    if images.dim() == 3:
        images = images[None]
    rows, cols, side, _ = images.shape
    return images.permute(0, 2, 1, 3).reshape(rows * side, cols * side).tolist()


@torch.no_grad()
def test_case(model: VAE) -> dict:
    """The held-out split: the mean loss and its terms at z = μ, where each digit's codes lie on average, the
    decoder's map of the latent plane, and the training curve."""
    images, labels, metadata = test_split()
    loss, reconstruction, kl = loss_terms(model, pixels(images))
    mean, _ = model.encoder(pixels(images))
    by_digit = torch.stack([mean[labels == d].mean(0) for d in range(10)])  # (10, latent)
    axis, grid = latent_map(model)
    return {
        "label": "All held-out test digits",
        "matrices": [
            matrix(
                "latent_map",
                f"The decoder's digits across the latent plane: z₁ from "
                f"{axis[0]:.1f} to {axis[-1]:.1f} left to right, z₂ from "
                f"{axis[-1]:.1f} to {axis[0]:.1f} top to bottom",
                side_by_side(grid),
            ),
            matrix(
                "digit_means",
                "Where each digit's codes lie: the mean μ of the held-out "
                "digits 0-9 (rows) in each latent dimension (columns)",
                by_digit.tolist(),
            ),
        ],
        "vectors": [
            vector(
                "training_loss",
                "Mean training loss (negative ELBO, one sampled code per image) in each epoch, as train.py measured it",
                json.loads(metadata["loss_per_epoch"]),
                first=1,
            )
        ],
        "metrics": [
            metric("test_loss", "Mean negative ELBO on the test split (nats, z = μ)", loss.mean().item()),
            metric("test_reconstruction", "Mean reconstruction term (nats)", reconstruction.mean().item()),
            metric("test_kl", "Mean KL term (nats)", kl.mean().item()),
            metric("test_size", "Test digits", len(labels)),
        ],
    }


# The three checks. Each measures something that a broken recipe would get wrong, and says what it saw.

CHECK_ELBO = "The loss is the reconstruction term plus the KL term, each computed by hand from z = μ + σ·ε"
CHECK_KL = "The KL term of a standard normal is zero (and of N(1, 1) one half per dimension)"
CHECK_HELD_OUT = "The stored weights reproduce the held-out loss measured when they were trained"
CLOSE = 1e-4  # relative: float32 sums of 64 pixel terms
HELD_OUT_CLOSE = 1e-5  # relative: the held-out loss, a float32 mean of means (see check_held_out)


@torch.no_grad()
def check_elbo(model: VAE) -> dict:
    """Over the held-out digits with seeded noise ε: the model's loss and terms against Bernoulli
    −Σ[x log p + (1 − x) log(1 − p)] and ½Σ(μ² + σ² − 1 − log σ²), written out from the encoder's outputs."""
    images, _, _ = test_split()
    x = pixels(images)
    noise = torch.randn(len(x), model.config.latent, generator=torch.Generator().manual_seed(NOISE_SEED))
    loss, reconstruction, kl = loss_terms(model, x, noise)
    mean, logvar = model.encoder(x)
    sigma = torch.exp(0.5 * logvar)
    p = model.decoder(mean + sigma * noise).flatten(1)
    flat = x.flatten(1)
    by_hand_reconstruction = -(flat * p.log() + (1 - flat) * (1 - p).log()).sum(1)
    by_hand_kl = 0.5 * (mean**2 + sigma**2 - 1 - sigma.pow(2).log()).sum(1)
    worst = {
        name: ((got - want).abs() / want.abs().clamp(min=1)).max().item()
        for name, got, want in (
            ("reconstruction", reconstruction, by_hand_reconstruction),
            ("kl", kl, by_hand_kl),
            ("loss", loss, by_hand_reconstruction + by_hand_kl),
        )
    }
    return {
        "passed": all(v <= CLOSE for v in worst.values()),
        "detail": {"largest_relative_difference": worst, "digits": len(x), "mean_loss": loss.mean().item()},
    }


def check_kl(model: VAE) -> dict:
    latent = model.config.latent
    zero = kl_term(torch.zeros(1, latent), torch.zeros(1, latent)).item() + 0.0  # N(0, 1) itself (+ 0.0: no −0.0)
    shifted = kl_term(torch.ones(1, latent), torch.zeros(1, latent)).item()  # μ = 1: ½ μ² per dimension
    # KL(N(0, 1) ‖ N(0, 1)) is ½(0 + 1 − 1 − log 1), each operation exact in floating point: 0 on every machine.
    return {
        "passed": zero == 0.0 and abs(shifted - 0.5 * latent) <= 1e-6,
        "detail": {"standard_normal": zero, "mean_one": shifted, "expected_mean_one": 0.5 * latent},
    }


@torch.no_grad()
def check_held_out(model: VAE) -> dict:
    images, _, metadata = test_split()
    replayed = loss_terms(model, pixels(images))[0].mean().item()  # float32, as train.py measured
    trained = float(metadata.get("test_loss", "nan"))
    return kit.reproduced(
        replayed,
        trained,
        HELD_OUT_CLOSE * abs(trained),
        "a float32 mean over 360 digits of 64 pixel terms each: another order of summation "
        "moves it by about 1e-7 of itself (1.6e-7 seen under the portable kernels)",
    )


CHECKS = {CHECK_ELBO: check_elbo, CHECK_KL: check_kl, CHECK_HELD_OUT: check_held_out}


def between_case(model: VAE, images) -> dict:
    """The decoder's images along the line between two recorded digits' codes."""
    a, b = (images[DIGITS[case_id]].tolist() for case_id in BETWEEN)
    codes, steps = interpolation(model, a, b)
    return {
        "label": f"From test digit {DIGITS[BETWEEN[0]]} to test digit {DIGITS[BETWEEN[1]]}",
        "matrices": [
            matrix(
                "path",
                f"The decoder's images at {STEPS} codes on the line from the first digit's μ to the second's",
                side_by_side(steps),
            ),
            matrix("codes", "The codes along the line: step (rows) × latent dimension (columns)", codes.tolist()),
        ],
        "vectors": [
            vector(
                "looks_like",
                "The digit each image along the line looks most like",
                digits.nearest_digits(steps),
                first=1,
            )
        ],
        "metrics": [],
    }


def replay(model: VAE | None = None, case: str | None = None) -> dict:
    """Every recorded case and every check, or the case named alone, on the stored weights unless a model is
    given."""
    model = model if model is not None else build_model()
    images, labels, _ = test_split()
    cases = {
        case_id: partial(run_case, model, images[i].tolist(), f"Test digit {i}, a {int(labels[i])}")
        for case_id, i in DIGITS.items()
    }
    cases["between"] = partial(between_case, model, images)
    cases["test-split"] = partial(test_case, model)
    return kit.cases(cases, {name: partial(check, model) for name, check in CHECKS.items()}, case)


if __name__ == "__main__":
    sys.exit(kit.main(replay, sys.argv[1:]))
