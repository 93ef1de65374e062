"""BERT (Devlin et al. 2018) at any size, loaded from a local checkpoint in the Hugging Face layout.

The same post-LN encoder as the tiny recipe: token + position + segment embeddings and LayerNorm, then
layers of self-attention and a 4x feed-forward network, each followed by residual + LayerNorm, exact (erf)
GELU. Its head is the MLM head (linear, GELU, LayerNorm, then the word-embedding matrix itself as the decoder,
plus a bias) where the checkpoint has one, else sentence-transformers' mean pooling and normalisation: an
encoder-only checkpoint (a BertModel, as sentence-transformers models are) turns a sentence into one vector
and cannot predict a [MASK]. A checkpoint folder holds `config.json`, `tokenizer.json` or `vocab.txt`, and
`model.safetensors` or `pytorch_model.bin`; its tensors are mapped onto these modules by name (MAPPING).
Without a checkpoint, build_model() gives the bert-base-uncased architecture with random weights: enough to
record the graph, never to record numbers.
"""

import json
import math
import re
from dataclasses import dataclass, fields, replace
from pathlib import Path

import torch
from torch import Tensor, nn

from recipekit.checkpoints import CheckpointError, assign, check_size, read_config, read_weights, whole_numbers

ARCHITECTURES = ("BertForMaskedLM", "BertForPreTraining", "BertModel")  # the last one without the MLM head
TOKENIZER_FILES = ("tokenizer.json", "vocab.txt")  # the fast tokenizer's own file first, as transformers reads it


@dataclass(frozen=True)
class BertConfig:
    vocab_size: int = 30522
    hidden_size: int = 768
    num_hidden_layers: int = 12
    num_attention_heads: int = 12
    intermediate_size: int = 3072
    max_position_embeddings: int = 512
    type_vocab_size: int = 2
    layer_norm_eps: float = 1e-12
    mlm: bool = True  # whether the checkpoint's weights hold the MLM head (not a config.json key)

    @classmethod
    def from_checkpoint(cls, folder: Path) -> "BertConfig":
        """The architecture config.json describes; CheckpointError for anything this recipe does not compute."""
        data = read_config(folder, "bert", "BERT")
        named = data.get("architectures") or []
        if named and not set(named) & set(ARCHITECTURES):
            raise CheckpointError(f"config.json names {', '.join(named)}; this recipe reads {', '.join(ARCHITECTURES)}")
        unsupported = {"hidden_act": "gelu", "position_embedding_type": "absolute"}
        for key, needed in unsupported.items():
            if data.get(key, needed) != needed:
                raise CheckpointError(
                    f"config.json: {key} {data[key]!r} is not supported; this recipe computes {key} {needed!r}"
                )
        values = whole_numbers(data, [f.name for f in fields(cls) if f.name != "mlm"], "layer_norm_eps")
        config = cls(**values)
        if config.hidden_size % config.num_attention_heads:
            raise CheckpointError("config.json: hidden_size is not a multiple of num_attention_heads")
        config.check_size()
        return config

    def parameters(self) -> int:
        """How many parameters the model this config describes holds (the MLM head included)."""
        h, i = self.hidden_size, self.intermediate_size
        embeddings = (self.vocab_size + self.max_position_embeddings + self.type_vocab_size + 2) * h
        layer = 4 * (h * h + h) + 2 * h * i + i + h + 4 * h  # attention, feed-forward, two LayerNorms
        head = h * h + 3 * h + self.vocab_size if self.mlm else 0
        return embeddings + self.num_hidden_layers * layer + head

    def check_size(self) -> None:
        """CheckpointError before building a model larger than the recipe process may hold."""
        check_size(self.parameters(), f"{self.num_hidden_layers} layers of width {self.hidden_size}")


class Embeddings(nn.Module):
    def __init__(self, c: BertConfig) -> None:
        super().__init__()
        self.word = nn.Embedding(c.vocab_size, c.hidden_size)
        self.position = nn.Embedding(c.max_position_embeddings, c.hidden_size)
        self.segment = nn.Embedding(c.type_vocab_size, c.hidden_size)
        self.norm = nn.LayerNorm(c.hidden_size, eps=c.layer_norm_eps)

    def forward(self, input_ids: Tensor, segment_ids: Tensor) -> Tensor:
        positions = torch.arange(input_ids.size(1), device=input_ids.device)  # (T,)
        return self.norm(self.word(input_ids) + self.position(positions) + self.segment(segment_ids))  # (B, T, C)


