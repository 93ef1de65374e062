"""Small random GPT-2 checkpoints in the Hugging Face layout, saved by transformers itself, with a byte-level BPE
tokenizer trained here on a few sentences."""

from pathlib import Path

TEXT = ["When Mary and John went to the store, John gave a drink to Mary.",
        "When Mary and John went to the park, Mary gave a ball to John.",
        "The Eiffel Tower is in Paris. The Colosseum is in Rome. The capital of France is Paris.",
        "one two three four five six seven eight nine ten, one two three four five six seven"]


def make_checkpoint(folder: Path, *, layers: int = 2, width: int = 32, heads: int = 4, seed: int = 0,
                    safetensors: bool = True, tokenizer_json: bool = True, head: str = "GPT2LMHeadModel") -> Path:
    """A random GPT2LMHeadModel (or GPT2Model) with its tokenizer: tokenizer.json and vocab.json with merges.txt,
    or the last two alone."""
    import torch
    import transformers
    from tokenizers import ByteLevelBPETokenizer

    transformers.utils.logging.disable_progress_bar()
    folder.mkdir(parents=True, exist_ok=True)
    bpe = ByteLevelBPETokenizer()
    bpe.train_from_iterator(TEXT * 4, vocab_size=400, min_frequency=1, special_tokens=["<|endoftext|>"],
                            show_progress=False)
    bpe.save_model(str(folder))  # vocab.json, merges.txt
    bpe.save(str(folder / "tokenizer.json"))
    # tokenizer_config.json and special_tokens_map.json, as transformers writes them for this tokenizer
    transformers.GPT2TokenizerFast(tokenizer_file=str(folder / "tokenizer.json")).save_pretrained(folder)
    if not tokenizer_json:
        (folder / "tokenizer.json").unlink()
    config = transformers.GPT2Config(vocab_size=bpe.get_vocab_size(), n_positions=64, n_embd=width, n_layer=layers,
                                     n_head=heads, attn_implementation="eager")
    torch.manual_seed(seed)
    model = getattr(transformers, head)(config).eval()
    with torch.no_grad():  # non-trivial LayerNorm and bias values, so that a misplaced one shows
        for name, p in model.named_parameters():
            if ".ln_" in name or name.endswith("bias"):
                p.add_(torch.randn_like(p) * 0.1)
            else:
                p.mul_(5)  # sharper attention and a peakier next-token distribution than N(0, 0.02) gives
    model.save_pretrained(folder)
    if not safetensors:  # transformers 5 writes safetensors only; a .bin holds the same state dict, pickled
        torch.save(model.state_dict(), folder / "pytorch_model.bin")
        (folder / "model.safetensors").unlink()
    return folder
