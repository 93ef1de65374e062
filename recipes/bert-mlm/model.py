"""A tiny BERT trained here to fill in masked words of a small synthetic language: token, position and segment
embeddings, one post-LN encoder layer (self-attention with two heads, a GELU feed-forward), a masked-token head
that reuses the token embedding and a tanh-pooled sentence-pair head. The weights live beside this file:
weights.safetensors (bidirectional attention: the model the page shows) and causal.safetensors (its twin,
trained the same way but allowed to look left only). `python train.py` writes both."""

import math
from dataclasses import dataclass
from pathlib import Path

import torch
from torch import Tensor, nn

from recipekit import weights as stored

WEIGHTS = Path(__file__).with_name("weights.safetensors")  # the bidirectional model, written by train.py
CAUSAL_WEIGHTS = Path(__file__).with_name("causal.safetensors")  # its causal twin, written by train.py

# The language's words (recipe.toml's names say the same): a token id is a position in this tuple.
WORDS = (
    "[CLS]",
    "[SEP]",
    "[MASK]",
    "a",
    "two",  # determiners: one animal, or two
    "big",
    "small",
    "old",
    "young",  # adjectives: the language's one free choice
    "dog",
    "dogs",
    "cat",
    "cats",
    "bird",
    "birds",
    "barks",
    "bark",
    "meows",
    "meow",
    "sings",
    "sing",
    "it",
    "they",
    "loudly",
    "softly",
    "sweetly",
)
CLS, SEP, MASK = 0, 1, 2
LENGTH = 10  # [CLS] a big dog barks [SEP] it barks loudly [SEP]


@dataclass
class BertConfig:
    vocab_size: int = len(WORDS)
    max_length: int = LENGTH
    segments: int = 2  # sentence A, sentence B
    width: int = 32
    heads: int = 2
    ffn: int = 64
    layer_norm_epsilon: float = 1e-12  # BERT's


class SelfAttention(nn.Module):
    def __init__(self, config: BertConfig) -> None:
        super().__init__()
        self.heads = config.heads
        self.query = nn.Linear(config.width, config.width)
        self.key = nn.Linear(config.width, config.width)
        self.value = nn.Linear(config.width, config.width)
        self.softmax = nn.Softmax(dim=-1)  # a module, so a forward hook can read the attention weights
        self.project = nn.Linear(config.width, config.width)

    def forward(self, x: Tensor, mask: Tensor) -> Tensor:
        # x: (B, T, width); mask: (T, T) additive, 0 where query i may read key j and -inf where not
        q = self.query(x).unflatten(-1, (self.heads, -1)).transpose(1, 2)  # (B, heads, T, head_dim)
        k = self.key(x).unflatten(-1, (self.heads, -1)).transpose(1, 2)  # (B, heads, T, head_dim)
        v = self.value(x).unflatten(-1, (self.heads, -1)).transpose(1, 2)  # (B, heads, T, head_dim)
        scores = q @ k.transpose(-2, -1) / math.sqrt(q.size(-1)) + mask  # (B, heads, T, T)
        return self.project((self.softmax(scores) @ v).transpose(1, 2).flatten(2))  # (B, T, width)


class EncoderLayer(nn.Module):
    def __init__(self, config: BertConfig) -> None:
        super().__init__()
        self.attention = SelfAttention(config)
        self.attention_norm = nn.LayerNorm(config.width, eps=config.layer_norm_epsilon)
        self.up = nn.Linear(config.width, config.ffn)
        self.gelu = nn.GELU()  # exact (erf) GELU, as in BERT
        self.down = nn.Linear(config.ffn, config.width)
        self.output_norm = nn.LayerNorm(config.width, eps=config.layer_norm_epsilon)

    def forward(self, x: Tensor, mask: Tensor) -> Tensor:
        x = self.attention_norm(x + self.attention(x, mask))  # post-LN: normalise after the residual
        return self.output_norm(x + self.down(self.gelu(self.up(x))))  # (B, T, width)


class TinyBert(nn.Module):
    def __init__(self, config: BertConfig) -> None:
        super().__init__()
        self.word_embeddings = nn.Embedding(config.vocab_size, config.width)
        self.position_embeddings = nn.Embedding(config.max_length, config.width)
        self.segment_embeddings = nn.Embedding(config.segments, config.width)
        self.embedding_norm = nn.LayerNorm(config.width, eps=config.layer_norm_epsilon)
        self.encoder = EncoderLayer(config)
        self.mlm_transform = nn.Linear(config.width, config.width)
        self.mlm_gelu = nn.GELU()
        self.mlm_norm = nn.LayerNorm(config.width, eps=config.layer_norm_epsilon)
        self.mlm_decoder = nn.Linear(config.width, config.vocab_size)
        self.mlm_decoder.weight = self.word_embeddings.weight  # tied: one matrix embeds and decodes
        self.pooler = nn.Linear(config.width, config.width)
        self.pooler_tanh = nn.Tanh()
        self.nsp_head = nn.Linear(config.width, 2)

    def forward(self, input_ids: Tensor, segment_ids: Tensor, causal: bool = False) -> Tensor:
        positions = torch.arange(input_ids.size(1), device=input_ids.device)  # (T,)
        x = self.embedding_norm(
            self.word_embeddings(input_ids) + self.position_embeddings(positions) + self.segment_embeddings(segment_ids)
        )  # (B, T, width)
        h = self.encoder(x, attention_mask(input_ids.size(1), causal, x.device))  # (B, T, width)
        mlm_logits = self.mlm_decoder(self.mlm_norm(self.mlm_gelu(self.mlm_transform(h))))  # (B, T, vocab)
        nsp_logits = self.nsp_head(self.pooler_tanh(self.pooler(h[:, 0])))  # (B, 2), read from [CLS]
        return torch.cat([mlm_logits.flatten(1), nsp_logits], dim=1)  # (B, T * vocab + 2)


def attention_mask(length: int, causal: bool, device: torch.device | None = None) -> Tensor:
    """Additive mask: all zeros (BERT reads both sides), or -inf above the diagonal (the causal twin)."""
    mask = torch.zeros(length, length, device=device)
    if causal:
        mask = mask.masked_fill(torch.ones_like(mask, dtype=torch.bool).triu(1), float("-inf"))
    return mask  # (T, T)


def load(path: Path) -> TinyBert:
    """A model with the weights train.py stored at `path`, in eval mode."""
    model = TinyBert(BertConfig())
    state, _ = stored.read(path)
    missing, unexpected = model.load_state_dict(state, strict=False)
    if missing != ["mlm_decoder.weight"] or unexpected:  # the decoder is the embedding, stored once
        raise ValueError(f"{path.name} does not fit the model: missing {missing}, unexpected {unexpected}")
    return model.eval()


def build_model() -> TinyBert:
    """The recorded model: the bidirectional weights from weights.safetensors, in eval mode."""
    return load(WEIGHTS)


def causal_twin() -> TinyBert:
    """The same model trained under a causal mask (causal.safetensors): run it with causal=True."""
    return load(CAUSAL_WEIGHTS)
