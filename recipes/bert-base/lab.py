"""The DataLab: one [MASK] of a sentence traced through a BERT checkpoint, stage by stage.

    python lab.py /path/to/checkpoint "The capital of France is [MASK]." --top-k 5

Needs torch, safetensors, tokenizers, and model.py beside this file. The server passes the checkpoint
folder it found (its setting or the local Hugging Face cache); the request never names a path.
"""

import argparse
import json
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import torch
from torch import Tensor

try:
    from .model import BertForMaskedLM, CheckpointError, Vocabulary, load_checkpoint, load_vocabulary
except ImportError:  # run as a script: python lab.py
    from model import BertForMaskedLM, CheckpointError, Vocabulary, load_checkpoint, load_vocabulary

MAX_TOKENS = 128  # WordPiece tokens a text may become, [CLS] and [SEP] included
MASK = "[MASK]"
SPECIAL = ("[CLS]", "[SEP]", "[MASK]", "[PAD]", "[UNK]")
STRONGEST = 8  # FFN units listed per layer
LENS_TOP = 3  # predictions listed per layer by the logit lens
SIGNIFICANT = 8  # digits kept of the vectors an answer lists


def values(t: Tensor) -> list[float]:
    """A tensor's values to 8 significant digits, about float32's own precision: half the JSON of full
    doubles, for arrays of thousands of values."""
    t = t.double()
    scale = 10.0 ** (SIGNIFICANT - 1 - t.abs().clamp_min(1e-30).log10().floor())
    return ((t * scale).round() / scale).tolist()


class InputError(ValueError):
    """The request cannot be traced; the message starts with the field at fault."""

    status = 400

    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"{field}: {message}")
        self.field = field


@dataclass(frozen=True)
class Loaded:
    stamp: tuple  # the files' names, sizes and modification times: a changed checkpoint is loaded again
    model: BertForMaskedLM
    vocabulary: Vocabulary
    weights: str


_loaded: dict[str, Loaded] = {}  # one checkpoint kept per worker process: the first request pays the load


def _stamp(folder: Path) -> tuple:
    return tuple((p.name, p.stat().st_size, p.stat().st_mtime_ns) for p in sorted(folder.iterdir()) if p.is_file())


def load(checkpoint: str) -> Loaded:
    """The checkpoint's model and vocabulary, loaded once per process and again only when its files change."""
    folder = Path(checkpoint)
    if not folder.is_dir():
        raise CheckpointError("the checkpoint folder does not exist")
    stamp = _stamp(folder)
    found = _loaded.get(checkpoint)
    if found is None or found.stamp != stamp:
        _loaded.clear()  # never two checkpoints in memory at once
        model = load_checkpoint(folder)
        vocabulary = load_vocabulary(folder, model.config.vocab_size)
        weights = next(name for name, *_ in stamp if name in ("model.safetensors", "pytorch_model.bin"))
        _loaded[checkpoint] = found = Loaded(stamp, model, vocabulary, weights)
    return found


def describe(checkpoint: str) -> dict:
    """What the checkpoint is: its architecture, vocabulary and weights file."""
    loaded = load(checkpoint)
    c = loaded.model.config
    return {"layers": c.num_hidden_layers, "hidden": c.hidden_size, "heads": c.num_attention_heads,
            "intermediate": c.intermediate_size, "vocab": c.vocab_size, "max_positions": c.max_position_embeddings,
            "lowercase": loaded.vocabulary.lowercase, "weights": loaded.weights,
            "parameters": sum(p.numel() for p in loaded.model.parameters())}


def tokenize(vocabulary: Vocabulary, text: str, max_positions: int) -> tuple[list[str], list[int], list[int]]:
    """The text's tokens, ids and [MASK] positions; InputError when it is too long or holds no [MASK]."""
    tokens, ids = vocabulary.encode(text)
    limit = min(MAX_TOKENS, max_positions)
    if len(ids) > limit:
        raise InputError("text", f"becomes {len(ids)} WordPiece tokens with [CLS] and [SEP]; at most {limit} fit")
    masks = [i for i, token in enumerate(tokens) if token == MASK]
    if not masks:
        raise InputError("text", f"holds no {MASK} token to trace; write {MASK} where a word should be predicted")
    return tokens, ids, masks


