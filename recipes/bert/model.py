"""Tiny BERT pretraining: one post-LN encoder layer, a tied MLM head and a tanh-pooled NSP head."""

import math

import torch
from torch import Tensor, nn

VOCAB, LENGTH, SEGMENTS, WIDTH, HEADS, FFN = 16, 6, 2, 8, 2, 32
CLS, SEP, MASK = 1, 2, 3  # special token ids of the recorded examples
WEIGHT_SEED = 23  # torch.manual_seed(WEIGHT_SEED) right before construction gives the recorded weights


class SelfAttention(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.query = nn.Linear(WIDTH, WIDTH)
        self.key = nn.Linear(WIDTH, WIDTH)
        self.value = nn.Linear(WIDTH, WIDTH)
        self.softmax = nn.Softmax(dim=-1)  # a module, so a forward hook can read the attention weights
        self.project = nn.Linear(WIDTH, WIDTH)

    def forward(self, x: Tensor, mask: Tensor) -> Tensor:
        # x: (B, T, WIDTH); mask: (T, T) additive, 0 where query i may read key j and -inf where not
        q = self.query(x).unflatten(-1, (HEADS, -1)).transpose(1, 2)  # (B, heads, T, head_dim)
        k = self.key(x).unflatten(-1, (HEADS, -1)).transpose(1, 2)  # (B, heads, T, head_dim)
        v = self.value(x).unflatten(-1, (HEADS, -1)).transpose(1, 2)  # (B, heads, T, head_dim)
        scores = q @ k.transpose(-2, -1) / math.sqrt(q.size(-1)) + mask  # (B, heads, T, T)
        return self.project((self.softmax(scores) @ v).transpose(1, 2).flatten(2))  # (B, T, WIDTH)


class EncoderLayer(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.attention = SelfAttention()
        self.attention_norm = nn.LayerNorm(WIDTH)
        self.up = nn.Linear(WIDTH, FFN)
        self.gelu = nn.GELU()  # exact (erf) GELU, as in BERT
        self.down = nn.Linear(FFN, WIDTH)
        self.output_norm = nn.LayerNorm(WIDTH)

    def forward(self, x: Tensor, mask: Tensor) -> Tensor:
        x = self.attention_norm(x + self.attention(x, mask))  # post-LN: normalise after the residual
        return self.output_norm(x + self.down(self.gelu(self.up(x))))  # (B, T, WIDTH)


class TinyBertPretraining(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.word_embeddings = nn.Embedding(VOCAB, WIDTH)
        self.position_embeddings = nn.Embedding(LENGTH, WIDTH)
        self.segment_embeddings = nn.Embedding(SEGMENTS, WIDTH)
        self.embedding_norm = nn.LayerNorm(WIDTH)
        self.encoder = EncoderLayer()
        self.mlm_transform = nn.Linear(WIDTH, WIDTH)
        self.mlm_gelu = nn.GELU()
        self.mlm_norm = nn.LayerNorm(WIDTH)
        self.mlm_decoder = nn.Linear(WIDTH, VOCAB)
        self.mlm_decoder.weight = self.word_embeddings.weight  # tied: one matrix embeds and decodes
        self.pooler = nn.Linear(WIDTH, WIDTH)
        self.pooler_tanh = nn.Tanh()
        self.nsp_head = nn.Linear(WIDTH, 2)

    def forward(self, input_ids: Tensor, segment_ids: Tensor, causal: bool = False) -> Tensor:
        positions = torch.arange(input_ids.size(1), device=input_ids.device)  # (T,)
        x = self.embedding_norm(
            self.word_embeddings(input_ids)
            + self.position_embeddings(positions)
            + self.segment_embeddings(segment_ids)
        )  # (B, T, WIDTH)
        h = self.encoder(x, attention_mask(input_ids.size(1), causal, x.device))  # (B, T, WIDTH)
        mlm_logits = self.mlm_decoder(self.mlm_norm(self.mlm_gelu(self.mlm_transform(h))))  # (B, T, VOCAB)
        nsp_logits = self.nsp_head(self.pooler_tanh(self.pooler(h[:, 0])))  # (B, 2), read from CLS
        return torch.cat([mlm_logits.flatten(1), nsp_logits], dim=1)  # (B, T * VOCAB + 2) = (B, 98)


def attention_mask(length: int, causal: bool, device: torch.device | None = None) -> Tensor:
    """Additive mask: all zeros (BERT sees both sides), or -inf above the diagonal (causal control)."""
    mask = torch.zeros(length, length, device=device)
    if causal:
        mask = mask.masked_fill(torch.ones_like(mask, dtype=torch.bool).triu(1), float("-inf"))
    return mask  # (T, T)


def unpack(output: Tensor) -> tuple[Tensor, Tensor]:
    """Split the packed (B, 98) output into MLM logits (B, T, VOCAB) and NSP logits (B, 2)."""
    return output[:, : LENGTH * VOCAB].unflatten(1, (LENGTH, VOCAB)), output[:, LENGTH * VOCAB :]


def build_model() -> TinyBertPretraining:
    """The recorded model: PyTorch's default initialisation in float32 after seeding, in eval mode."""
    torch.manual_seed(WEIGHT_SEED)
    return TinyBertPretraining().eval()


def mlm_loss(mlm_logits: Tensor, original_ids: Tensor, selected: Tensor) -> Tensor:
    """Masked-token cross entropy: mean over the selected positions only, against the original ids."""
    return nn.functional.cross_entropy(mlm_logits[selected], original_ids[selected])


def nsp_loss(nsp_logits: Tensor, label: Tensor) -> Tensor:
    """Sentence-pair cross entropy against 0 (IsNext) or 1 (NotNext)."""
    return nn.functional.cross_entropy(nsp_logits, label)
