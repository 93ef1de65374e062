"""Write this recipe's trained model in Hugging Face's GPT-2 layout, so that the GPT-2 DataLab (recipes/gpt2) can
trace, generate and patch on a machine that has no GPT-2 checkpoint: it is the same architecture, small.

    python export.py FOLDER    # config.json, model.safetensors, tokenizer.json

GPT2LMHeadModel's tensor names, its Conv1D weights stored (in, out), the LM head left to the tied embedding, and a
word-level tokenizer of the recipe's eleven tokens (the digits and "="), one token per character, spaces ignored.
The files are the same bytes on every machine (`make checkpoints` checks their sha256).
"""

import json
import sys
import tomllib
from pathlib import Path

import torch
from safetensors.torch import save_file
from tokenizers import Regex, Tokenizer, models, pre_tokenizers

from recipekit.script import package

__package__ = package(__file__, __package__)  # python export.py: its folder is the package the server loads
from .model import GPTConfig, build_model

LINEAR = ("attn.c_attn", "attn.c_proj", "mlp.c_fc", "mlp.c_proj")  # GPT-2 stores these as Conv1D: (in, out)
WORDS: list[str] = tomllib.loads(Path(__file__).with_name("recipe.toml").read_text())["lab"]["names"]


def config(c: GPTConfig) -> dict:
    """config.json as transformers' GPT2Config writes the keys the layout needs."""
    return {
        "architectures": ["GPT2LMHeadModel"],
        "model_type": "gpt2",
        "vocab_size": c.vocab_size,
        "n_positions": c.block_size,
        "n_ctx": c.block_size,
        "n_embd": c.n_embd,
        "n_layer": c.n_layer,
        "n_head": c.n_head,
        "n_inner": None,
        "activation_function": "gelu_new",
        "layer_norm_epsilon": c.layer_norm_epsilon,
        "resid_pdrop": 0.0,
        "embd_pdrop": 0.0,
        "attn_pdrop": 0.0,
        "scale_attn_weights": True,
        "tie_word_embeddings": True,
        "bos_token_id": WORDS.index("="),
        "eos_token_id": WORDS.index("="),
    }


def tensors() -> dict[str, torch.Tensor]:
    """The trained weights under GPT2LMHeadModel's names."""
    model = build_model()
    named = {}
    for name, tensor in model.state_dict().items():
        if name == "lm_head.weight":  # the token embedding itself (tied)
            continue
        if any(name.startswith(f"h.{i}.{linear}.weight") for i in range(model.config.n_layer) for linear in LINEAR):
            tensor = tensor.t()  # Linear (out, in) -> Conv1D (in, out)
        named[f"transformer.{name}"] = tensor.contiguous().clone()
    return named


def tokenizer() -> Tokenizer:
    """A word-level tokenizer of the recipe's tokens: each character a token, whitespace only a separator."""
    made = Tokenizer(models.WordLevel({word: i for i, word in enumerate(WORDS)}, unk_token="[UNK]"))
    made.pre_tokenizer = pre_tokenizers.Sequence(
        [pre_tokenizers.WhitespaceSplit(), pre_tokenizers.Split(Regex("."), behavior="isolated")]
    )
    return made


def export(folder: Path) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "config.json").write_text(json.dumps(config(GPTConfig()), indent=2, sort_keys=True) + "\n")
    # One metadata entry: safetensors writes a table of several in no fixed order, and the bytes must not vary.
    save_file(tensors(), str(folder / "model.safetensors"), metadata={"format": "pt"})
    tokenizer().save(str(folder / "tokenizer.json"))


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: python export.py FOLDER")
    export(Path(sys.argv[1]))
