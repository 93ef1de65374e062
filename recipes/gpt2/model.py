"""GPT-2 (Radford et al. 2019) at any size, loaded from a local checkpoint in the Hugging Face layout.

nanoGPT's form: learned token and position embeddings, pre-LN blocks of causal self-attention and a 4x MLP with
tanh-approximate GELU, a final LayerNorm and an LM head tied to the token embedding. A checkpoint folder holds
`config.json`, `tokenizer.json` or `vocab.json` with `merges.txt`, and `model.safetensors` or
`pytorch_model.bin` of a GPT2LMHeadModel or GPT2Model (gpt2, distilgpt2, gpt2-medium or any GPT-2-layout
checkpoint). Its tensors are mapped onto these modules by name (MAPPING); GPT-2's Conv1D weights are stored
(in, out) and transposed into nn.Linear's (out, in). Without a checkpoint, build_model() gives gpt2 small's
architecture with random weights: enough to record the graph, never to record numbers.
"""

import math
import re
from dataclasses import dataclass, fields
from pathlib import Path

import torch
from torch import Tensor, nn

from recipekit.checkpoints import CheckpointError, assign, check_size, read_config, read_weights, whole_numbers

ARCHITECTURES = ("GPT2LMHeadModel", "GPT2Model")


@dataclass(frozen=True)
class GPT2Config:
    vocab_size: int = 50257
    n_positions: int = 1024
    n_embd: int = 768
    n_layer: int = 12
    n_head: int = 12
    layer_norm_epsilon: float = 1e-5

    @classmethod
    def from_checkpoint(cls, folder: Path) -> "GPT2Config":
        """The architecture config.json describes; CheckpointError for anything this recipe does not compute."""
        data = read_config(folder, "gpt2", "GPT-2")
        named = data.get("architectures") or []
        if named and not set(named) & set(ARCHITECTURES):
            raise CheckpointError(f"config.json names {', '.join(named)}; this recipe reads {', '.join(ARCHITECTURES)}")
        computed = {
            "activation_function": "gelu_new",
            "scale_attn_weights": True,
            "scale_attn_by_inverse_layer_idx": False,
            "reorder_and_upcast_attn": False,
            "n_inner": None,
        }
        for key, needed in computed.items():
            if data.get(key, needed) != needed:
                raise CheckpointError(
                    f"config.json: {key} {data[key]!r} is not supported; this recipe computes {key} {needed!r}"
                )
        values = whole_numbers(data, [f.name for f in fields(cls)], "layer_norm_epsilon")
        config = cls(**values)
        if config.n_embd % config.n_head:
            raise CheckpointError("config.json: n_embd is not a multiple of n_head")
        config.check_size()
        return config

    def parameters(self) -> int:
        """How many parameters the model this config describes holds (the head is the tied embedding)."""
        c = self.n_embd
        block = 2 * 2 * c + (3 * c * c + 3 * c) + (c * c + c) + (4 * c * c + 4 * c) + (4 * c * c + c)
        return (self.vocab_size + self.n_positions) * c + self.n_layer * block + 2 * c

    def check_size(self) -> None:
        """CheckpointError before building a model larger than the recipe process may hold."""
        check_size(self.parameters(), f"{self.n_layer} blocks of width {self.n_embd}")


