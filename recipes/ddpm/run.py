"""Replay the recorded diffusion cases and the numerical checks on the stored weights.

    python run.py          # a readable table; exit status 1 when a check fails
    python run.py --json   # the same replay as JSON

Needs torch, safetensors, model.py, weights.safetensors and the recipe kit's held-out digits.
"""

import json
import math
import sys
from dataclasses import dataclass
from functools import partial

import torch
from torch import Tensor

from recipekit import digits
from recipekit import replay as kit
from recipekit import weights as stored
from recipekit.items import matrix, metric, vector
from recipekit.script import package

__package__ = package(__file__, __package__)  # python run.py: its folder is the package the server loads
from .model import WEIGHTS, DDPMConfig, Schedule, UNet, build_model, simple_loss, to_levels, to_model

SAMPLE_SEED = 7  # the recorded sample's noise: x_T and every step's z
DENOISED = 14  # the recorded drawing noised and denoised back: test digit 14, a 3
DENOISE_FROM = 40  # ... from this step
DENOISE_SEED = 3  # ... with this noise
SHOWN = (100, 80, 60, 40, 30, 20, 10, 5, 1)  # the steps a case draws side by side (and the end, t = 0)
FORWARD_SHOWN = (0, 5, 10, 20, 40, 60, 80, 100)  # the forward process's steps drawn for one digit
# The curve by timestep runs the U-Net 100 times over these digits: over all 360 it was two thirds of a replay.
CURVE_DIGITS = 90
HELD_OUT_SEED = 6239  # the held-out loss's timesteps and noise (the paper: arXiv 2006.11239)
CURVE_SEED = 1  # the noise of the loss by timestep
PIXELS = [f"pixel {r},{c}" for r in range(8) for c in range(8)]


def schedule() -> Schedule:
    return Schedule(DDPMConfig())


@dataclass
class Chain:
    """The reverse process run from step `start` down to 0: the image at every step (start + 1 of them, the last
    x_0), and at each step t = start..1 the predicted noise ε_θ(x_t, t) and the image it implies, x̂_0."""

    start: int
    images: Tensor  # (start + 1, 1, 8, 8), x_start .. x_0
    noise: Tensor  # (start, 1, 8, 8)
    predicted: Tensor  # (start, 1, 8, 8)


def step_mean(s: Schedule, x: Tensor, eps: Tensor, t: int) -> Tensor:
    """The mean of a reverse step from x_t given the predicted noise: μ_θ = (x_t − β_t / √(1 − ᾱ_t) ε̂) / √α_t (the
    paper's eq. 11)."""
    step = torch.tensor([t])
    alpha, alpha_bar, beta = s.at(s.alphas, step), s.at(s.alpha_bars, step), s.at(s.betas, step)
    return (x - beta / (1 - alpha_bar).sqrt() * eps) / alpha.sqrt()


@torch.no_grad()
def reverse(model: UNet, x: Tensor, start: int, generator: torch.Generator) -> Chain:
    """The paper's Algorithm 2 from x = x_start (1, 1, 8, 8): at each step t, ε̂ = ε_θ(x_t, t), the mean μ_θ
    (step_mean) and x_{t-1} = μ_θ + σ_t z with σ_t² = β_t (z = 0 at the last step)."""
    s = schedule()
    images, noise, predicted = [x], [], []
    for t in range(start, 0, -1):
        x = kit.step_state("reverse", x, f"t = {t}")  # (1, 1, 8, 8): x_t; checked step by step, the recorded one
        step = torch.tensor([t])
        eps = model(x, step)  # (1, 1, 8, 8)
        alpha_bar, beta = s.at(s.alpha_bars, step), s.at(s.betas, step)
        predicted.append((x - (1 - alpha_bar).sqrt() * eps) / alpha_bar.sqrt())  # x̂_0 (the paper's eq. 15)
        z = torch.randn(x.shape, generator=generator) if t > 1 else torch.zeros_like(x)
        x = step_mean(s, x, eps, t) + beta.sqrt() * z
        images.append(x)
        noise.append(eps)
    return Chain(start, torch.cat(images), torch.cat(noise), torch.cat(predicted))


