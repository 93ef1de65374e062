"""A LeNet for 8x8 digits: two stages of convolution, tanh and average pooling, then two fully connected
layers to ten classes. The trained weights live beside this file in weights.safetensors (`python train.py`)."""

import json
import struct
from dataclasses import dataclass
from pathlib import Path

import torch
from torch import Tensor, nn

WEIGHTS = Path(__file__).with_name("weights.safetensors")  # written by train.py
SNAPSHOTS = Path(__file__).with_name("snapshots.safetensors")  # the weights during training, by train.py
TEST_DIGITS = Path(__file__).with_name("test_digits.safetensors")  # the held-out split, written by train.py
LEVELS = 16  # the digits' grey levels run 0..16; the network reads pixel / LEVELS


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


def pixels(image: list[list[int]] | Tensor) -> Tensor:
    """Grey levels 0..16, (8, 8) or (B, 8, 8), as the network's input (B, 1, 8, 8) in 0..1."""
    x = torch.as_tensor(image, dtype=torch.float32)
    return (x if x.dim() == 3 else x[None])[:, None] / LEVELS


# safetensors is 8 bytes of header length, a JSON header, then the raw little-endian tensors. Reading it
# takes a few lines, so that replaying the recipe needs torch alone.
DTYPES = {"F32": torch.float32, "F64": torch.float64, "I64": torch.int64, "U8": torch.uint8}


def read_safetensors(path: Path) -> tuple[dict[str, Tensor], dict[str, str]]:
    """The tensors of a .safetensors file and its string metadata."""
    data = path.read_bytes()
    (length,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8:8 + length])
    metadata = header.pop("__metadata__", {})
    body = memoryview(data)[8 + length:]
    tensors = {}
    for name, spec in header.items():
        start, end = spec["data_offsets"]
        flat = torch.frombuffer(bytearray(body[start:end]), dtype=DTYPES[spec["dtype"]])
        tensors[name] = flat.reshape(spec["shape"])
    return tensors, metadata


def build_model(config: LeNetConfig | None = None, weights: Path = WEIGHTS) -> LeNet:
    """The recorded model: the trained weights from weights.safetensors, in eval mode."""
    model = LeNet(config or LeNetConfig())
    state, _ = read_safetensors(weights)
    model.load_state_dict(state)
    return model.eval()
