"""A LeNet for 8x8 digits: two stages of convolution, tanh and average pooling, then two fully connected
layers to ten classes. The trained weights live beside this file in weights.safetensors (`python train.py`)."""

from dataclasses import dataclass
from pathlib import Path

from torch import Tensor, nn

from recipekit import weights as stored

WEIGHTS = Path(__file__).with_name("weights.safetensors")  # written by train.py
SNAPSHOTS = Path(__file__).with_name("snapshots.safetensors")  # the weights during training, by train.py


@dataclass
class LeNetConfig:
    side: int = 8  # input images are side x side, one channel
    c1: int = 6  # channels of the first convolution (LeNet-5's C1)
    c2: int = 16  # channels of the second (LeNet-5's C3)
    hidden: int = 32  # width of the first fully connected layer
    classes: int = 10
    kernel: int = 3  # 3x3 with padding 1 keeps each side, so that 8x8 survives two poolings


class ConvStage(nn.Module):
    """Convolution, tanh, then 2x2 average pooling: each side halves."""

    def __init__(self, in_channels: int, out_channels: int, kernel: int) -> None:
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel, padding=kernel // 2)
        self.act = nn.Tanh()
        self.pool = nn.AvgPool2d(2)

    def forward(self, x: Tensor) -> Tensor:
        return self.pool(self.act(self.conv(x)))  # (B, out, H/2, W/2)


class LeNet(nn.Module):
    def __init__(self, config: LeNetConfig) -> None:
        super().__init__()
        self.config = config
        self.stage1 = ConvStage(1, config.c1, config.kernel)
        self.stage2 = ConvStage(config.c1, config.c2, config.kernel)
        self.fc1 = nn.Linear(config.c2 * (config.side // 4) ** 2, config.hidden)
        self.act = nn.Tanh()
        self.fc2 = nn.Linear(config.hidden, config.classes)

    def forward(self, x: Tensor) -> Tensor:
        x = self.stage2(self.stage1(x))  # (B, c2, side/4, side/4)
        return self.fc2(self.act(self.fc1(x.flatten(1))))  # (B, classes): one score per digit


def build_model(config: LeNetConfig | None = None, weights: Path = WEIGHTS) -> LeNet:
    """The recorded model: the trained weights from weights.safetensors, in eval mode."""
    model = LeNet(config or LeNetConfig())
    state, _ = stored.read(weights)
    model.load_state_dict(state)
    return model.eval()
