"""A denoising diffusion probabilistic model (Ho, Jain & Abbeel, 2020) for 8x8 digits: a fixed forward process
that adds Gaussian noise over T steps, and a small U-Net ε_θ(x_t, t) trained to predict the noise in a noised
image, from which the reverse process draws new digits step by step. The trained weights live beside this file
in weights.safetensors (`python train.py`)."""

import math
from dataclasses import dataclass
from pathlib import Path

import torch
from torch import Tensor, nn

from recipekit import weights as stored

WEIGHTS = Path(__file__).with_name("weights.safetensors")  # written by train.py
LEVELS = 16  # the digits' grey levels run 0..16; the model sees them as -1..1


@dataclass
class DDPMConfig:
    side: int = 8  # images are side x side
    channels: int = 32  # the U-Net's width at full resolution (twice that at half)
    groups: int = 8  # GroupNorm groups, as the paper's U-Net (Wide ResNet blocks with group normalisation)
    steps: int = 100  # T: the paper's 1,000 steps, scaled down with the schedule below
    beta_first: float = 1e-3  # the paper's linear schedule 1e-4 .. 0.02 over 1,000 steps, scaled by 1000 / T
    beta_last: float = 0.2


class Schedule:
    """The fixed forward process q(x_t | x_{t-1}) = N(√(1 − β_t) x_{t-1}, β_t I), t = 1..T, and what follows in
    closed form: ᾱ_t = ∏ (1 − β_s), q(x_t | x_0) = N(√ᾱ_t x_0, (1 − ᾱ_t) I). Index 0 holds t = 1."""

    def __init__(self, config: DDPMConfig) -> None:
        self.steps = config.steps
        self.betas = torch.linspace(config.beta_first, config.beta_last, config.steps, dtype=torch.float64)
        self.alphas = 1 - self.betas
        self.alpha_bars = torch.cumprod(self.alphas, 0)

    def at(self, values: Tensor, t: Tensor) -> Tensor:
        """The schedule's values at timesteps t (B,) in 1..T, shaped (B, 1, 1, 1) to scale images, in float32."""
        return values[t - 1].float().view(-1, 1, 1, 1)

    def noised(self, x0: Tensor, t: Tensor, noise: Tensor) -> Tensor:
        """x_t = √ᾱ_t x_0 + √(1 − ᾱ_t) ε: a sample of q(x_t | x_0) in one step (the paper's eq. 4)."""
        return self.at(self.alpha_bars.sqrt(), t) * x0 + self.at((1 - self.alpha_bars).sqrt(), t) * noise


def sinusoidal(t: Tensor, dim: int) -> Tensor:
    """The Transformer's sinusoidal position embedding of each timestep (B,) -> (B, dim), as the paper embeds t."""
    half = dim // 2
    frequencies = torch.exp(-math.log(10000) * torch.arange(half, dtype=torch.float32) / half)  # (half,)
    angles = t.float()[:, None] * frequencies[None]  # (B, half)
    return torch.cat([angles.sin(), angles.cos()], dim=1)  # (B, dim)


class TimeEmbedding(nn.Module):
    """t -> a vector every block adds to its channels: sinusoids, then two linear layers with a SiLU between."""

    def __init__(self, dim: int) -> None:
        super().__init__()
        self.dim = dim
        self.fc1 = nn.Linear(dim, 2 * dim)
        self.act = nn.SiLU()
        self.fc2 = nn.Linear(2 * dim, 2 * dim)

    def forward(self, t: Tensor) -> Tensor:
        return self.fc2(self.act(self.fc1(sinusoidal(t, self.dim))))  # (B, 2 * dim)


