"""The GPT-2 DataLab: a prompt traced through a GPT-2 checkpoint to its next-token prediction, block by block;
greedy or seeded sampling of a few tokens; and activation patching of every head from a second prompt.

    python lab.py /path/to/checkpoint "When Mary and John went to the store, John gave a drink to"
    python lab.py /path/to/checkpoint "The Eiffel Tower is in" --patch-from "The Colosseum is in"

Needs torch, safetensors, tokenizers, and model.py beside this file. The server passes the checkpoint folder it
found (its setting or the local Hugging Face cache); the request never names a path.
"""

import argparse
import sys

import torch
from torch import Tensor

from recipekit.checkpoints import UNTRAINED_SPREAD, CheckpointError, InputError, Loaded, probe, spread, values
from recipekit.checkpoints import load as kept_checkpoint
from recipekit.script import package

__package__ = package(__file__, __package__)  # python lab.py: its folder is the package the server loads
from .model import GPT2, Vocabulary, load_checkpoint, load_vocabulary

MAX_TOKENS = 48  # byte-level BPE tokens a prompt may become: every head's full attention map is in the answer
LENS_TOP = 3  # tokens listed per block by the logit lens
LISTED = 10  # tokens listed per generation step


def load(checkpoint: str) -> Loaded:
    """The checkpoint's model and tokenizer, loaded once per process and again only when its files change, its
    weights probed as they are loaded (probe_weights)."""
    return kept_checkpoint(
        checkpoint,
        load_checkpoint,
        lambda folder, model: load_vocabulary(folder, model.config.vocab_size),
        probe_weights,
    )


# The prompts the weights are probed with: any GPT-2-layout vocabulary spells them, the project's digit sorter's too.
PROBES = ("3 1 4 1 =", "7 0 7 7 =", "9 6 5 2 =")


def describe(loaded: Loaded) -> dict:
    """What the checkpoint is: its architecture, vocabulary and weights file, and whether its weights look trained."""
    c = loaded.model.config
    return {
        "layers": c.n_layer,
        "heads": c.n_head,
        "width": c.n_embd,
        "vocab": c.vocab_size,
        "positions": c.n_positions,
        "weights": loaded.weights,
        "parameters": sum(p.numel() for p in loaded.model.parameters()),
        "probe": loaded.probe,
    }


@torch.no_grad()
def probe_weights(loaded: Loaded) -> dict:
    """The next token's distribution after each probe prompt: near uniform, the weights look untrained."""
    spreads = []
    for prompt in PROBES:
        try:
            ids = loaded.vocabulary.encode(prompt)[1]
        except Exception:  # noqa: BLE001 - a vocabulary that cannot spell a probe is not probed with it
            continue
        if ids and len(ids) <= loaded.model.config.n_positions:
            spreads.append(spread(loaded.model(torch.tensor([ids]))[0, -1].softmax(-1)))
    measured = sum(spreads) / len(spreads) if spreads else 0.0
    return probe(
        measured,
        bool(spreads) and measured > UNTRAINED_SPREAD,
        "the next token's entropy after the probe prompts, over the uniform distribution's",
    )


def tokenize(loaded: Loaded, text: str, field: str = "prompt") -> list[int]:
    """The prompt's token ids; InputError when it is empty, too long, or holds what the checkpoint's vocabulary
    cannot spell (a word-level vocabulary, as the project's digit sorter has, knows its words alone)."""
    try:
        _, ids = loaded.vocabulary.encode(text)
    except Exception as exc:  # noqa: BLE001 - the tokenizer's own error: a piece its vocabulary lacks
        known = " ".join(sorted(loaded.vocabulary.tokenizer.get_vocab(), key=loaded.vocabulary.tokenizer.token_to_id))
        raise InputError(
            field,
            f"holds what this checkpoint's vocabulary cannot spell ({str(exc)[:80]}); its tokens are {known[:200]}",
        ) from None
    limit = min(MAX_TOKENS, loaded.model.config.n_positions)
    if not ids:
        raise InputError(field, "becomes no token")
    if len(ids) > limit:
        raise InputError(field, f"becomes {len(ids)} tokens; at most {limit} fit")
    return ids


def token_list(vocabulary: Vocabulary, ids: list[int]) -> list[dict]:
    return [{"index": i} | word(vocabulary, t) for i, t in enumerate(ids)]