def sample(model: UNet, seed: int) -> Chain:
    """A new digit from the seed: x_T ~ N(0, I), then every step of the reverse process."""
    generator = torch.Generator().manual_seed(seed)
    x = torch.randn(1, 1, 8, 8, generator=generator)
    return reverse(model, x, schedule().steps, generator)


def denoise(model: UNet, image: list[list[int]] | Tensor, start: int, seed: int) -> tuple[Tensor, Chain]:
    """A drawing noised to step `start` in one draw of q(x_start | x_0), then denoised back to step 0 by the model;
    the noised image and the chain."""
    generator = torch.Generator().manual_seed(seed)
    x0 = to_model(image)
    noisy = schedule().noised(x0, torch.tensor([start]), torch.randn(x0.shape, generator=generator))
    return noisy, reverse(model, noisy, start, generator)


@torch.no_grad()
def step_terms(chain: Chain, x0: Tensor) -> Tensor:
    """Each step's loss term against an image x_0: ‖ε − ε̂‖² averaged over the pixels, where ε = (x_t − √ᾱ_t x_0) /
    √(1 − ᾱ_t) is the noise that separates x_t from x_0; by timestep, t = 1..start."""
    s = schedule()
    t = torch.arange(chain.start, 0, -1)
    eps = (chain.images[:-1] - s.at(s.alpha_bars.sqrt(), t) * x0) / s.at((1 - s.alpha_bars).sqrt(), t)
    return (eps - chain.noise).square().flatten(1).mean(1).flip(0)  # (start,) from t = 1


def flat(images: Tensor) -> list[list[float]]:
    """Images (N, 1, 8, 8) as rows of 64 values."""
    return images.flatten(1).tolist()


def chain_items(chain: Chain, against: Tensor, against_name: str) -> tuple[list[dict], list[dict]]:
    """A chain as a case's matrices (every step's image, predicted noise and x̂_0, a row per step; and the steps
    SHOWN side by side) and vectors (each step's loss term against `against`, by timestep)."""
    steps = list(range(chain.start, 0, -1))
    levels = to_levels(chain.images)
    at = sorted({chain.start, *(t for t in SHOWN if t <= chain.start), 0}, reverse=True)  # its start, some, its end
    shown = [matrix(f"step_c{t}", f"x_{t}" if t else "x_0, the end of the chain", levels[chain.start - t]) for t in at]
    matrices = [
        *shown,  # side by side first: the whole chain, a row per step, follows
        matrix(
            "chain",
            "The image at every step (grey levels), x_t from the first step down to x_0",
            flat(levels[:, None]),
            rows=[f"t = {t}" for t in [*steps, 0]],
            columns=PIXELS,
        ),
        matrix(
            "noise",
            "The noise the model predicts at every step, ε_θ(x_t, t)",
            flat(chain.noise),
            rows=[f"t = {t}" for t in steps],
            columns=PIXELS,
        ),
        matrix(
            "predicted",
            "The clean image each step's prediction implies, x̂_0 (grey levels)",
            flat(to_levels(chain.predicted)[:, None]),
            rows=[f"t = {t}" for t in steps],
            columns=PIXELS,
        ),
    ]
    terms = step_terms(chain, against)
    vectors = [
        vector(
            "step_loss", f"Each step's loss term ‖ε − ε̂‖² against {against_name}, by timestep", terms.tolist(), first=1
        )
    ]
    return matrices, vectors


def sample_case(model: UNet, seed: int) -> dict:
    """A sample in the manifest's case shape: every step, and each step's loss term against the digit it became."""
    chain = sample(model, seed)
    matrices, vectors = chain_items(chain, chain.images[-1:], "the sample it became")
    return {
        "label": f"Sampled from seed {seed}",
        "matrices": matrices,
        "vectors": vectors,
        "metrics": [
            metric("seed", "Seed", seed),
            metric(
                "mean_step_loss", "Mean loss term over the steps", step_terms(chain, chain.images[-1:]).mean().item()
            ),
            digits.looks_like(to_levels(chain.images[-1:])[0]),
        ],
    }


