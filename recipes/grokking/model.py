"""A one-layer transformer that learns modular addition, as in Power et al. (2022) and Nanda et al. (2023): it reads
"a b =" and answers (a + b) mod 41. Token and learned position embeddings, one layer of causal self-attention (four
heads) and a ReLU MLP, both added to the residual stream, no LayerNorm, and an unembedding read at the last
position. Trained on half of the 1,681 sums with weight decay, it first memorises them, then, long after, generalises
to the other half: grokking. The trained weights live beside this file in weights.safetensors (`python train.py`)."""

import math
from dataclasses import dataclass
from pathlib import Path

import torch
from torch import Tensor, nn

from recipekit import weights as stored

WEIGHTS = Path(__file__).with_name("weights.safetensors")  # written by train.py
EMBEDDINGS = Path(__file__).with_name("embeddings.safetensors")  # the numbers' embedding after each round (train.py)
P = 41  # the modulus: numbers 0-40, and token 41 is "="
EQUALS = P


@dataclass
class GrokConfig:
    p: int = P
    n_embd: int = 64
    n_head: int = 4
    n_mlp: int = 256
    block_size: int = 3  # "a b ="


class Attention(nn.Module):
    def __init__(self, config: GrokConfig) -> None:
        super().__init__()
        self.n_head = config.n_head
        self.qkv = nn.Linear(config.n_embd, 3 * config.n_embd, bias=False)
        self.softmax = nn.Softmax(dim=-1)  # a module, so a forward hook reads the attention pattern
        self.out = nn.Linear(config.n_embd, config.n_embd, bias=False)
        self.register_buffer(  # True above the diagonal: a key to the right of its query, never read
            "future",
            torch.triu(torch.ones(config.block_size, config.block_size, dtype=torch.bool), 1),
            persistent=False,
        )

    def forward(self, x: Tensor) -> Tensor:
        B, T, C = x.size()
        q, k, v = self.qkv(x).split(C, dim=2)  # each (B, T, C)
        q = q.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)  # (B, heads, T, head_dim)
        k = k.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        v = v.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        scores = (q @ k.transpose(-2, -1)) / math.sqrt(k.size(-1))  # (B, heads, T, T)
        pattern = self.softmax(scores.masked_fill(self.future[:T, :T], float("-inf")))
        return self.out((pattern @ v).transpose(1, 2).contiguous().view(B, T, C))


class MLP(nn.Module):
    def __init__(self, config: GrokConfig) -> None:
        super().__init__()
        self.up = nn.Linear(config.n_embd, config.n_mlp)
        self.relu = nn.ReLU()
        self.down = nn.Linear(config.n_mlp, config.n_embd)

    def forward(self, x: Tensor) -> Tensor:
        return self.down(self.relu(self.up(x)))  # (B, T, C)


class OneLayer(nn.Module):
    def __init__(self, config: GrokConfig) -> None:
        super().__init__()
        self.config = config
        self.embed = nn.Embedding(config.p + 1, config.n_embd)  # the numbers and "="
        self.pos = nn.Embedding(config.block_size, config.n_embd)
        self.attn = Attention(config)
        self.mlp = MLP(config)
        self.unembed = nn.Linear(config.n_embd, config.p, bias=False)

    def forward(self, idx: Tensor) -> Tensor:
        x = self.embed(idx) + self.pos(torch.arange(idx.size(1), device=idx.device))  # (B, T, C)
        x = x + self.attn(x)
        x = x + self.mlp(x)
        return self.unembed(x[:, -1])  # (B, p): the answer, read after "="


def build_model(config: GrokConfig | None = None, weights: Path = WEIGHTS) -> OneLayer:
    """The recorded model: the trained weights from weights.safetensors, in eval mode."""
    model = OneLayer(config or GrokConfig())
    state, _ = stored.read(weights)
    model.load_state_dict(state)
    return model.eval()