def word(vocabulary: Vocabulary, token_id: int) -> dict:
    """A token by id: its BPE piece ("Ġthe") and what it reads as (" the"; a byte of a longer character reads as
    the replacement character)."""
    return {"id": token_id, "token": vocabulary.piece(token_id), "text": vocabulary.shown(token_id)}


def warm(checkpoint: str) -> None:
    """Load the checkpoint when a recipe process starts, so that the first trace does not wait for it."""
    load(checkpoint)


class Recorder:
    """Forward hooks that keep the residual stream entering every block and after the last one (the whole batch:
    (B, T, C) each), and every block's attention weights (of the first sequence of the batch)."""

    def __init__(self, model: GPT2) -> None:
        self.attention: list[Tensor] = []
        self.streams: list[Tensor] = []
        self.handles = [model.h[-1].register_forward_hook(lambda _m, _a, out: self.streams.append(out))]
        for block in model.h:
            self.handles.append(block.register_forward_pre_hook(lambda _m, args: self.streams.append(args[0])))
            self.handles.append(
                block.attn.softmax.register_forward_hook(lambda _m, _a, out: self.attention.append(out[0]))
            )  # (heads, T, T)

    def remove(self) -> None:
        for handle in self.handles:
            handle.remove()


@torch.no_grad()
def trace(checkpoint: str, prompt: str, top_k: int = 10) -> dict:
    """The prompt's tokens, every head's attention, the residual stream after each block, the logit lens at the
    last position (the final LayerNorm and the tied unembedding applied after each block), and the next token's
    distribution."""
    loaded = load(checkpoint)
    return traced(loaded, tokenize(loaded, prompt), top_k)


@torch.no_grad()
def traced(loaded: Loaded, ids: list[int], top_k: int) -> dict:
    """trace() of token ids on a loaded model."""
    model, vocabulary = loaded.model, loaded.vocabulary
    recorder = Recorder(model)
    try:
        model.stream(torch.tensor([ids]))
    finally:
        recorder.remove()
    streams = torch.stack([s[0] for s in recorder.streams])  # (blocks + 1, T, C): into each block, after the last
    # The unembedding read at the last token only, after every block: the logit lens, and in its last row the
    # model's own next-token logits (as model(...)[0, -1] would give them, without the other positions').
    lens_logits = model.unembed(streams[:, -1])  # (blocks + 1, vocab)
    logits = lens_logits[-1]  # (vocab,)
    probabilities = lens_logits.softmax(-1)
    answer = int(logits.argmax())
    ranks = (lens_logits > lens_logits[:, answer : answer + 1]).sum(-1) + 1  # (blocks + 1,)
    final = logits.softmax(-1)
    top = logits.topk(min(top_k, logits.numel())).indices.tolist()
    return {
        "checkpoint": describe(loaded),
        "tokens": token_list(vocabulary, ids),
        "attention": [values(a) for a in recorder.attention],  # (blocks, heads, T, T)
        "residual": [
            {"name": "embeddings" if i == 0 else f"block {i}", "norms": values(s.norm(dim=-1)), "last": values(s[-1])}
            for i, s in enumerate(streams)
        ],
        "lens": [
            {
                "name": "embeddings" if i == 0 else f"block {i}",
                "rank": int(ranks[i]),
                "probability": probabilities[i, answer].item(),
                "top": [
                    word(vocabulary, j) | {"probability": probabilities[i, j].item()}
                    for j in probabilities[i].topk(LENS_TOP).indices.tolist()
                ],
            }
            for i in range(streams.size(0))
        ],
        "top": [word(vocabulary, j) | {"logit": logits[j].item(), "probability": final[j].item()} for j in top],
        "prediction": word(vocabulary, answer) | {"probability": final[answer].item()},
    }


