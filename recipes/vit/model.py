"""The Vision Transformer of Dosovitskiy et al. (2020) for 8x8 digits: the image cut into 2x2 patches, each
patch a token by one linear map, a learned class token in front, learned positions, pre-LN Transformer
encoder blocks, and a linear head that reads the class token alone. The trained weights live beside this
file in weights.safetensors (`python train.py`)."""

import math
from dataclasses import dataclass
from pathlib import Path

import torch
from torch import Tensor, nn

from recipekit import weights as stored

WEIGHTS = Path(__file__).with_name("weights.safetensors")  # written by train.py


@dataclass
class ViTConfig:
    side: int = 8  # input images are side x side, one channel
    patch: int = 2  # patches are patch x patch pixels: (8 / 2)² = 16 patch tokens
    dim: int = 32
    heads: int = 4
    layers: int = 2
    mlp: int = 64  # the hidden width of each block's MLP
    classes: int = 10

    @property
    def grid(self) -> int:
        return self.side // self.patch  # patches per side

    @property
    def tokens(self) -> int:
        return 1 + self.grid**2  # the class token, then the patches row by row


def patchify(x: Tensor, patch: int) -> Tensor:
    """(B, 1, H, W) → (B, patches, patch²): non-overlapping patches row by row, each flattened row by row."""
    B, _, H, W = x.shape
    x = x.view(B, H // patch, patch, W // patch, patch)  # (B, rows, patch, cols, patch)
    return x.permute(0, 1, 3, 2, 4).reshape(B, (H // patch) * (W // patch), patch * patch)


class SelfAttention(nn.Module):
    """softmax(Q Kᵀ / √d_k) V in every head at once, every token attending to every token (no mask)."""

    def __init__(self, config: ViTConfig) -> None:
        super().__init__()
        self.heads = config.heads
        self.q = nn.Linear(config.dim, config.dim)
        self.k = nn.Linear(config.dim, config.dim)
        self.v = nn.Linear(config.dim, config.dim)
        self.softmax = nn.Softmax(dim=-1)
        self.out = nn.Linear(config.dim, config.dim)

    def split(self, x: Tensor) -> Tensor:
        B, T, C = x.shape
        return x.view(B, T, self.heads, C // self.heads).transpose(1, 2)  # (B, heads, T, head_dim)

    def forward(self, x: Tensor) -> Tensor:
        q, k, v = self.split(self.q(x)), self.split(self.k(x)), self.split(self.v(x))
        weights = self.softmax(q @ k.transpose(-2, -1) / math.sqrt(q.size(-1)))  # (B, heads, T, T)
        return self.out((weights @ v).transpose(1, 2).reshape(x.shape))  # (B, T, dim): heads side by side


class MLP(nn.Module):
    def __init__(self, config: ViTConfig) -> None:
        super().__init__()
        self.fc1 = nn.Linear(config.dim, config.mlp)
        self.gelu = nn.GELU()
        self.fc2 = nn.Linear(config.mlp, config.dim)

    def forward(self, x: Tensor) -> Tensor:
        return self.fc2(self.gelu(self.fc1(x)))


class Block(nn.Module):
    """Pre-LN: each sublayer reads a normalised copy and adds its answer to the residual stream."""

    def __init__(self, config: ViTConfig) -> None:
        super().__init__()
        self.ln1 = nn.LayerNorm(config.dim)
        self.attn = SelfAttention(config)
        self.ln2 = nn.LayerNorm(config.dim)
        self.mlp = MLP(config)

    def forward(self, x: Tensor) -> Tensor:
        x = x + self.attn(self.ln1(x))  # (B, tokens, dim)
        return x + self.mlp(self.ln2(x))


class ViT(nn.Module):
    def __init__(self, config: ViTConfig) -> None:
        super().__init__()
        self.config = config
        self.embed = nn.Linear(config.patch**2, config.dim)  # one token per flattened patch
        self.cls = nn.Parameter(torch.zeros(1, 1, config.dim))
        self.positions = nn.Parameter(torch.randn(1, config.tokens, config.dim) * 0.02)
        self.blocks = nn.ModuleList(Block(config) for _ in range(config.layers))
        self.ln = nn.LayerNorm(config.dim)
        self.head = nn.Linear(config.dim, config.classes)

    def forward(self, x: Tensor) -> Tensor:
        tokens = self.embed(patchify(x, self.config.patch))  # (B, patches, dim)
        x = torch.cat([self.cls.expand(len(tokens), -1, -1), tokens], dim=1) + self.positions  # (B, tokens, dim)
        for block in self.blocks:
            x = block(x)
        return self.head(self.ln(x)[:, 0])  # (B, classes): the class token alone is read


def build_model(config: ViTConfig | None = None, weights: Path = WEIGHTS) -> ViT:
    """The recorded model: the trained weights, in eval mode."""
    model = ViT(config or ViTConfig())
    state, _ = stored.read(weights)
    model.load_state_dict(state)
    return model.eval()