class CausalSelfAttention(nn.Module):
    def __init__(self, c: GPT2Config) -> None:
        super().__init__()
        self.n_head = c.n_head
        self.c_attn = nn.Linear(c.n_embd, 3 * c.n_embd)  # query, key and value for all heads at once
        self.softmax = nn.Softmax(dim=-1)  # a module, so a forward hook can read the attention weights
        self.c_proj = nn.Linear(c.n_embd, c.n_embd)  # its input is the heads' outputs side by side

    def forward(self, x: Tensor) -> Tensor:
        B, T, C = x.shape
        q, k, v = self.c_attn(x).split(C, dim=2)
        q = q.view(B, T, self.n_head, -1).transpose(1, 2)  # (B, heads, T, head_dim)
        k = k.view(B, T, self.n_head, -1).transpose(1, 2)  # (B, heads, T, head_dim)
        v = v.view(B, T, self.n_head, -1).transpose(1, 2)  # (B, heads, T, head_dim)
        scores = q @ k.transpose(-2, -1) / math.sqrt(k.size(-1))  # (B, heads, T, T)
        future = torch.ones(T, T, dtype=torch.bool, device=x.device).triu(1)  # key j after query i
        weights = self.softmax(scores.masked_fill(future, torch.finfo(scores.dtype).min))  # (B, heads, T, T)
        return self.c_proj((weights @ v).transpose(1, 2).reshape(B, T, C))  # (B, T, C)


class MLP(nn.Module):
    def __init__(self, c: GPT2Config) -> None:
        super().__init__()
        self.c_fc = nn.Linear(c.n_embd, 4 * c.n_embd)
        self.gelu = nn.GELU(approximate="tanh")  # GPT-2's "gelu_new"
        self.c_proj = nn.Linear(4 * c.n_embd, c.n_embd)

    def forward(self, x: Tensor) -> Tensor:
        return self.c_proj(self.gelu(self.c_fc(x)))  # (B, T, C)


class Block(nn.Module):
    def __init__(self, c: GPT2Config) -> None:
        super().__init__()
        self.ln_1 = nn.LayerNorm(c.n_embd, eps=c.layer_norm_epsilon)
        self.attn = CausalSelfAttention(c)
        self.ln_2 = nn.LayerNorm(c.n_embd, eps=c.layer_norm_epsilon)
        self.mlp = MLP(c)

    def forward(self, x: Tensor) -> Tensor:
        x = x + self.attn(self.ln_1(x))  # pre-LN: normalise what each sublayer reads, add its output
        return x + self.mlp(self.ln_2(x))  # (B, T, C): the residual stream after this block


class GPT2(nn.Module):
    def __init__(self, c: GPT2Config) -> None:
        super().__init__()
        self.config = c
        self.wte = nn.Embedding(c.vocab_size, c.n_embd)
        self.wpe = nn.Embedding(c.n_positions, c.n_embd)
        self.h = nn.ModuleList(Block(c) for _ in range(c.n_layer))
        self.ln_f = nn.LayerNorm(c.n_embd, eps=c.layer_norm_epsilon)

    def unembed(self, x: Tensor) -> Tensor:
        """The final LayerNorm and the tied unembedding: what the model reads off a residual stream."""
        return nn.functional.linear(self.ln_f(x), self.wte.weight)  # (..., vocab)

    def blocks_from(self, first: int, x: Tensor) -> Tensor:
        """The residual stream `x` entering block `first`, through that block and every one after it."""
        for block in self.h[first:]:
            x = block(x)
        return x  # (B, T, C)

    def stream(self, input_ids: Tensor) -> Tensor:
        """The residual stream after the last block, before the final LayerNorm."""
        positions = torch.arange(input_ids.size(1), device=input_ids.device)  # (T,)
        return self.blocks_from(0, self.wte(input_ids) + self.wpe(positions))  # (B, T, C)

    def forward(self, input_ids: Tensor) -> Tensor:
        return self.unembed(self.stream(input_ids))  # (B, T, vocab)


# Checkpoint tensor names (GPT2LMHeadModel's, or a bare GPT2Model's without the prefix) -> this recipe's.
MAPPING = [
    (r"transformer\.(wte|wpe|ln_f)\.", r"\1."),
    (r"transformer\.h\.(\d+)\.(ln_1|ln_2|attn\.c_attn|attn\.c_proj|mlp\.c_fc|mlp\.c_proj)\.", r"h.\1.\2."),
]
# Present in some checkpoints, not computed here: the causal masks older files keep as buffers, and the LM head,
# which is the token embedding itself.
IGNORED = re.compile(r"transformer\.h\.\d+\.attn\.(bias|masked_bias)$|lm_head\.weight$")
CONV1D = re.compile(r"\.(c_attn|c_proj|c_fc)\.weight$")  # stored (in, out) by GPT-2's Conv1D