class ResBlock(nn.Module):
    """Two 3x3 convolutions, each after GroupNorm and SiLU, with the timestep's embedding added between them, and
    a residual connection (a 1x1 convolution where the width changes)."""

    def __init__(self, inputs: int, outputs: int, time_dim: int, groups: int) -> None:
        super().__init__()
        self.norm1 = nn.GroupNorm(groups, inputs)
        self.act1 = nn.SiLU()
        self.conv1 = nn.Conv2d(inputs, outputs, 3, padding=1)
        self.time = nn.Linear(time_dim, outputs)
        self.norm2 = nn.GroupNorm(groups, outputs)
        self.act2 = nn.SiLU()
        self.conv2 = nn.Conv2d(outputs, outputs, 3, padding=1)
        self.skip = nn.Conv2d(inputs, outputs, 1) if inputs != outputs else nn.Identity()

    def forward(self, x: Tensor, time: Tensor) -> Tensor:
        h = self.conv1(self.act1(self.norm1(x)))  # (B, outputs, H, W)
        h = h + self.time(time)[:, :, None, None]  # the timestep, on every pixel
        h = self.conv2(self.act2(self.norm2(h)))
        return self.skip(x) + h


class UNet(nn.Module):
    """ε_θ(x_t, t): an 8x8 image and its timestep -> the noise the model reads in it (same shape). Down to 4x4 and
    back up, the full-resolution features carried across (the U)."""

    def __init__(self, config: DDPMConfig) -> None:
        super().__init__()
        width, time_dim = config.channels, config.channels
        self.config = config
        self.time = TimeEmbedding(time_dim)
        self.conv_in = nn.Conv2d(1, width, 3, padding=1)
        self.down1 = ResBlock(width, width, 2 * time_dim, config.groups)
        self.downsample = nn.Conv2d(width, 2 * width, 3, stride=2, padding=1)
        self.middle = ResBlock(2 * width, 2 * width, 2 * time_dim, config.groups)
        self.upsample = nn.Upsample(scale_factor=2, mode="nearest")
        self.up_conv = nn.Conv2d(2 * width, width, 3, padding=1)
        self.up1 = ResBlock(2 * width, width, 2 * time_dim, config.groups)
        self.norm_out = nn.GroupNorm(config.groups, width)
        self.act_out = nn.SiLU()
        self.conv_out = nn.Conv2d(width, 1, 3, padding=1)

    def forward(self, x: Tensor, t: Tensor) -> Tensor:
        time = self.time(t)  # (B, 2 * width)
        h = self.conv_in(x)  # (B, width, 8, 8)
        skip = self.down1(h, time)  # (B, width, 8, 8): carried across to the way up
        h = self.middle(self.downsample(skip), time)  # (B, 2 * width, 4, 4)
        h = self.up_conv(self.upsample(h))  # (B, width, 8, 8)
        h = self.up1(torch.cat([h, skip], dim=1), time)  # (B, width, 8, 8)
        return self.conv_out(self.act_out(self.norm_out(h)))  # (B, 1, 8, 8): the predicted noise


def to_model(levels: Tensor | list) -> Tensor:
    """Grey levels 0..16, (8, 8) or (B, 8, 8), as the model's images (B, 1, 8, 8) in -1..1."""
    x = torch.as_tensor(levels, dtype=torch.float32)
    return (x if x.dim() == 3 else x[None])[:, None] / (LEVELS / 2) - 1


def to_levels(x: Tensor) -> Tensor:
    """The model's images (B, 1, 8, 8) as grey levels (B, 8, 8), clipped to 0..16 for display."""
    return (x[:, 0].clamp(-1, 1) + 1) * (LEVELS / 2)


def simple_loss(model: UNet, schedule: Schedule, x0: Tensor, t: Tensor, noise: Tensor) -> Tensor:
    """The paper's L_simple per image: ‖ε − ε_θ(√ᾱ_t x_0 + √(1 − ᾱ_t) ε, t)‖², as a mean over the pixels (B,)."""
    return (noise - model(schedule.noised(x0, t, noise), t)).square().flatten(1).mean(1)


def build_model(config: DDPMConfig | None = None, weights: Path = WEIGHTS) -> UNet:
    """The recorded model: the trained weights from weights.safetensors, in eval mode."""
    model = UNet(config or DDPMConfig())
    state, _ = stored.read(weights)
    model.load_state_dict(state)
    return model.eval()


def example_inputs() -> tuple[Tensor, Tensor]:
    """What the graph is traced on: one noisy image halfway through the forward process, and its timestep."""
    generator = torch.Generator().manual_seed(0)
    return torch.randn(1, 1, 8, 8, generator=generator), torch.tensor([50])