@torch.no_grad()
def generate(
    checkpoint: str,
    prompt: str,
    steps: int = 5,
    strategy: str = "greedy",
    seed: int = 0,
    temperature: float = 1.0,
    top_k: int | None = None,
) -> dict:
    """A few tokens after the prompt, each chosen greedily or sampled (seeded) from the next token's distribution
    at the temperature given (among the `top_k` most likely tokens only, where given), with each step's ten most
    likely tokens."""
    loaded = load(checkpoint)
    model, vocabulary = loaded.model, loaded.vocabulary
    ids = tokenize(loaded, prompt)
    if len(ids) + steps > model.config.n_positions:
        raise InputError(
            "steps", f"{steps} tokens after {len(ids)} pass the checkpoint's {model.config.n_positions} positions"
        )
    generator = torch.Generator().manual_seed(seed)
    chosen = []
    for _ in range(steps):
        logits = model(torch.tensor([ids]))[0, -1] / temperature  # (vocab,)
        if top_k is not None and top_k < logits.numel():
            logits = logits.masked_fill(logits < logits.topk(top_k).values[-1], float("-inf"))
        distribution = logits.softmax(-1)
        if strategy == "greedy":
            token = int(distribution.argmax())
        else:
            token = int(torch.multinomial(distribution, 1, generator=generator))
        top = distribution.topk(min(LISTED, distribution.numel())).indices.tolist()
        chosen.append(
            word(vocabulary, token)
            | {
                "probability": distribution[token].item(),
                "top": [word(vocabulary, j) | {"probability": distribution[j].item()} for j in top],
            }
        )
        ids = [*ids, token]
    return {
        "checkpoint": describe(loaded),
        "prompt": token_list(vocabulary, ids[: len(ids) - steps]),
        # decoded whole: a word-level vocabulary puts its spaces back between tokens, a byte-level one its bytes
        "steps": chosen,
        "text": vocabulary.tokenizer.decode(ids),
        "strategy": strategy,
        "seed": seed,
        "temperature": temperature,
        "top_k": top_k,
    }


class HeadOutputs:
    """The input of each block's attention output projection: the heads' outputs side by side, (B, T, C). Kept
    from one run, and written into the rows of another: `patch[(layer, head)]` lists the batch rows where that
    head's slice is replaced by the kept run's."""

    def __init__(self, model: GPT2) -> None:
        self.model = model
        self.kept: list[Tensor] = []
        self.patch: dict[tuple[int, int], list[int]] = {}
        self.head_dim = model.config.n_embd // model.config.n_head
        self.handles = []

    def keep(self) -> "HeadOutputs":
        self._hook(lambda layer, x: self.kept.append(x[0].clone()))
        return self

    def write(self, patch: dict[tuple[int, int], list[int]]) -> "HeadOutputs":
        self.patch = patch

        def replace(layer: int, x: Tensor) -> Tensor:
            x = x.clone()
            for (at, head), rows in self.patch.items():
                if at == layer:
                    span = slice(head * self.head_dim, (head + 1) * self.head_dim)
                    x[rows, :, span] = self.kept[layer][:, span]
            return x

        self._hook(replace)
        return self

    def _hook(self, action) -> None:
        for layer, block in enumerate(self.model.h):

            def hook(_module, args, layer=layer):
                out = action(layer, args[0])
                return None if out is None else (out,)

            self.handles.append(block.attn.c_proj.register_forward_pre_hook(hook))

    def remove(self) -> None:
        for handle in self.handles:
            handle.remove()
        self.handles = []


def _run(model: GPT2, ids: list[int], rows: int = 1, hooks: HeadOutputs | None = None) -> Tensor:
    """The last position's logits for `rows` copies of the prompt: (rows, vocab)."""
    try:
        return model(torch.tensor([ids] * rows))[:, -1]
    finally:
        if hooks is not None:
            hooks.remove()


@torch.no_grad()
def patching(checkpoint: str, prompt: str, corrupted: str) -> dict:
    """Activation patching: the prompt (clean) run with one head's output taken from the corrupted prompt's run,
    for every head of every block; and with the residual stream entering each block taken from it at one token
    (causal tracing). The measure is the logit difference between the clean run's prediction and the corrupted
    run's; each patch's effect is how much of the way from clean to corrupted it moves it (0: none, 1: all)."""
    loaded = load(checkpoint)
    return patched(loaded, tokenize(loaded, prompt), tokenize(loaded, corrupted, "corrupted"))