class SelfAttention(nn.Module):
    def __init__(self, c: BertConfig) -> None:
        super().__init__()
        self.heads = c.num_attention_heads
        self.query = nn.Linear(c.hidden_size, c.hidden_size)
        self.key = nn.Linear(c.hidden_size, c.hidden_size)
        self.value = nn.Linear(c.hidden_size, c.hidden_size)
        self.softmax = nn.Softmax(dim=-1)  # a module, so a forward hook can read the attention weights
        self.project = nn.Linear(c.hidden_size, c.hidden_size)

    def forward(self, x: Tensor) -> Tensor:
        q = self.query(x).unflatten(-1, (self.heads, -1)).transpose(1, 2)  # (B, heads, T, head_dim)
        k = self.key(x).unflatten(-1, (self.heads, -1)).transpose(1, 2)  # (B, heads, T, head_dim)
        v = self.value(x).unflatten(-1, (self.heads, -1)).transpose(1, 2)  # (B, heads, T, head_dim)
        weights = self.softmax(q @ k.transpose(-2, -1) / math.sqrt(q.size(-1)))  # (B, heads, T, T)
        return self.project((weights @ v).transpose(1, 2).flatten(2))  # (B, T, C)


class EncoderLayer(nn.Module):
    def __init__(self, c: BertConfig) -> None:
        super().__init__()
        self.attention = SelfAttention(c)
        self.attention_norm = nn.LayerNorm(c.hidden_size, eps=c.layer_norm_eps)
        self.up = nn.Linear(c.hidden_size, c.intermediate_size)
        self.gelu = nn.GELU()  # exact (erf) GELU, as BERT's "gelu"
        self.down = nn.Linear(c.intermediate_size, c.hidden_size)
        self.output_norm = nn.LayerNorm(c.hidden_size, eps=c.layer_norm_eps)

    def forward(self, x: Tensor) -> Tensor:
        x = self.attention_norm(x + self.attention(x))  # post-LN: normalise after the residual
        return self.output_norm(x + self.down(self.gelu(self.up(x))))  # (B, T, C)


class MaskedLMHead(nn.Module):
    """Transform each position, then score it against every word embedding (the decoder is tied to them)."""

    def __init__(self, c: BertConfig) -> None:
        super().__init__()
        self.transform = nn.Linear(c.hidden_size, c.hidden_size)
        self.gelu = nn.GELU()
        self.norm = nn.LayerNorm(c.hidden_size, eps=c.layer_norm_eps)
        self.bias = nn.Parameter(torch.zeros(c.vocab_size))

    def transformed(self, h: Tensor) -> Tensor:
        return self.norm(self.gelu(self.transform(h)))  # (..., C): what the decoder reads

    def decode(self, h: Tensor, word_embeddings: Tensor) -> Tensor:
        return nn.functional.linear(h, word_embeddings, self.bias)  # (..., vocab): h · E[word] + bias

    def forward(self, h: Tensor, word_embeddings: Tensor) -> Tensor:
        return self.decode(self.transformed(h), word_embeddings)  # (B, T, vocab)


class SentencePooling(nn.Module):
    """sentence-transformers' reading of an encoder: the mean of every token's final state ([CLS] and [SEP]
    included), scaled to length one, so that two sentences' cosine similarity is their dot product."""

    def mean(self, h: Tensor) -> Tensor:
        return h.mean(dim=-2)  # (B, C): one sentence, no padding to leave out

    def forward(self, h: Tensor) -> Tensor:
        return nn.functional.normalize(self.mean(h), dim=-1)  # (B, C)


