"""A graph convolutional network (Kipf & Welling, 2017) for Zachary's karate club: two graph convolutions, each
mixing every member's features with its friends' through the normalised adjacency Â = D̃^{-1/2}(A + I)D̃^{-1/2},
on one-hot features (each member is only itself), trained with two members' sides given to tell every other
member's side. The trained weights live beside this file in weights.safetensors (`python train.py`)."""

from dataclasses import dataclass
from pathlib import Path

import torch
from torch import Tensor, nn

from recipekit import knobs
from recipekit import weights as stored

from .data import karate

WEIGHTS = Path(__file__).with_name("weights.safetensors")  # written by train.py
# The knobs these weights were trained with: recipe.toml's defaults, or a variant's own (its knobs.json beside them).
SETTINGS = knobs.settings(Path(__file__).parent)
MEMBERS = 34


@dataclass
class GCNConfig:
    members: int = MEMBERS  # the features are one-hot: as many as members
    hidden: int = 16  # the paper's hidden units
    classes: int = 2  # the two sides of the split
    dropout: float = 0.5  # on the hidden features, in training (the paper's)


class Normalise(nn.Module):
    """Â = D̃^{-1/2} (A + I) D̃^{-1/2}: every member joined to itself, each link weighed by 1 / √(d̃_i d̃_j)."""

    def forward(self, adjacency: Tensor) -> Tensor:
        joined = adjacency + torch.eye(adjacency.shape[0])  # (N, N): A + I
        scale = joined.sum(1).rsqrt()  # (N,): 1 / √d̃
        return scale[:, None] * joined * scale[None, :]


class GraphConv(nn.Module):
    """H' = Â H W: each member's features transformed, then averaged with its friends' (the paper's eq. 2)."""

    def __init__(self, inputs: int, outputs: int) -> None:
        super().__init__()
        self.linear = nn.Linear(inputs, outputs, bias=False)

    def forward(self, h: Tensor, normalised: Tensor) -> Tensor:
        return normalised @ self.linear(h)  # (N, outputs)


class GCN(nn.Module):
    def __init__(self, config: GCNConfig) -> None:
        super().__init__()
        self.config = config
        self.normalise = Normalise()
        self.conv1 = GraphConv(config.members, config.hidden)
        self.relu = nn.ReLU()
        self.dropout = nn.Dropout(config.dropout)
        self.conv2 = GraphConv(config.hidden, config.classes)

    def forward(self, features: Tensor, adjacency: Tensor) -> Tensor:
        """Every member's score for each side (N, classes), from the features (N, members) and the graph's
        adjacency (N, N)."""
        normalised = self.normalise(adjacency)
        h = self.dropout(self.relu(self.conv1(features, normalised)))  # (N, hidden): each member's embedding
        return self.conv2(h, normalised)


def adjacency(edges: Tensor | list, members: int = MEMBERS) -> Tensor:
    """The symmetric adjacency matrix (members, members) of an undirected graph's edges."""
    pairs = torch.as_tensor(edges, dtype=torch.int64).view(-1, 2)
    matrix = torch.zeros(members, members)
    matrix[pairs[:, 0], pairs[:, 1]] = 1.0
    matrix[pairs[:, 1], pairs[:, 0]] = 1.0
    return matrix


def features(members: int = MEMBERS) -> Tensor:
    """One-hot features (members, members): no member is told anything but who it is."""
    return torch.eye(members)


def build_model(config: GCNConfig | None = None, weights: Path = WEIGHTS) -> GCN:
    """The recorded model (or a variant's): the trained weights from weights.safetensors, in eval mode."""
    model = GCN(config or GCNConfig(hidden=int(SETTINGS["hidden"])))
    state, _ = stored.read(weights)
    model.load_state_dict(state)
    return model.eval()


def example_inputs() -> tuple[Tensor, Tensor]:
    """What the graph is traced on: the one-hot features and Zachary's club's adjacency."""
    return features(), adjacency(karate()["edges"])
