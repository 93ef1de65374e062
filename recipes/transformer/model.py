"""The encoder-decoder Transformer of Vaswani et al. (2017) at toy size: post-LN layers, sinusoidal positions,
one embedding shared by source, target and output. It is trained to write a sequence of digits backwards, so
every answer can be checked by eye and the cross-attention of a trained model shows the alignment: the first
output digit looks at the last source digit. The trained weights live beside this file in weights.safetensors
(`python train.py`)."""

import math
from dataclasses import dataclass
from pathlib import Path

import torch
from torch import Tensor, nn

from recipekit import replay as kit
from recipekit import weights as stored

WEIGHTS = Path(__file__).with_name("weights.safetensors")  # written by train.py
DIGITS = tuple("0123456789")
TOKENS = (*DIGITS, "<s>", "</s>")  # <s> starts the decoder's input, </s> ends the output
BOS, EOS = TOKENS.index("<s>"), TOKENS.index("</s>")


@dataclass
class TransformerConfig:
    vocab: int = len(TOKENS)
    d_model: int = 32
    heads: int = 2
    d_ff: int = 64  # the paper's 4x is 2048 for 512; twice the width is enough here
    encoder_layers: int = 2
    decoder_layers: int = 2
    positions: int = 16  # the longest sequence the sinusoids are tabulated for


def sinusoids(positions: int, d_model: int) -> Tensor:
    """PE(pos, 2i) = sin(pos / 10000^(2i/d)), PE(pos, 2i+1) = cos(...): fixed, not learned (section 3.5)."""
    pos = torch.arange(positions, dtype=torch.float32)[:, None]  # (P, 1)
    rate = torch.exp(torch.arange(0, d_model, 2, dtype=torch.float32) * (-math.log(10000.0) / d_model))
    table = torch.zeros(positions, d_model)
    table[:, 0::2] = torch.sin(pos * rate)
    table[:, 1::2] = torch.cos(pos * rate)
    return table  # (P, d_model)