class Recorder:
    """Forward hooks that keep what each stage computed, for the whole sequence of one example."""

    def __init__(self, model: BertForMaskedLM) -> None:
        self.seen: dict[str, Tensor] = {}
        self.handles = []
        self._keep(model.embeddings.norm, "embedding_sum", inputs=True)
        self._keep(model.embeddings.norm, "embedding_out")
        for i, layer in enumerate(model.layers):
            self._keep(layer.attention.softmax, f"{i}.attention")
            self._keep(layer.attention_norm, f"{i}.post_attention")
            self._keep(layer.up, f"{i}.ffn_before")
            self._keep(layer.gelu, f"{i}.ffn_after")
            self._keep(layer.output_norm, f"{i}.out")

    def _keep(self, module: torch.nn.Module, name: str, inputs: bool = False) -> None:
        def hook(_module, args, output=None):
            self.seen[name] = (args[0] if inputs else output)[0]  # batch of one: (T, ...) or (heads, T, T)

        self.handles.append(module.register_forward_pre_hook(hook) if inputs else module.register_forward_hook(hook))

    def remove(self) -> None:
        for handle in self.handles:
            handle.remove()


def _lens(name: Callable[[int], str], states: Tensor, logits: Tensor, predicted: int) -> list[dict]:
    """What the MLM head makes of every layer's state of the traced token (a logit lens)."""
    probabilities = logits.softmax(-1)  # (layers + 1, vocab)
    ranks = (logits > logits[:, predicted : predicted + 1]).sum(-1) + 1  # (layers + 1,)
    cosines = torch.nn.functional.cosine_similarity(states, states[-1:], dim=-1)  # (layers + 1,)
    return [{"rank": int(ranks[i]), "probability": probabilities[i, predicted].item(),
             "top": [{"token": name(j), "id": j, "probability": probabilities[i, j].item()}
                     for j in probabilities[i].topk(LENS_TOP).indices.tolist()],
             "cosine": cosines[i].item()} for i in range(states.size(0))]


def _attention(weights: Tensor, position: int) -> dict:
    """Every head's attention from the traced token, and each head's two strongest arcs to other tokens."""
    rows = weights[:, position, :]  # (heads, T)
    others = rows.clone()
    others[:, position] = -1.0  # arcs go to the context, not back to the token itself
    count = min(2, rows.size(1) - 1)
    arcs = [[{"to": j, "weight": rows[h, j].item()} for j in others[h].topk(count).indices.tolist()]
            for h in range(rows.size(0))]
    return {"heads": values(rows), "arcs": arcs}


def _ffn(before: Tensor, after: Tensor) -> dict:
    """The FFN's units before and after GELU: positive inputs pass almost unchanged, negative ones are squeezed
    towards zero."""
    strongest = after.abs().topk(min(STRONGEST, after.numel())).indices.tolist()
    return {"before": values(before), "after": values(after), "passed": int((before > 0).sum()),
            "squeezed": int((before <= 0).sum()),
            "strongest": [{"unit": u, "before": before[u].item(), "after": after[u].item()} for u in strongest]}


def datalab(checkpoint: str, text: str, top_k: int = 10, position: int | None = None) -> dict:
    """The text's tokens, then the traced [MASK] through the embeddings, every layer (attention, FFN, logit
    lens) and the MLM head's dot products and softmax, ending in the prediction."""
    loaded = load(checkpoint)
    tokens, ids, masks = tokenize(loaded.vocabulary, text, loaded.model.config.max_position_embeddings)
    if position is None:
        position = masks[0]
    elif position not in masks:
        raise InputError("position", f"{position} is not a {MASK} position; the text's are {masks}")
    answer = trace(loaded.model, ids, position, top_k, loaded.vocabulary.token)
    return {"tokens": [{"index": i, "token": t, "id": d, "special": t in SPECIAL}
                       for i, (t, d) in enumerate(zip(tokens, ids, strict=True))],
            "mask_positions": masks, "checkpoint": describe(checkpoint)} | answer


