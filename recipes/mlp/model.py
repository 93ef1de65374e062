"""A multilayer perceptron with one hidden layer of two sigmoid units, the network Rumelhart, Hinton & Williams
(1986) trained by back-propagating errors to compute XOR, which no network without a hidden layer can. The
trained weights live beside this file in weights.safetensors (`python train.py`)."""

from dataclasses import dataclass
from pathlib import Path

import torch
from torch import Tensor, nn

from recipekit import knobs
from recipekit import weights as stored

WEIGHTS = Path(__file__).with_name("weights.safetensors")  # written by train.py
# The knobs these weights were trained with: recipe.toml's defaults, or a variant's own (its knobs.json beside them).
SETTINGS = knobs.settings(Path(__file__).parent)
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


DATA = ("xor", "circles", "spiral")  # the patterns a learner may train it on (train.py's `data` knob)
POINTS = 64  # points drawn for a pattern other than XOR's four cases
DATA_SEED = 1986  # the draws of a pattern's points and noise: the same data in train.py, run.py and lab.py


def dataset(name: str = "xor", noise: float = 0.0, seed: int = DATA_SEED) -> tuple[Tensor, Tensor]:
    """A pattern's inputs (N, 2) in the plane's square, -0.5 to 1.5, and answers (N, 1): XOR's four cases (with
    noise, 16 points around each), a disc inside a ring, or two interleaved spirals; `noise` moves each point by a
    normal draw of that standard deviation (seeded: the same data every time)."""
    generator = torch.Generator().manual_seed(seed)
    if name == "xor":
        x, y = xor()
        if noise == 0:
            return x, y
        x, y = x.repeat_interleave(POINTS // 4, dim=0), y.repeat_interleave(POINTS // 4, dim=0)
    elif name == "circles":
        inner = torch.arange(POINTS) % 2 == 0  # half in the disc (answer 1), half in the ring (0)
        radius = torch.where(
            inner, 0.3 * torch.rand(POINTS, generator=generator), 0.55 + 0.2 * torch.rand(POINTS, generator=generator)
        )
        angle = 2 * torch.pi * torch.rand(POINTS, generator=generator)
        x = 0.5 + radius[:, None] * torch.stack([angle.cos(), angle.sin()], dim=1)
        y = inner.float()[:, None]
    elif name == "spiral":
        t = torch.linspace(0.1, 1, POINTS // 2)
        arms = [
            torch.stack(
                [0.5 + 0.6 * t * (3 * torch.pi * t + turn).cos(), 0.5 + 0.6 * t * (3 * torch.pi * t + turn).sin()],
                dim=1,
            )
            for turn in (0.0, torch.pi)
        ]
        x = torch.cat(arms)
        y = torch.cat([torch.ones(POINTS // 2), torch.zeros(POINTS // 2)])[:, None]
    else:
        raise ValueError(f"data: {name!r} is not one of {', '.join(DATA)}")
    return x + noise * torch.randn(x.shape, generator=generator), y


def build_model(config: MLPConfig | None = None, weights: Path = WEIGHTS) -> MLP:
    """The recorded model (or a variant's): the trained weights from weights.safetensors, in eval mode."""
    model = MLP(config or MLPConfig(hidden=int(SETTINGS["hidden"])))
    state, _ = stored.read(weights)
    model.load_state_dict(state)
    return model.eval()


def training_data() -> tuple[Tensor, Tensor]:
    """The data these weights were trained on (SETTINGS' pattern and noise): XOR's four cases unless a knob moved it."""
    return dataset(str(SETTINGS["data"]), float(SETTINGS["noise"]))


def example_inputs() -> tuple[Tensor]:
    """What the graph is traced on: the four inputs of XOR as one batch."""
    return (xor()[0],)
