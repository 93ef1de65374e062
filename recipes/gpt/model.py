"""A tiny GPT-2: token and learned position embeddings, pre-LN blocks of causal self-attention and a 4x MLP
with tanh-approximate GELU, a final LayerNorm and an LM head that reuses the token embedding. It is trained to
sort four digits: after "3 1 4 1 =" it writes "1 1 3 4". The trained weights live beside this file in
weights.safetensors (`python train.py`)."""

import math
from dataclasses import dataclass
from pathlib import Path

import torch
from torch import Tensor, nn

from recipekit import weights as stored

WEIGHTS = Path(__file__).with_name("weights.safetensors")  # written by train.py
DIGITS = 4  # the digits of a problem, then "=", then the same digits in order
EQUALS = 10  # the token between a problem and its answer; tokens 0-9 are the digits


@dataclass
class GPTConfig:
    vocab_size: int = 11  # recipe.toml's names: the digits 0-9 and "="
    block_size: int = 2 * DIGITS  # a problem, "=" and all but the last answer digit: every answer digit is read
    n_layer: int = 2
    n_head: int = 2
    n_embd: int = 32
    layer_norm_epsilon: float = 1e-5


class CausalSelfAttention(nn.Module):
    def __init__(self, config: GPTConfig) -> None:
        super().__init__()
        self.n_head = config.n_head
        self.c_attn = nn.Linear(config.n_embd, 3 * config.n_embd)  # query, key and value for all heads at once
        self.softmax = nn.Softmax(dim=-1)  # a module, so a forward hook can read the attention weights
        self.c_proj = nn.Linear(config.n_embd, config.n_embd)
        # GPT-2 keeps its causal mask as a buffer: 1 where query i may read key j (j <= i)
        self.register_buffer(
            "bias",
            torch.tril(torch.ones(config.block_size, config.block_size)).view(
                1, 1, config.block_size, config.block_size
            ),
            persistent=False,
        )

    def forward(self, x: Tensor, causal: bool = True) -> Tensor:
        B, T, C = x.size()  # batch, time, channels
        q, k, v = self.c_attn(x).split(C, dim=2)  # each (B, T, C)
        q = q.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)  # (B, heads, T, head_dim)
        k = k.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)  # (B, heads, T, head_dim)
        v = v.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)  # (B, heads, T, head_dim)
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))  # (B, heads, T, T)
        if causal:
            att = att.masked_fill(self.bias[:, :, :T, :T] == 0, float("-inf"))  # no looking right
        att = self.softmax(att)
        y = (att @ v).transpose(1, 2).contiguous().view(B, T, C)  # heads side by side again: (B, T, C)
        return self.c_proj(y)


class MLP(nn.Module):
    def __init__(self, config: GPTConfig) -> None:
        super().__init__()
        self.c_fc = nn.Linear(config.n_embd, 4 * config.n_embd)
        self.gelu = nn.GELU(approximate="tanh")  # GPT-2's GELU
        self.c_proj = nn.Linear(4 * config.n_embd, config.n_embd)

    def forward(self, x: Tensor) -> Tensor:
        return self.c_proj(self.gelu(self.c_fc(x)))  # (B, T, C)


class Block(nn.Module):
    def __init__(self, config: GPTConfig) -> None:
        super().__init__()
        self.ln_1 = nn.LayerNorm(config.n_embd, eps=config.layer_norm_epsilon)
        self.attn = CausalSelfAttention(config)
        self.ln_2 = nn.LayerNorm(config.n_embd, eps=config.layer_norm_epsilon)
        self.mlp = MLP(config)

    def forward(self, x: Tensor, causal: bool = True) -> Tensor:
        x = x + self.attn(self.ln_1(x), causal)  # pre-LN: normalise the branch's input, add to the stream
        return x + self.mlp(self.ln_2(x))  # (B, T, C)


class GPT(nn.Module):
    def __init__(self, config: GPTConfig) -> None:
        super().__init__()
        self.config = config
        self.wte = nn.Embedding(config.vocab_size, config.n_embd)
        self.wpe = nn.Embedding(config.block_size, config.n_embd)
        self.h = nn.ModuleList([Block(config) for _ in range(config.n_layer)])
        self.ln_f = nn.LayerNorm(config.n_embd, eps=config.layer_norm_epsilon)
        self.lm_head = nn.Linear(config.n_embd, config.vocab_size, bias=False)
        self.lm_head.weight = self.wte.weight  # tied: one matrix embeds and predicts

    def forward(self, idx: Tensor, causal: bool = True) -> Tensor:
        B, T = idx.size()
        pos = torch.arange(T, device=idx.device)  # (T,)
        x = self.wte(idx) + self.wpe(pos)  # (B, T, C)
        for block in self.h:
            x = block(x, causal)
        return self.lm_head(self.ln_f(x))  # (B, T, vocab): a next-token score at every position


def build_model(config: GPTConfig | None = None, weights: Path = WEIGHTS) -> GPT:
    """The recorded model: the trained weights from weights.safetensors, in eval mode."""
    model = GPT(config or GPTConfig())
    state, _ = stored.read(weights)
    missing, unexpected = model.load_state_dict(state, strict=False)
    if missing != ["lm_head.weight"] or unexpected:  # the head is the embedding, stored once as wte.weight
        raise ValueError(f"{weights.name} does not fit the model: missing {missing}, unexpected {unexpected}")
    return model.eval()


def next_token_loss(logits: Tensor, idx: Tensor) -> Tensor:
    """Cross entropy of each position's prediction against the token after it, averaged. (B,) per sequence
    would be the same with B = 1; the last position has no next token and is not scored."""
    return nn.functional.cross_entropy(logits[:, :-1].flatten(0, 1), idx[:, 1:].flatten())
