"""Small random BERT checkpoints in the Hugging Face layout, saved by transformers itself."""

from pathlib import Path

WORDS = ("the capital of france is paris a city river on its bank and cat sat mat dog ran "
         "quickly over there here big small red blue green house tree book read write").split()
PIECES = ["##s", "##ed", "##ing", "##ly", ".", ",", "!", "?"]


def vocabulary(cased: bool) -> list[str]:
    """Special tokens, words, word pieces and punctuation; a cased vocabulary also has capitalised words."""
    words = [*WORDS, *(w.capitalize() for w in WORDS)] if cased else list(WORDS)
    letters = [c for c in "abcdefghijklmnopqrstuvwxyz" if c not in words]  # "a" is a word already: one id per token
    return ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *words, *PIECES, *letters]


def make_checkpoint(folder: Path, *, cased: bool = False, safetensors: bool = True, layers: int = 2,
                    hidden: int = 32, heads: int = 4, seed: int = 0, head: str = "BertForMaskedLM") -> Path:
    """A random BertForMaskedLM (or BertForPreTraining) with its vocab.txt and tokenizer settings, in
    model.safetensors or pytorch_model.bin."""
    import torch
    import transformers

    transformers.utils.logging.disable_progress_bar()
    folder.mkdir(parents=True, exist_ok=True)
    words = vocabulary(cased)
    (folder / "vocab.txt").write_text("\n".join(words) + "\n")
    transformers.BertTokenizer(vocab=str(folder / "vocab.txt"), do_lower_case=not cased).save_pretrained(folder)
    config = transformers.BertConfig(vocab_size=len(words), hidden_size=hidden, num_hidden_layers=layers,
                                     num_attention_heads=heads, intermediate_size=4 * hidden,
                                     max_position_embeddings=64, attn_implementation="eager")
    torch.manual_seed(seed)
    model = getattr(transformers, head)(config).eval()
    with torch.no_grad():  # non-trivial LayerNorm and bias values, so that a misplaced one shows
        for name, p in model.named_parameters():
            if "LayerNorm" in name or name.endswith("bias"):
                p.add_(torch.randn_like(p) * 0.1)
    model.save_pretrained(folder)
    if not safetensors:  # transformers 5 writes safetensors only; a .bin holds the same state dict, pickled
        torch.save(model.state_dict(), folder / "pytorch_model.bin")
        (folder / "model.safetensors").unlink()
    return folder
