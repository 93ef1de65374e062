"""Elhage et al.'s (2022) toy model of superposition: five features squeezed through a space of two dimensions and
read back out, x' = ReLU(WᵀWx + b). Each of the five columns of W is the direction a feature is written in; a
feature whose column is near zero is dropped. Trained on features that are each zero most of the time (sparse), the
model writes all five into two dimensions, as a pentagon, and lets them interfere a little; trained on dense
features, it keeps the two most important ones at right angles and drops the rest. One model is trained for each
sparsity of SPARSITIES, side by side (an instance each); the trained weights live beside this file in
weights.safetensors (`python train.py`)."""

from dataclasses import dataclass, field
from pathlib import Path

import torch
from torch import Tensor, nn

from recipekit import weights as stored

WEIGHTS = Path(__file__).with_name("weights.safetensors")  # written by train.py
SPARSITIES = (0.0, 0.3, 0.5, 0.7, 0.8, 0.9, 0.95, 0.99)  # the chance that a feature is zero, one model each


@dataclass
class ToyConfig:
    n_features: int = 5
    n_hidden: int = 2  # the dimensions the features are squeezed through
    sparsities: tuple[float, ...] = field(default_factory=lambda: SPARSITIES)
    importance_decay: float = 0.9  # feature i matters 0.9^i as much as feature 0


class ToyModel(nn.Module):
    """Every sparsity's model at once: W (models, hidden, features) and b (models, features)."""

    def __init__(self, config: ToyConfig) -> None:
        super().__init__()
        self.config = config
        models = len(config.sparsities)
        self.W = nn.Parameter(nn.init.xavier_normal_(torch.empty(models, config.n_hidden, config.n_features)))
        self.b = nn.Parameter(torch.zeros(models, config.n_features))
        self.relu = nn.ReLU()

    def forward(self, x: Tensor) -> Tensor:
        h = torch.einsum("mhf,bmf->bmh", self.W, x)  # (B, models, hidden): the features squeezed into two dimensions
        out = torch.einsum("mhf,bmh->bmf", self.W, h)  # (B, models, features): read back out along each column
        return self.relu(out + self.b)  # (B, models, features)


def importance(config: ToyConfig) -> Tensor:
    """How much each feature's error counts (features,): 0.9^i."""
    return config.importance_decay ** torch.arange(config.n_features, dtype=torch.float32)


def weighted_loss(model: ToyModel, x: Tensor) -> Tensor:
    """The importance-weighted squared error of every model (models,), averaged over the batch."""
    return (importance(model.config) * (model(x) - x) ** 2).sum(-1).mean(0)


def build_model(config: ToyConfig | None = None, weights: Path = WEIGHTS) -> ToyModel:
    """The recorded models: the trained weights from weights.safetensors, in eval mode."""
    model = ToyModel(config or ToyConfig())
    state, _ = stored.read(weights)
    model.load_state_dict(state)
    return model.eval()