@torch.no_grad()
def patched(loaded: Loaded, clean_ids: list[int], corrupted_ids: list[int]) -> dict:
    """patching() of token ids on a loaded model."""
    model, vocabulary = loaded.model, loaded.vocabulary
    if len(clean_ids) != len(corrupted_ids):
        raise InputError(
            "corrupted",
            f"becomes {len(corrupted_ids)} tokens; the prompt becomes {len(clean_ids)}, "
            "and a head's output is patched position by position",
        )
    heads = model.config.n_head
    # Every run in a batch as wide as the patched runs: the same kernels, so that a head patched from an equal
    # prompt reads exactly the clean value.
    kept = HeadOutputs(model).keep()
    corrupted_recorder = Recorder(model)  # the corrupted stream entering each block: what a stream patch writes
    try:
        corrupted_logits = _run(model, corrupted_ids, heads, hooks=kept)[0]
    finally:
        corrupted_recorder.remove()
    recorder = Recorder(model)  # the clean stream entering each block: a patched run starts there
    try:
        clean_logits = _run(model, clean_ids, heads)[0]
    finally:
        recorder.remove()
    entering = recorder.streams  # [layer]: (heads, T, C), the clean stream entering that block
    answer, foil = int(clean_logits.argmax()), int(corrupted_logits.argmax())
    if foil == answer:  # both prompts predict the same token: measure against the clean run's second choice
        foil = int(clean_logits.topk(2).indices[1])

    def measure(logits: Tensor) -> Tensor:
        return logits[..., answer] - logits[..., foil]

    clean, dirty = measure(clean_logits).item(), measure(corrupted_logits).item()
    grid = []
    for layer in range(model.config.n_layer):  # one batch per block, from that block on: row h patches head h
        hooks = kept.write({(layer, h): [h] for h in range(heads)})
        try:  # the blocks before are the clean run's
            grid.append(measure(model.unembed(model.blocks_from(layer, entering[layer]))[:, -1]))
        finally:
            hooks.remove()
    measured = torch.stack(grid)  # (blocks, heads)
    streams = torch.stack(
        [
            measure(
                patch_streams(
                    model,
                    entering[layer][0],
                    corrupted_recorder.streams[layer][0],
                    layer,
                    [[p] for p in range(len(clean_ids))],
                )
            )
            for layer in range(model.config.n_layer)
        ]
    )  # (blocks, tokens)
    span = dirty - clean

    def effect(patched: Tensor) -> list:
        return values((patched - clean) / span) if span else values(torch.zeros_like(patched))

    return {
        "checkpoint": describe(loaded),
        "tokens": token_list(vocabulary, clean_ids),
        "corrupted_tokens": token_list(vocabulary, corrupted_ids),
        "answer": word(vocabulary, answer),
        "foil": word(vocabulary, foil),
        "clean": clean,
        "corrupted": dirty,
        "patched": values(measured),
        "effect": effect(measured),
        "stream_patched": values(streams),
        "stream_effect": effect(streams),
        "measure": "logit(answer) - logit(foil) at the last position; effect = (patched - clean) / (corrupted - clean)",
    }


def patch_streams(model: GPT2, clean: Tensor, corrupted: Tensor, layer: int, positions: list[list[int]]) -> Tensor:
    """The last position's logits with the residual stream entering block `layer` taken from the corrupted run at
    the positions each row lists (one row per list), the blocks from there on run again: (rows, vocab). `clean`
    and `corrupted` are the two runs' streams entering that block, (T, C)."""
    x = clean.repeat(len(positions), 1, 1)  # (rows, T, C)
    for row, patched in enumerate(positions):
        x[row, patched] = corrupted[patched]
    return model.unembed(model.blocks_from(layer, x))[:, -1]


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("checkpoint", help="a GPT-2 checkpoint folder (config.json, tokenizer, weights)")
    parser.add_argument("prompt")
    parser.add_argument("--patch-from", help="a corrupted prompt of the same length, to patch every head from")
    args = parser.parse_args(argv)
    try:
        answer = trace(args.checkpoint, args.prompt)
        patched = patching(args.checkpoint, args.prompt, args.patch_from) if args.patch_from else None
    except (CheckpointError, InputError) as exc:
        print(exc, file=sys.stderr)
        return 1
    print("|".join(t["text"] for t in answer["tokens"]))
    for lens in answer["lens"]:
        print(
            f"{lens['name']:>10}: rank {lens['rank']:>6}, p {lens['probability']:.4f}, "
            f"top {', '.join(repr(t['text']) for t in lens['top'])}"
        )
    print(f"next: {answer['prediction']['text']!r} (p {answer['prediction']['probability']:.3f})")
    if patched:
        best = max(((e, b, h) for b, row in enumerate(patched["effect"]) for h, e in enumerate(row)))
        print(
            f"patching from {args.patch_from!r}: {patched['answer']['text']!r} vs {patched['foil']['text']!r}, "
            f"strongest head {best[1]}.{best[2]} (effect {best[0]:.3f})"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