def denoise_case(model: UNet, image: list[list[int]] | Tensor, start: int, seed: int, title: str = "Live run") -> dict:
    """A drawing noised to `start` and denoised back, in the manifest's case shape: the drawing, every step and each
    step's loss term against the drawing, and how far the end is from it."""
    x0 = to_model(image)
    noisy, chain = denoise(model, image, start, seed)
    matrices, vectors = chain_items(chain, x0, "the drawing")
    drawn = torch.as_tensor(image, dtype=torch.float32)
    end = to_levels(chain.images[-1:])[0]
    matrices = [matrix("image", "The drawing (grey levels 0-16)", drawn.tolist()), *matrices]
    return {
        "label": title,
        "matrices": matrices,
        "vectors": vectors,
        "metrics": [
            metric("start", "Noised to step", start),
            metric("noise_seed", "Seed of the noise", seed),
            metric(
                "signal",
                "√ᾱ_t at that step: how much of the drawing is left",
                schedule().alpha_bars[start - 1].sqrt().item(),
            ),
            metric(
                "distance",
                "Mean |difference| of the end from the drawing (grey levels)",
                (end - drawn).abs().mean().item(),
            ),
            digits.looks_like(end),
        ],
    }


@torch.no_grad()
def forward_case(images: Tensor) -> dict:
    """The forward process on one held-out digit: x_t drawn from q(x_t | x_0) at several steps (one noise ε for
    all, so that only the step changes), and the schedule."""
    s = schedule()
    x0 = to_model(images[DENOISED])
    eps = torch.randn(x0.shape, generator=torch.Generator().manual_seed(DENOISE_SEED))
    shown = [to_levels(x0)[0] if t == 0 else to_levels(s.noised(x0, torch.tensor([t]), eps))[0] for t in FORWARD_SHOWN]
    return {
        "label": f"Test digit {DENOISED}, noised step by step",
        "matrices": [
            matrix(f"forward_c{t}", f"x_{t}" if t else "x_0, the digit", image.tolist())
            for t, image in zip(FORWARD_SHOWN, shown, strict=True)
        ],
        "vectors": [
            vector("beta", "β_t: the noise each step adds", s.betas.tolist(), first=1),
            vector("signal", "√ᾱ_t: how much of x_0 is left in x_t", s.alpha_bars.sqrt().tolist(), first=1),
        ],
        "metrics": [
            metric("steps", "Steps T", s.steps),
            metric("last_signal", "√ᾱ_T: what is left of x_0 at the last step", s.alpha_bars[-1].sqrt().item()),
        ],
    }


@torch.no_grad()
def loss_by_timestep(model: UNet, images: Tensor) -> Tensor:
    """L_simple at every timestep t = 1..T, averaged over the held-out digits (one seeded noise per digit)."""
    s = schedule()
    x0 = to_model(images)
    eps = torch.randn(x0.shape, generator=torch.Generator().manual_seed(CURVE_SEED))
    return torch.stack(
        [simple_loss(model, s, x0, torch.full((len(x0),), t), eps).mean() for t in range(1, s.steps + 1)]
    )


@torch.no_grad()
def held_out_loss(model: UNet, images: Tensor) -> float:
    """train.py's held-out loss: L_simple at a seeded uniform timestep per digit, with seeded noise."""
    s = schedule()
    x0 = to_model(images)
    draw = torch.Generator().manual_seed(HELD_OUT_SEED)
    t = torch.randint(1, s.steps + 1, (len(x0),), generator=draw)
    return simple_loss(model, s, x0, t, torch.randn(x0.shape, generator=draw)).mean().item()