@torch.no_grad()
def trace(model: BertForMaskedLM, ids: list[int], position: int, top_k: int, name: Callable[[int], str]) -> dict:
    """One token of a sequence through every stage; `name` gives a vocabulary entry's token."""
    input_ids = torch.tensor([ids])  # (1, T)
    segment_ids = torch.zeros_like(input_ids)  # one sentence: segment A throughout
    recorder = Recorder(model)
    try:
        model.encode(input_ids, segment_ids)
    finally:
        recorder.remove()
    seen = recorder.seen
    word = model.embeddings.word.weight  # (vocab, C)
    states = torch.stack([seen["embedding_out"][position],
                          *(seen[f"{i}.out"][position] for i in range(len(model.layers)))])  # (layers + 1, C)
    # The MLM head on every layer's state in one product: the logit lens, and in its last row the model's own
    # logits (the head reads only the traced position's final state, as model(...)[0, position] would).
    head_states = model.mlm.transformed(states)  # (layers + 1, C)
    all_logits = model.mlm.decode(head_states, word)  # (layers + 1, vocab)
    logits, head_state = all_logits[-1], head_states[-1]  # (vocab,), (C,): what the decoder reads
    shift = logits.max()
    exp = (logits - shift).exp()  # (vocab,)
    denominator = exp.sum()
    probabilities = exp / denominator
    predicted = int(logits.argmax())
    lens = _lens(name, states, all_logits, predicted)
    layers = [{"index": 0, "name": "embeddings", "state": values(states[0]), "lens": lens[0]}]
    for i in range(len(model.layers)):
        layers.append({
            "index": i + 1, "name": f"layer {i + 1}",
            "attention": _attention(seen[f"{i}.attention"], position),
            "post_attention": values(seen[f"{i}.post_attention"][position]),
            "ffn": _ffn(seen[f"{i}.ffn_before"][position], seen[f"{i}.ffn_after"][position]),
            "state": values(states[i + 1]),
            "lens": lens[i + 1],
        })
    top = logits.topk(min(top_k, logits.numel())).indices.tolist()
    segment = int(segment_ids[0, position])
    return {
        "position": position,
        "segment_ids": segment_ids[0].tolist(),
        "embedding": {"token_id": ids[position], "position": position, "segment": segment,
                      "word": values(word[ids[position]]),
                      "position_vector": values(model.embeddings.position.weight[position]),
                      "segment_vector": values(model.embeddings.segment.weight[segment]),
                      "sum": values(seen["embedding_sum"][position]),
                      "norm": values(seen["embedding_out"][position])},
        "layers": layers,
        "head_state": values(head_state),
        "top": [{"token": name(i), "id": i, "dot": (head_state @ word[i]).item(),
                 "bias": model.mlm.bias[i].item(), "logit": logits[i].item(), "exp": exp[i].item(),
                 "probability": probabilities[i].item()} for i in top],
        "softmax": {"max_logit": shift.item(), "shift": shift.item(), "denominator": denominator.item(),
                    "vocabulary": logits.numel(),
                    "rule": "probability = exp(logit - shift) / denominator, where shift is the largest logit and "
                            "denominator sums exp(logit - shift) over the whole vocabulary"},
        "prediction": {"token": name(predicted), "id": predicted,
                       "probability": probabilities[predicted].item()},
    }


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("checkpoint", help="a folder with config.json, vocab.txt and the weights")
    parser.add_argument("text", help="a sentence with [MASK] where a word should be predicted")
    parser.add_argument("--top-k", type=int, default=5)
    args = parser.parse_args(argv)
    try:
        answer = datalab(args.checkpoint, args.text, args.top_k)
    except (CheckpointError, InputError) as exc:
        print(exc, file=sys.stderr)
        return 1
    print(" ".join(t["token"] for t in answer["tokens"]))
    for layer in answer["layers"]:
        lens = layer["lens"]
        print(f"{layer['name']:>10}: rank {lens['rank']:>6}, p {lens['probability']:.4f}, "
              f"cosine to final {lens['cosine']:+.3f}, top {', '.join(t['token'] for t in lens['top'])}")
    print(json.dumps(answer["top"], indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