def recipe_name(name: str) -> str | None:
    """A checkpoint tensor's name in this recipe; None for one that is not computed here."""
    if not name.startswith(("transformer.", "lm_head.")):
        name = "transformer." + name  # a bare GPT2Model's names have no prefix
    if IGNORED.match(name):
        return None
    for pattern, replacement in MAPPING:
        if re.match(pattern, name):
            return re.sub(pattern, replacement, name)
    raise CheckpointError(f"the weights hold {name!r}, which is not part of a GPT-2 model")


def load_checkpoint(folder: str | Path) -> GPT2:
    """The checkpoint's model in eval mode; CheckpointError names a missing, misshapen or extra tensor."""
    folder = Path(folder)
    config = GPT2Config.from_checkpoint(folder)
    source, tensors = read_weights(folder)

    def rename(name: str) -> str | tuple[str, Tensor] | None:
        target = recipe_name(name)
        if target is not None and CONV1D.search(target):
            return target, tensors[name].t()  # Conv1D (in, out) -> Linear (out, in)
        return target

    return assign(lambda: GPT2(config), tensors, rename, source, f"a {config.n_layer}-block model", "a GPT-2 model")


def build_model(checkpoint: str | None = None) -> GPT2:
    """The checkpoint's model, or gpt2 small's architecture with seeded random weights without one."""
    if checkpoint:
        return load_checkpoint(checkpoint)
    torch.manual_seed(0)
    return GPT2(GPT2Config()).eval()


@dataclass(frozen=True)
class Vocabulary:
    """The checkpoint's byte-level BPE tokenizer (through the `tokenizers` library)."""

    tokenizer: object  # tokenizers.Tokenizer

    def encode(self, text: str) -> tuple[list[str], list[int]]:
        encoding = self.tokenizer.encode(text)
        return encoding.tokens, encoding.ids

    def shown(self, token_id: int) -> str:
        """A token as text (its bytes decoded: "Ġthe" is " the")."""
        return self.tokenizer.decode([token_id])

    def piece(self, token_id: int) -> str:
        """A token as the BPE vocabulary writes it ("Ġthe")."""
        return self.tokenizer.id_to_token(token_id) or ""

    def size(self) -> int:
        return self.tokenizer.get_vocab_size()


def load_vocabulary(folder: str | Path, vocab_size: int) -> Vocabulary:
    """tokenizer.json as saved, else vocab.json with merges.txt as GPT-2's byte-level BPE; no padding nor truncation."""
    from tokenizers import ByteLevelBPETokenizer, Tokenizer

    folder = Path(folder)
    try:
        if (folder / "tokenizer.json").is_file():
            tokenizer = Tokenizer.from_file(str(folder / "tokenizer.json"))
        elif (folder / "vocab.json").is_file() and (folder / "merges.txt").is_file():
            tokenizer = ByteLevelBPETokenizer(str(folder / "vocab.json"), str(folder / "merges.txt"))
        else:
            raise CheckpointError("the checkpoint folder has neither tokenizer.json nor vocab.json with merges.txt")
    except CheckpointError:
        raise
    except Exception as exc:
        raise CheckpointError(f"the tokenizer cannot be read: {str(exc)[:200]}") from exc
    tokenizer.no_padding()
    tokenizer.no_truncation()
    if tokenizer.get_vocab_size() > vocab_size:
        raise CheckpointError(
            f"the tokenizer holds {tokenizer.get_vocab_size()} tokens; config.json's vocab_size is {vocab_size}"
        )
    return Vocabulary(tokenizer)
