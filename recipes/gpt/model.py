"""A tiny GPT-2: token and learned position embeddings, pre-LN blocks of causal self-attention and a 4x MLP
with tanh-approximate GELU, a final LayerNorm and an LM head that reuses the token embedding."""

import math
from dataclasses import dataclass

import torch
from torch import Tensor, nn

WEIGHT_SEED = 1337  # torch.manual_seed(WEIGHT_SEED) right before construction gives the recorded weights


@dataclass
class GPTConfig:
    vocab_size: int = 16  # the toy vocabulary of recipe.toml, <|endoftext|> first
    block_size: int = 8  # the longest context
    n_layer: int = 2
    n_head: int = 2
    n_embd: int = 8
    layer_norm_epsilon: float = 1e-5


class CausalSelfAttention(nn.Module):
    def __init__(self, config: GPTConfig) -> None:
        super().__init__()
        self.n_head = config.n_head
        self.c_attn = nn.Linear(config.n_embd, 3 * config.n_embd)  # query, key and value for all heads at once
        self.softmax = nn.Softmax(dim=-1)  # a module, so a forward hook can read the attention weights
        self.c_proj = nn.Linear(config.n_embd, config.n_embd)
        # GPT-2 keeps its causal mask as a buffer: 1 where query i may read key j (j <= i)
        self.register_buffer("bias", torch.tril(torch.ones(config.block_size, config.block_size))
                             .view(1, 1, config.block_size, config.block_size), persistent=False)

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


def build_model(config: GPTConfig | None = None) -> GPT:
    """The recorded model: PyTorch's default initialisation in float32 after seeding, in eval mode."""
    torch.manual_seed(WEIGHT_SEED)
    return GPT(config or GPTConfig()).eval()


def next_token_loss(logits: Tensor, idx: Tensor) -> Tensor:
    """Cross entropy of each position's prediction against the token after it, averaged. (B,) per sequence
    would be the same with B = 1; the last position has no next token and is not scored."""
    return nn.functional.cross_entropy(logits[:, :-1].flatten(0, 1), idx[:, 1:].flatten())
