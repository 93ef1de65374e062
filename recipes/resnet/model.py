"""A small ResNet for 8x8 digits (He et al. 2015): a stem, two basic blocks whose output is ReLU(F(x) + x),
the second with a projection shortcut where the shape changes, global average pooling and one linear layer.
The trained weights live beside this file in weights.safetensors (`python train.py`)."""

from dataclasses import dataclass
from pathlib import Path

from torch import Tensor, nn

from recipekit import weights as stored

WEIGHTS = Path(__file__).with_name("weights.safetensors")  # written by train.py


@dataclass
class ResNetConfig:
    side: int = 8  # input images are side x side, one channel
    width: int = 8  # channels of the stem and the first block
    wide: int = 16  # channels of the second block, which also halves each side
    classes: int = 10


class Projection(nn.Module):
    """The shortcut where a block changes shape: a 1x1 convolution with the block's stride, then BatchNorm."""

    def __init__(self, in_channels: int, out_channels: int, stride: int) -> None:
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, 1, stride=stride, bias=False)
        self.bn = nn.BatchNorm2d(out_channels)

    def forward(self, x: Tensor) -> Tensor:
        return self.bn(self.conv(x))


class BasicBlock(nn.Module):
    """out = ReLU(F(x) + shortcut(x)), F = conv, BN, ReLU, conv, BN. The shortcut is the identity where the
    shape stays, else a projection. Each ReLU is a module of its own, so the graph shows every call."""

    def __init__(self, in_channels: int, out_channels: int, stride: int = 1) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(in_channels, out_channels, 3, stride=stride, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(out_channels)
        self.relu1 = nn.ReLU()
        self.conv2 = nn.Conv2d(out_channels, out_channels, 3, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(out_channels)
        same = stride == 1 and in_channels == out_channels
        self.shortcut = nn.Identity() if same else Projection(in_channels, out_channels, stride)
        self.relu2 = nn.ReLU()

    def forward(self, x: Tensor) -> Tensor:
        branch = self.bn2(self.conv2(self.relu1(self.bn1(self.conv1(x)))))  # F(x): (B, out, H/stride, W/stride)
        return self.relu2(branch + self.shortcut(x))  # the residual sum, then the block's ReLU


class ResNet(nn.Module):
    def __init__(self, config: ResNetConfig) -> None:
        super().__init__()
        self.config = config
        self.conv = nn.Conv2d(1, config.width, 3, padding=1, bias=False)  # the stem
        self.bn = nn.BatchNorm2d(config.width)
        self.relu = nn.ReLU()
        self.block1 = BasicBlock(config.width, config.width)  # identity shortcut: (B, width, 8, 8)
        self.block2 = BasicBlock(config.width, config.wide, stride=2)  # projection: (B, wide, 4, 4)
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(config.wide, config.classes)

    def forward(self, x: Tensor) -> Tensor:
        x = self.relu(self.bn(self.conv(x)))  # (B, width, 8, 8)
        x = self.block2(self.block1(x))  # (B, wide, 4, 4)
        return self.fc(self.pool(x).flatten(1))  # (B, classes): one score per digit


def build_model(config: ResNetConfig | None = None, weights: Path = WEIGHTS) -> ResNet:
    """The recorded model: the trained weights (and BatchNorm's running statistics), in eval mode."""
    model = ResNet(config or ResNetConfig())
    state, _ = stored.read(weights)
    model.load_state_dict(state)
    return model.eval()
