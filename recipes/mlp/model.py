"""A multilayer perceptron with one hidden layer of two sigmoid units, the network Rumelhart, Hinton & Williams
(1986) trained by back-propagating errors to compute XOR, which no network without a hidden layer can. The
trained weights live beside this file in weights.safetensors (`python train.py`)."""

from dataclasses import dataclass
from pathlib import Path

import torch
from torch import Tensor, nn

from recipekit import weights as stored

WEIGHTS = Path(__file__).with_name("weights.safetensors")  # written by train.py
INPUTS = ((0.0, 0.0), (0.0, 1.0), (1.0, 0.0), (1.0, 1.0))  # XOR's four inputs
TARGETS = (0.0, 1.0, 1.0, 0.0)  # and its answers: 1 where exactly one input is on
NAMES = tuple(f"{a:g} {b:g}" for a, b in INPUTS)  # "0 1": how the page names each input


@dataclass
class MLPConfig:
    inputs: int = 2
    hidden: int = 2  # the paper's XOR network: two hidden units are enough
    outputs: int = 1


class MLP(nn.Module):
    def __init__(self, config: MLPConfig) -> None:
        super().__init__()
        self.config = config
        self.hidden = nn.Linear(config.inputs, config.hidden)
        self.squash = nn.Sigmoid()
        self.output = nn.Linear(config.hidden, config.outputs)
        self.decide = nn.Sigmoid()

    def forward(self, x: Tensor) -> Tensor:
        h = self.squash(self.hidden(x))  # (B, hidden): each unit a soft half-plane of the input
        return self.decide(self.output(h))  # (B, outputs): the answer, between 0 and 1


def xor() -> tuple[Tensor, Tensor]:
    """The four inputs (4, 2) and their answers (4, 1)."""
    return torch.tensor(INPUTS), torch.tensor(TARGETS)[:, None]


def build_model(config: MLPConfig | None = None, weights: Path = WEIGHTS) -> MLP:
    """The recorded model: the trained weights from weights.safetensors, in eval mode."""
    model = MLP(config or MLPConfig())
    state, _ = stored.read(weights)
    model.load_state_dict(state)
    return model.eval()


def example_inputs() -> tuple[Tensor]:
    """What the graph is traced on: the four inputs of XOR as one batch."""
    return (xor()[0],)