class Bert(nn.Module):
    """The encoder and its head: the MLM head (`config.mlm`), else sentence pooling."""

    def __init__(self, c: BertConfig) -> None:
        super().__init__()
        self.config = c
        self.embeddings = Embeddings(c)
        self.layers = nn.ModuleList(EncoderLayer(c) for _ in range(c.num_hidden_layers))
        self.head = MaskedLMHead(c) if c.mlm else SentencePooling()

    def encode(self, input_ids: Tensor, segment_ids: Tensor) -> Tensor:
        x = self.embeddings(input_ids, segment_ids)  # (B, T, C)
        for layer in self.layers:
            x = layer(x)
        return x

    def forward(self, input_ids: Tensor, segment_ids: Tensor | None = None) -> Tensor:
        if segment_ids is None:
            segment_ids = torch.zeros_like(input_ids)
        h = self.encode(input_ids, segment_ids)  # (B, T, C)
        if self.config.mlm:
            return self.head(h, self.embeddings.word.weight)  # (B, T, vocab)
        return self.head(h)  # (B, C): the sentence's embedding


# Checkpoint tensor names (after the legacy gamma/beta renaming) -> this recipe's parameter names.
MAPPING = [
    (r"bert\.embeddings\.word_embeddings\.", "embeddings.word."),
    (r"bert\.embeddings\.position_embeddings\.", "embeddings.position."),
    (r"bert\.embeddings\.token_type_embeddings\.", "embeddings.segment."),
    (r"bert\.embeddings\.LayerNorm\.", "embeddings.norm."),
    (r"bert\.encoder\.layer\.(\d+)\.attention\.self\.(query|key|value)\.", r"layers.\1.attention.\2."),
    (r"bert\.encoder\.layer\.(\d+)\.attention\.output\.dense\.", r"layers.\1.attention.project."),
    (r"bert\.encoder\.layer\.(\d+)\.attention\.output\.LayerNorm\.", r"layers.\1.attention_norm."),
    (r"bert\.encoder\.layer\.(\d+)\.intermediate\.dense\.", r"layers.\1.up."),
    (r"bert\.encoder\.layer\.(\d+)\.output\.dense\.", r"layers.\1.down."),
    (r"bert\.encoder\.layer\.(\d+)\.output\.LayerNorm\.", r"layers.\1.output_norm."),
    (r"cls\.predictions\.transform\.dense\.", "head.transform."),
    (r"cls\.predictions\.transform\.LayerNorm\.", "head.norm."),
    (r"cls\.predictions\.bias$", "head.bias"),
]
# Present in some checkpoints, not computed here: the NSP pooler and head, the position-id buffer, and the
# decoder's copies of the tied embedding matrix and of the bias.
IGNORED = re.compile(
    r"bert\.pooler\.|cls\.seq_relationship\.|bert\.embeddings\.position_ids$"
    r"|cls\.predictions\.decoder\.(weight|bias)$"
)


def recipe_name(name: str) -> str | None:
    """A checkpoint tensor's name in this recipe; None for one that is not computed here."""
    name = re.sub(r"LayerNorm\.gamma$", "LayerNorm.weight", re.sub(r"LayerNorm\.beta$", "LayerNorm.bias", name))
    if not name.startswith(("bert.", "cls.")):
        name = "bert." + name  # a bare BertModel's names have no prefix
    if IGNORED.match(name):
        return None
    for pattern, replacement in MAPPING:
        if re.match(pattern, name):
            return re.sub(pattern, replacement, name)
    raise CheckpointError(f"the weights hold {name!r}, which is not part of a BERT model")


def load_checkpoint(folder: str | Path) -> Bert:
    """The checkpoint's model in eval mode, with the MLM head where its weights hold one; CheckpointError names
    a missing, misshapen or extra tensor."""
    folder = Path(folder)
    config = BertConfig.from_checkpoint(folder)
    source, tensors = read_weights(folder)
    config = replace(config, mlm=any(recipe_name(name) == "head.bias" for name in tensors))
    what = "a BERT masked-LM model" if config.mlm else "a BERT encoder"
    return assign(lambda: Bert(config), tensors, recipe_name, source, f"a {config.num_hidden_layers}-layer model", what)


def build_model(checkpoint: str | None = None) -> Bert:
    """The checkpoint's model, or bert-base-uncased's architecture with seeded random weights without one."""
    if checkpoint:
        return load_checkpoint(checkpoint)
    torch.manual_seed(0)
    return Bert(BertConfig()).eval()