class MultiHeadAttention(nn.Module):
    """softmax(Q Kᵀ / √d_k) V in every head at once; queries come from one sequence, keys and values from
    another (cross-attention) or the same one (self-attention). A causal mask hides later keys."""

    def __init__(self, config: TransformerConfig, causal: bool = False) -> None:
        super().__init__()
        self.heads, self.causal = config.heads, causal
        self.q = nn.Linear(config.d_model, config.d_model)
        self.k = nn.Linear(config.d_model, config.d_model)
        self.v = nn.Linear(config.d_model, config.d_model)
        self.softmax = nn.Softmax(dim=-1)
        self.out = nn.Linear(config.d_model, config.d_model)

    def split(self, x: Tensor) -> Tensor:
        B, T, C = x.shape
        return x.view(B, T, self.heads, C // self.heads).transpose(1, 2)  # (B, heads, T, head_dim)

    def forward(self, x: Tensor, memory: Tensor) -> Tensor:
        q, k, v = self.split(self.q(x)), self.split(self.k(memory)), self.split(self.v(memory))
        scores = q @ k.transpose(-2, -1) / math.sqrt(q.size(-1))  # (B, heads, T_query, T_key)
        if self.causal:
            T = x.size(1)
            later = torch.ones(T, T, dtype=torch.bool, device=x.device).triu(1)
            scores = scores.masked_fill(later, float("-inf"))
        weights = self.softmax(scores)  # (B, heads, T_query, T_key): each row sums to 1
        context = (weights @ v).transpose(1, 2).reshape(x.shape)  # (B, T_query, d_model): heads side by side
        return self.out(context)


class FeedForward(nn.Module):
    """FFN(x) = max(0, x W1 + b1) W2 + b2, the same at every position."""

    def __init__(self, config: TransformerConfig) -> None:
        super().__init__()
        self.fc1 = nn.Linear(config.d_model, config.d_ff)
        self.relu = nn.ReLU()
        self.fc2 = nn.Linear(config.d_ff, config.d_model)

    def forward(self, x: Tensor) -> Tensor:
        return self.fc2(self.relu(self.fc1(x)))


class EncoderLayer(nn.Module):
    """Post-LN, as in the paper: LayerNorm(x + Sublayer(x)) after self-attention and after the feed-forward."""

    def __init__(self, config: TransformerConfig) -> None:
        super().__init__()
        self.self_attn = MultiHeadAttention(config)
        self.norm1 = nn.LayerNorm(config.d_model)
        self.ffn = FeedForward(config)
        self.norm2 = nn.LayerNorm(config.d_model)

    def forward(self, x: Tensor) -> Tensor:
        x = self.norm1(x + self.self_attn(x, x))  # every source position sees every other
        return self.norm2(x + self.ffn(x))


class DecoderLayer(nn.Module):
    """Masked self-attention over the output so far, then cross-attention to the encoder's output, then the
    feed-forward; each followed by an addition and a LayerNorm."""

    def __init__(self, config: TransformerConfig) -> None:
        super().__init__()
        self.self_attn = MultiHeadAttention(config, causal=True)
        self.norm1 = nn.LayerNorm(config.d_model)
        self.cross_attn = MultiHeadAttention(config)
        self.norm2 = nn.LayerNorm(config.d_model)
        self.ffn = FeedForward(config)
        self.norm3 = nn.LayerNorm(config.d_model)

    def forward(self, y: Tensor, memory: Tensor) -> Tensor:
        y = self.norm1(y + self.self_attn(y, y))  # each output position sees itself and earlier ones
        y = self.norm2(y + self.cross_attn(y, memory))  # and every source position
        return self.norm3(y + self.ffn(y))


class Transformer(nn.Module):
    def __init__(self, config: TransformerConfig) -> None:
        super().__init__()
        self.config = config
        self.embed = nn.Embedding(config.vocab, config.d_model)  # shared by source, target and output (3.4)
        # N(0, 1/d_model), so that the scaled embedding has unit size and the tied output starts near uniform.
        nn.init.normal_(self.embed.weight, std=config.d_model**-0.5)
        self.register_buffer("positions", sinusoids(config.positions, config.d_model), persistent=False)
        self.encoder = nn.ModuleList(EncoderLayer(config) for _ in range(config.encoder_layers))
        self.decoder = nn.ModuleList(DecoderLayer(config) for _ in range(config.decoder_layers))

    def embed_tokens(self, tokens: Tensor) -> Tensor:
        """Embeddings scaled by √d_model, plus the sinusoid of each position."""
        return self.embed(tokens) * math.sqrt(self.config.d_model) + self.positions[: tokens.size(1)]

    def encode(self, source: Tensor) -> Tensor:
        memory = self.embed_tokens(source)  # (B, S, d_model)
        for layer in self.encoder:
            memory = layer(memory)
        return memory

    def decode(self, target: Tensor, memory: Tensor) -> Tensor:
        y = self.embed_tokens(target)  # (B, T, d_model)
        for layer in self.decoder:
            y = layer(y, memory)
        return y @ self.embed.weight.T  # (B, T, vocab): the output projection is the embedding, tied

    def forward(self, source: Tensor, target: Tensor) -> Tensor:
        """source (B, S) and the decoder's input target (B, T), which starts with <s> -> logits (B, T, vocab):
        at every position, a score for every token as the next output."""
        return self.decode(target, self.encode(source))


@torch.no_grad()
def greedy(
    model: Transformer, sources: Tensor, steps: int | None = None, process: str | None = None
) -> list[list[int]]:
    """Decode sources (B, S) one token at a time, each time taking the likeliest, until every row has written
    </s> or after `steps` tokens (by default S + 1: a reversal and its end). Each row's answer excludes <s>
    and ends at its first </s>, if it wrote one. With `process`, the tokens entering each step are a recorded
    case's (recipekit.replay.step_state), so that a replay can check the decoding one step at a time."""
    memory = model.encode(sources)  # (B, S, d_model), computed once for every step
    out = torch.full((len(sources), 1), BOS)
    for k in range(steps or sources.size(1) + 1):
        if process is not None:
            out = kit.step_state(process, out, f"token {k + 1}")  # (B, k + 1): what the decoder has written so far
        out = torch.cat([out, model.decode(out, memory)[:, -1:].argmax(-1)], 1)  # (B, steps so far + 1)
        if bool((out == EOS).any(1).all()):
            break
    return [row[: row.index(EOS) + 1] if EOS in row else row for row in out[:, 1:].tolist()]


def build_model(config: TransformerConfig | None = None, weights: Path = WEIGHTS) -> Transformer:
    """The recorded model: the trained weights from weights.safetensors, in eval mode."""
    model = Transformer(config or TransformerConfig())
    state, _ = stored.read(weights)
    model.load_state_dict(state)
    return model.eval()
