"""A two-layer attention-only transformer, the smallest model in which Olsson et al. (2022) found induction heads:
learned token and position embeddings, two layers of causal multi-head self-attention added to the residual
stream, no MLPs and no LayerNorm, and an unembedding. Trained on sequences whose second half repeats a random first
half, it learns to predict the repeat: a layer-1 head writes "the token before me" into each position, and a
layer-2 head looks for the position whose previous token is the current one and copies what stands there. The
trained weights live beside this file in weights.safetensors (`python train.py`)."""

import math
from dataclasses import dataclass
from pathlib import Path

import torch
from torch import Tensor, nn

from recipekit import weights as stored

WEIGHTS = Path(__file__).with_name("weights.safetensors")  # written by train.py


@dataclass
class InductionConfig:
    vocab_size: int = 26  # recipe.toml's names: the letters a-z
    block_size: int = 32  # the context: every training sequence fills it
    n_layer: int = 2
    n_head: int = 4
    n_embd: int = 64


class CausalSelfAttention(nn.Module):
    def __init__(self, config: InductionConfig) -> None:
        super().__init__()
        self.n_head = config.n_head
        self.qk = nn.Linear(config.n_embd, 2 * config.n_embd, bias=False)  # query and key of every head
        self.v = nn.Linear(config.n_embd, config.n_embd, bias=False)  # and its value
        self.softmax = nn.Softmax(dim=-1)  # a module, so a forward hook reads the attention pattern
        self.out = nn.Linear(config.n_embd, config.n_embd, bias=False)  # the heads' outputs into the stream
        self.register_buffer(  # True above the diagonal: a key to the right of its query, never read
            "future",
            torch.triu(torch.ones(config.block_size, config.block_size, dtype=torch.bool), 1),
            persistent=False,
        )

    def forward(self, x: Tensor, pos: Tensor) -> Tensor:
        B, T, C = x.size()  # batch, time, channels
        q, k = self.qk(x + pos).split(C, dim=2)  # each (B, T, C): where a head looks may depend on position...
        v = self.v(x)  # (B, T, C): ...what it moves does not
        q = q.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)  # (B, heads, T, head_dim)
        k = k.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)  # (B, heads, T, head_dim)
        v = v.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)  # (B, heads, T, head_dim)
        scores = (q @ k.transpose(-2, -1)) / math.sqrt(k.size(-1))  # (B, heads, T, T)
        scores = scores.masked_fill(self.future[:T, :T], float("-inf"))  # a query reads itself and the left only
        pattern = self.softmax(scores)  # (B, heads, T, T): each row sums to one
        y = (pattern @ v).transpose(1, 2).contiguous().view(B, T, C)  # the heads side by side: (B, T, C)
        return self.out(y)


class AttentionOnly(nn.Module):
    def __init__(self, config: InductionConfig) -> None:
        super().__init__()
        self.config = config
        self.embed = nn.Embedding(config.vocab_size, config.n_embd)
        self.pos = nn.Embedding(config.block_size, config.n_embd)
        self.layers = nn.ModuleList([CausalSelfAttention(config) for _ in range(config.n_layer)])
        self.unembed = nn.Linear(config.n_embd, config.vocab_size, bias=False)

    def forward(self, idx: Tensor) -> Tensor:
        x = self.embed(idx)  # the residual stream: (B, T, C), tokens only
        pos = self.pos(torch.arange(idx.size(1), device=idx.device))  # (T, C), read where attention scores are made
        for attention in self.layers:
            x = x + attention(x, pos)  # each layer reads the stream and adds to it
        return self.unembed(x)  # (B, T, vocab): a next-token score at every position


def build_model(config: InductionConfig | None = None, weights: Path = WEIGHTS) -> AttentionOnly:
    """The recorded model: the trained weights from weights.safetensors, in eval mode."""
    model = AttentionOnly(config or InductionConfig())
    state, _ = stored.read(weights)
    model.load_state_dict(state)
    return model.eval()