@dataclass(frozen=True)
class Vocabulary:
    """The checkpoint's WordPiece tokenizer, lower-casing (and accent stripping) as its config says."""

    tokenizer: object  # tokenizers.Tokenizer
    lowercase: bool

    def encode(self, text: str) -> tuple[list[str], list[int]]:
        """`[CLS] text [SEP]` as WordPiece tokens and their ids; `[MASK]` in the text stays one token."""
        encoding = self.tokenizer.encode(text)
        return encoding.tokens, encoding.ids

    def id(self, token: str) -> int | None:
        return self.tokenizer.token_to_id(token)

    def token(self, token_id: int) -> str:
        return self.tokenizer.id_to_token(token_id)


def load_vocabulary(folder: str | Path, vocab_size: int) -> Vocabulary:
    """The checkpoint's tokenizer: tokenizer.json as saved (its normaliser decides the lower-casing), else
    vocab.txt with tokenizer_config.json's do_lower_case (True when absent, as for BertTokenizer),
    strip_accents and tokenize_chinese_chars."""
    folder = Path(folder)
    if (folder / "tokenizer.json").is_file():
        tokenizer, lowercase = _saved_tokenizer(folder / "tokenizer.json")
    elif (folder / "vocab.txt").is_file():
        tokenizer, lowercase = _wordpiece_tokenizer(folder)
    else:
        raise CheckpointError(f"the checkpoint folder has neither {' nor '.join(TOKENIZER_FILES)}")
    size = tokenizer.get_vocab_size()
    if size > vocab_size:
        raise CheckpointError(f"the tokenizer holds {size} tokens; config.json's vocab_size is {vocab_size}")
    missing = [t for t in ("[CLS]", "[SEP]", "[MASK]", "[UNK]") if tokenizer.token_to_id(t) is None]
    if missing:
        raise CheckpointError(f"the tokenizer lacks the special token {missing[0]}")
    return Vocabulary(tokenizer, lowercase)


def _saved_tokenizer(path: Path) -> tuple[object, bool]:
    """tokenizer.json with its padding and truncation turned off: a text is traced at its own length, and one
    too long is refused, never cut."""
    from tokenizers import Tokenizer

    try:
        tokenizer = Tokenizer.from_file(str(path))
        settings = json.loads(path.read_text()).get("normalizer") or {}
    except Exception as exc:
        raise CheckpointError(f"tokenizer.json cannot be read: {str(exc)[:200]}") from exc
    tokenizer.no_padding()
    tokenizer.no_truncation()
    return tokenizer, bool(isinstance(settings, dict) and settings.get("lowercase"))


def _wordpiece_tokenizer(folder: Path) -> tuple[object, bool]:
    """vocab.txt through the `tokenizers` library, with tokenizer_config.json's settings."""
    from tokenizers import BertWordPieceTokenizer
    from tokenizers.models import WordPiece

    try:
        settings = json.loads((folder / "tokenizer_config.json").read_text())
    except FileNotFoundError:
        settings = {}
    except (OSError, ValueError) as exc:
        raise CheckpointError(f"tokenizer_config.json cannot be read as JSON: {exc}") from exc
    try:
        vocab = WordPiece.read_file(str(folder / "vocab.txt"))
    except Exception as exc:
        raise CheckpointError(f"vocab.txt cannot be read: {exc}") from exc
    if not isinstance(settings, dict):
        raise CheckpointError("tokenizer_config.json does not hold an object")
    for name, allowed in (
        ("do_lower_case", (bool,)),
        ("tokenize_chinese_chars", (bool,)),
        ("strip_accents", (bool, type(None))),
    ):
        if name in settings and not isinstance(settings[name], allowed):
            raise CheckpointError(
                f"tokenizer_config.json: {name} {settings[name]!r} is not "
                f"{'true or false' if len(allowed) == 1 else 'true, false or null'}"
            )
    lowercase = settings.get("do_lower_case", True)
    tokenizer = BertWordPieceTokenizer(
        vocab,
        lowercase=lowercase,
        strip_accents=settings.get("strip_accents"),
        handle_chinese_chars=settings.get("tokenize_chinese_chars", True),
    )
    return tokenizer, lowercase
