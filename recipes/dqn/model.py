"""A deep Q-network (Mnih et al., 2015) for a 5x5 gridworld (gridworld.py): two convolutions over the grid's planes
(where the agent is, the walls, the goal, the pit), then two linear layers that give the value Q(s, a) of each of
the four moves, the return the agent expects if it makes that move and then acts well. The trained weights live
beside this file in weights.safetensors (`python train.py`)."""

from dataclasses import dataclass
from pathlib import Path

from torch import Tensor, nn

from recipekit import weights as stored

from .gridworld import ACTIONS, CHANNELS, SIZE, START, observe

WEIGHTS = Path(__file__).with_name("weights.safetensors")  # written by train.py


@dataclass
class QConfig:
    channels: int = len(CHANNELS)
    side: int = SIZE
    filters: int = 16
    hidden: int = 64
    actions: int = len(ACTIONS)


class Sight(nn.Module):
    """What the network sees: two 3x3 convolutions over the grid's planes, (B, 4, 5, 5) -> (B, filters * 25), as
    the paper's convolutions found the ball and the paddle in a frame."""

    def __init__(self, config: QConfig) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(config.channels, config.filters, 3, padding=1)
        self.relu1 = nn.ReLU()
        self.conv2 = nn.Conv2d(config.filters, config.filters, 3, padding=1)
        self.relu2 = nn.ReLU()
        self.flatten = nn.Flatten()

    def forward(self, planes: Tensor) -> Tensor:
        h = self.relu2(self.conv2(self.relu1(self.conv1(planes))))  # (B, filters, 5, 5)
        return self.flatten(h)  # (B, filters * 25)


class Values(nn.Module):
    """What each move is worth: a hidden layer over what the sight found, then one output per move."""

    def __init__(self, config: QConfig) -> None:
        super().__init__()
        self.fc = nn.Linear(config.filters * config.side * config.side, config.hidden)
        self.relu = nn.ReLU()
        self.out = nn.Linear(config.hidden, config.actions)

    def forward(self, seen: Tensor) -> Tensor:
        return self.out(self.relu(self.fc(seen)))  # (B, actions): Q(s, ·)


class QNetwork(nn.Module):
    """The grid's planes (B, 4, 5, 5) -> Q(s, a) for each move (B, 4), as the paper's network maps frames to the
    values of the joystick's moves (there: three convolutions and one hidden layer over 84x84 frames)."""

    def __init__(self, config: QConfig) -> None:
        super().__init__()
        self.config = config
        self.sight = Sight(config)
        self.values = Values(config)

    def forward(self, planes: Tensor) -> Tensor:
        return self.values(self.sight(planes))  # (B, actions)


def build_model(config: QConfig | None = None, weights: Path = WEIGHTS) -> QNetwork:
    """The recorded model: the trained weights from weights.safetensors, in eval mode."""
    model = QNetwork(config or QConfig())
    state, _ = stored.read(weights)
    model.load_state_dict(state)
    return model.eval()


def example_inputs() -> tuple[Tensor]:
    """What the graph is traced on: the grid seen from the start."""
    return (observe(START)[None],)