def test_case(model: UNet) -> dict:
    """The held-out split: the loss by timestep, the mean loss train.py measured, and the training curve."""
    images, _ = digits.held_out()
    metadata = stored.read(WEIGHTS)[1]
    by_t = loss_by_timestep(model, images[:CURVE_DIGITS])
    return {
        "label": "All held-out test digits",
        "matrices": [],
        "vectors": [
            vector(
                "loss_by_timestep",
                f"L_simple at each timestep over the first {CURVE_DIGITS} test digits",
                by_t.tolist(),
                first=1,
            ),
            vector(
                "training_loss",
                "Mean training loss (L_simple at uniform timesteps) in each epoch, as train.py measured it",
                json.loads(metadata["loss_per_epoch"]),
                first=1,
            ),
        ],
        "metrics": [
            metric("test_loss", "Mean L_simple on the test split (uniform timesteps)", held_out_loss(model, images)),
            metric("test_size", "Test digits", len(images)),
        ],
    }


# The checks. Each measures something that a broken recipe would get wrong, and says what it saw.

CHECK_FORWARD = "The closed form of q(x_t | x_0) is the forward chain run step by step"
CHECK_LOSS = "L_simple is ‖ε − ε_θ(√ᾱ_t x_0 + √(1 − ᾱ_t) ε, t)‖², computed by hand"
CHECK_POSTERIOR = "Each reverse step's mean is the mean of q(x_{t-1} | x_t, x̂_0), the posterior at the predicted x_0"
CHECK_HELD_OUT = "The stored weights reproduce the held-out loss measured when they were trained"
CHAIN_SAMPLES = 5000  # copies of one digit run through the chain step by step
CLOSE = 1e-5  # float32 arithmetic on values of order 1


@torch.no_grad()
def check_forward() -> dict:
    """The chain x_t = √(1 − β_t) x_{t-1} + √β_t ε_t run step by step on many copies of one digit: its mean and
    variance at every step against √ᾱ_t x_0 and 1 − ᾱ_t (the paper's eq. 4), within sampling error; and the
    coefficients followed exactly (in double precision) through the recursion."""
    s = schedule()
    images, _ = digits.held_out()
    x0 = to_model(images[DENOISED]).double().flatten()  # (64,)
    generator = torch.Generator().manual_seed(4)
    x = x0.expand(CHAIN_SAMPLES, -1).clone()
    mean_coefficient, variance = torch.tensor(1.0, dtype=torch.float64), torch.tensor(0.0, dtype=torch.float64)
    worst_mean = worst_variance = worst_recursion = 0.0
    for t in range(s.steps):
        beta = s.betas[t]
        x = (1 - beta).sqrt() * x + beta.sqrt() * torch.randn(x.shape, generator=generator, dtype=torch.float64)
        mean_coefficient, variance = (1 - beta).sqrt() * mean_coefficient, (1 - beta) * variance + beta
        closed_mean, closed_variance = s.alpha_bars[t].sqrt() * x0, 1 - s.alpha_bars[t]
        worst_mean = max(worst_mean, (x.mean(0) - closed_mean).abs().max().item())
        worst_variance = max(worst_variance, (x.var(0) - closed_variance).abs().max().item())
        worst_recursion = max(
            worst_recursion,
            abs(mean_coefficient - s.alpha_bars[t].sqrt()).item(),
            abs(variance - closed_variance).item(),
        )
    # Five standard errors, at most: of a mean of variance ≤ 1 (1 / √n) and of a Gaussian's variance ≤ 1 (√(2 / n)).
    mean_error, variance_error = 5 / CHAIN_SAMPLES**0.5, 5 * (2 / CHAIN_SAMPLES) ** 0.5
    return {
        "passed": worst_mean <= mean_error and worst_variance <= variance_error and worst_recursion <= 1e-12,
        "detail": {
            "largest_mean_difference": worst_mean,
            "mean_error_allowed": mean_error,
            "largest_variance_difference": worst_variance,
            "variance_error_allowed": variance_error,
            "largest_recursion_difference": worst_recursion,
            "copies": CHAIN_SAMPLES,
        },
    }


