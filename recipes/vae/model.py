"""The variational autoencoder of Kingma & Welling (2013) for 8x8 digits: an encoder that maps a drawing to the
mean and log-variance of a Gaussian over a 2-D latent code, the reparameterisation z = μ + σ·ε that lets the
gradient pass through the sampling, and a decoder that maps a code to a Bernoulli probability for every
pixel. The trained weights live beside this file in weights.safetensors (`python train.py`)."""

from dataclasses import dataclass
from pathlib import Path

import torch
from torch import Tensor, nn

from recipekit import weights as stored

WEIGHTS = Path(__file__).with_name("weights.safetensors")  # written by train.py


@dataclass
class VAEConfig:
    side: int = 8  # images are side x side
    hidden: int = 128  # the width of the encoder's and the decoder's hidden layer
    latent: int = 2  # two dimensions: the whole latent space can be drawn as a map

    @property
    def pixels(self) -> int:
        return self.side * self.side


class Encoder(nn.Module):
    """q(z | x) = N(μ(x), σ²(x)): one tanh hidden layer (the paper's MLP), then the mean and the log-variance."""

    def __init__(self, config: VAEConfig) -> None:
        super().__init__()
        self.fc = nn.Linear(config.pixels, config.hidden)
        self.tanh = nn.Tanh()
        self.mean = nn.Linear(config.hidden, config.latent)
        self.logvar = nn.Linear(config.hidden, config.latent)

    def forward(self, x: Tensor) -> tuple[Tensor, Tensor]:
        h = self.tanh(self.fc(x.flatten(1)))  # (B, hidden)
        return self.mean(h), self.logvar(h)  # (B, latent) each


class Decoder(nn.Module):
    """p(x | z): one tanh hidden layer, then a sigmoid: the probability of ink at each pixel."""

    def __init__(self, config: VAEConfig) -> None:
        super().__init__()
        self.side = config.side
        self.fc = nn.Linear(config.latent, config.hidden)
        self.tanh = nn.Tanh()
        self.out = nn.Linear(config.hidden, config.pixels)
        self.sigmoid = nn.Sigmoid()

    def forward(self, z: Tensor) -> Tensor:
        p = self.sigmoid(self.out(self.tanh(self.fc(z))))  # (B, pixels)
        return p.view(-1, 1, self.side, self.side)  # (B, 1, side, side)


class VAE(nn.Module):
    def __init__(self, config: VAEConfig) -> None:
        super().__init__()
        self.config = config
        self.encoder = Encoder(config)
        self.decoder = Decoder(config)

    def forward(self, x: Tensor, noise: Tensor | None = None) -> tuple[Tensor, Tensor, Tensor]:
        """The reconstruction's pixel probabilities, μ and log σ². With `noise` ε (B, latent) the code is
        sampled as z = μ + σ·ε (training); without it z = μ, the most likely code (evaluation)."""
        mean, logvar = self.encoder(x)
        z = mean if noise is None else mean + torch.exp(0.5 * logvar) * noise
        return self.decoder(z), mean, logvar


def reconstruction_term(p: Tensor, x: Tensor) -> Tensor:
    """−log p(x | z) under independent Bernoulli pixels, summed over the pixels: (B,)."""
    return nn.functional.binary_cross_entropy(p, x, reduction="none").flatten(1).sum(1)


def kl_term(mean: Tensor, logvar: Tensor) -> Tensor:
    """KL(N(μ, σ²) ‖ N(0, 1)) in closed form (the paper's appendix B), summed over the latent: (B,)."""
    return -0.5 * (1 + logvar - mean.pow(2) - logvar.exp()).sum(1)


def loss_terms(model: VAE, x: Tensor, noise: Tensor | None = None) -> tuple[Tensor, Tensor, Tensor]:
    """The negative ELBO and its two terms, per image: (reconstruction + KL, reconstruction, KL)."""
    p, mean, logvar = model(x, noise)
    reconstruction, kl = reconstruction_term(p, x), kl_term(mean, logvar)
    return reconstruction + kl, reconstruction, kl


def build_model(config: VAEConfig | None = None, weights: Path = WEIGHTS) -> VAE:
    """The recorded model: the trained weights, in eval mode."""
    model = VAE(config or VAEConfig())
    state, _ = stored.read(weights)
    model.load_state_dict(state)
    return model.eval()