@torch.no_grad()
def check_loss(model: UNet) -> dict:
    """The model's loss over the held-out digits at seeded timesteps and noise, against the same written out
    pixel by pixel from the schedule's products."""
    s = schedule()
    images, _ = digits.held_out()
    x0 = to_model(images)
    draw = torch.Generator().manual_seed(HELD_OUT_SEED)
    t = torch.randint(1, s.steps + 1, (len(x0),), generator=draw)
    eps = torch.randn(x0.shape, generator=draw)
    loss = simple_loss(model, s, x0, t, eps)
    alpha_bar = torch.stack([torch.prod(1 - s.betas[:step]) for step in t.tolist()]).float()  # ∏ (1 − β_s), s ≤ t
    noisy = alpha_bar.sqrt()[:, None, None, None] * x0 + (1 - alpha_bar).sqrt()[:, None, None, None] * eps
    by_hand = ((eps - model(noisy, t)) ** 2).sum((1, 2, 3)) / 64
    worst = (loss - by_hand).abs().max().item()
    return {
        "passed": worst <= CLOSE,
        "detail": {"largest_difference": worst, "digits": len(x0), "mean_loss": loss.mean().item()},
    }


@torch.no_grad()
def check_posterior(model: UNet) -> dict:
    """On the recorded sample's chain: each step's mean as the sampler takes it (step_mean, from ε̂) against the
    posterior mean of q(x_{t-1} | x_t, x_0) at x_0 = x̂_0 (the paper's eq. 7: β_t √ᾱ_{t-1} / (1 − ᾱ_t) x̂_0 +
    √α_t (1 − ᾱ_{t-1}) / (1 − ᾱ_t) x_t), the schedule's products written out in double precision."""
    s = schedule()
    betas = s.betas.tolist()
    chain = sample(model, SAMPLE_SEED)
    worst = 0.0
    for index, t in enumerate(range(s.steps, 0, -1)):
        x, eps = chain.images[index : index + 1], chain.noise[index : index + 1]
        alpha_bar = math.prod(1 - b for b in betas[:t])
        previous = math.prod(1 - b for b in betas[: t - 1])  # ᾱ_0 = 1
        beta, alpha = betas[t - 1], 1 - betas[t - 1]
        x_t = x.double()
        x0_hat = (x_t - math.sqrt(1 - alpha_bar) * eps.double()) / math.sqrt(alpha_bar)
        posterior = (beta * math.sqrt(previous) * x0_hat + math.sqrt(alpha) * (1 - previous) * x_t) / (1 - alpha_bar)
        worst = max(worst, (step_mean(s, x, eps, t).double() - posterior).abs().max().item())
    return {"passed": worst <= CLOSE * 10, "detail": {"largest_difference": worst, "steps": s.steps}}


@torch.no_grad()
def check_held_out(model: UNet) -> dict:
    images, _ = digits.held_out()
    replayed = held_out_loss(model, images)  # float32, as train.py measured
    trained = float(stored.read(WEIGHTS)[1].get("test_loss", "nan"))
    return kit.reproduced(
        replayed,
        trained,
        CLOSE,
        "a float32 mean of 360 terms of about 0.06: another order of summation moves it by a few 1e-8 (1.5e-8 seen)",
    )


CHECKS = {
    CHECK_FORWARD: lambda model: check_forward(),
    CHECK_LOSS: check_loss,
    CHECK_POSTERIOR: check_posterior,
    CHECK_HELD_OUT: check_held_out,
}


def replay(model: UNet | None = None, case: str | None = None) -> dict:
    """Every recorded case and every check, or the case named alone, on the stored weights unless a model is
    given."""
    model = model if model is not None else build_model()
    images, labels = digits.held_out()
    cases = {
        "sample": partial(sample_case, model, SAMPLE_SEED),
        "denoise": partial(
            denoise_case,
            model,
            images[DENOISED].tolist(),
            DENOISE_FROM,
            DENOISE_SEED,
            f"Test digit {DENOISED}, a {int(labels[DENOISED])}, noised to step {DENOISE_FROM} and denoised back",
        ),
        "forward": partial(forward_case, images),
        "test-split": partial(test_case, model),
    }
    return kit.cases(cases, {name: partial(check, model) for name, check in CHECKS.items()}, case)


if __name__ == "__main__":
    sys.exit(kit.main(replay, sys.argv[1:]))
