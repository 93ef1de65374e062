"""The DataLab: one token of a sentence traced through a BERT checkpoint, stage by stage: a [MASK] to the MLM
head's prediction, or, for an encoder-only checkpoint, any token to the sentence's pooled embedding; and the
similarity of two sentences with each token's share of it.

    python lab.py /path/to/checkpoint "The capital of France is [MASK]." --top-k 5
    python lab.py /path/to/encoder "A man plays a guitar." --other "Someone is playing an instrument."

Needs torch, safetensors, tokenizers, and model.py beside this file. The server passes the checkpoint
folder it found (its setting or the local Hugging Face cache); the request never names a path.
"""

import argparse
import json
import sys
from collections.abc import Callable

import torch
from torch import Tensor

from recipekit.checkpoints import (
    UNTRAINED_ALIKE,
    UNTRAINED_SPREAD,
    CheckpointError,
    InputError,
    Loaded,
    probe,
    spread,
    values,
)
from recipekit.checkpoints import load as kept_checkpoint
from recipekit.script import package

__package__ = package(__file__, __package__)  # python lab.py: its folder is the package the server loads
from .model import Bert, Vocabulary, load_checkpoint, load_vocabulary

MAX_TOKENS = 128  # WordPiece tokens a text may become, [CLS] and [SEP] included
MASK = "[MASK]"
SPECIAL = ("[CLS]", "[SEP]", "[MASK]", "[PAD]", "[UNK]")
STRONGEST = 8  # FFN units listed per layer
LENS_TOP = 3  # predictions listed per layer by the logit lens


def load(checkpoint: str) -> Loaded:
    """The checkpoint's model and vocabulary, loaded once per process and again only when its files change, its
    weights probed as they are loaded (probe_weights)."""
    return kept_checkpoint(
        checkpoint,
        load_checkpoint,
        lambda folder, model: load_vocabulary(folder, model.config.vocab_size),
        probe_weights,
    )


# The sentences the weights are probed with: a trained MLM head is sure of these words, a trained encoder tells the
# three sentences apart.
PROBES = ("The capital of France is [MASK].", "She drank a cup of [MASK] in the morning.", "Two plus two is [MASK].")


def describe(checkpoint: str) -> dict:
    """What the checkpoint is: its architecture, vocabulary, weights file and head (the MLM head, or none:
    an encoder read by sentence pooling), and whether its weights look trained."""
    loaded = load(checkpoint)
    c = loaded.model.config
    return {
        "layers": c.num_hidden_layers,
        "hidden": c.hidden_size,
        "heads": c.num_attention_heads,
        "intermediate": c.intermediate_size,
        "vocab": c.vocab_size,
        "max_positions": c.max_position_embeddings,
        "lowercase": loaded.vocabulary.lowercase,
        "weights": loaded.weights,
        "parameters": sum(p.numel() for p in loaded.model.parameters()),
        "head": "mlm" if c.mlm else "sentence",
        "probe": loaded.probe,
    }


@torch.no_grad()
def probe_weights(loaded: Loaded) -> dict:
    """With the MLM head, each probe's [MASK] distribution (near uniform: untrained); without it, how alike the
    probes' sentence embeddings are (nearly the same: untrained)."""
    read = [loaded.vocabulary.encode(text) for text in PROBES]
    if loaded.model.config.mlm:
        measured = sum(
            spread(loaded.model(torch.tensor([ids]))[0, tokens.index(MASK)].softmax(-1))
            for tokens, ids in read
            if MASK in tokens
        ) / len(read)
        return probe(
            measured,
            measured > UNTRAINED_SPREAD,
            "the [MASK]'s entropy in the probe sentences, over the uniform distribution's",
        )
    embedded = [loaded.model(torch.tensor([ids]))[0] for _, ids in read]  # (C,) each, of length one
    pairs = [(a, b) for i, a in enumerate(embedded) for b in embedded[i + 1 :]]
    measured = sum(float(a @ b) for a, b in pairs) / len(pairs)
    return probe(measured, measured > UNTRAINED_ALIKE, "the mean cosine similarity of three unrelated probe sentences")


def tokenize(vocabulary: Vocabulary, text: str, max_positions: int, field: str = "text") -> tuple[list[str], list[int]]:
    """The text's tokens and ids; InputError when it is too long."""
    tokens, ids = vocabulary.encode(text)
    limit = min(MAX_TOKENS, max_positions)
    if len(ids) > limit:
        raise InputError(field, f"becomes {len(ids)} WordPiece tokens with [CLS] and [SEP]; at most {limit} fit")
    return tokens, ids


def traced_position(tokens: list[str], masks: list[int], position: int | None, mlm: bool) -> int:
    """The token to trace: a [MASK] for the MLM head (the first when none is named), any token for an encoder
    (the first word when none is named)."""
    if mlm:
        if not masks:
            raise InputError(
                "text",
                f"holds no {MASK} token to trace; write {MASK} where a word should be "
                "predicted (this checkpoint has the MLM head)",
            )
        if position is None:
            return masks[0]
        if position not in masks:
            raise InputError("position", f"{position} is not a {MASK} position; the text's are {masks}")
        return position
    if position is None:
        return min(1, len(tokens) - 1)  # the first token after [CLS]
    if not 0 <= position < len(tokens):
        raise InputError("position", f"{position} is not a token of the text; it has positions 0 to {len(tokens) - 1}")
    return position


def token_list(tokens: list[str], ids: list[int]) -> list[dict]:
    return [
        {"index": i, "token": t, "id": d, "special": t in SPECIAL}
        for i, (t, d) in enumerate(zip(tokens, ids, strict=True))
    ]


class Recorder:
    """Forward hooks that keep what each stage computed, for the whole sequence of one example."""

    def __init__(self, model: Bert) -> None:
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
    return [
        {
            "rank": int(ranks[i]),
            "probability": probabilities[i, predicted].item(),
            "top": [
                {"token": name(j), "id": j, "probability": probabilities[i, j].item()}
                for j in probabilities[i].topk(LENS_TOP).indices.tolist()
            ],
            "cosine": cosines[i].item(),
        }
        for i in range(states.size(0))
    ]


def _attention(weights: Tensor, position: int) -> dict:
    """Every head's attention from the traced token, and each head's two strongest arcs to other tokens."""
    rows = weights[:, position, :]  # (heads, T)
    others = rows.clone()
    others[:, position] = -1.0  # arcs go to the context, not back to the token itself
    count = min(2, rows.size(1) - 1)
    arcs = [
        [{"to": j, "weight": rows[h, j].item()} for j in others[h].topk(count).indices.tolist()]
        for h in range(rows.size(0))
    ]
    return {"heads": values(rows), "arcs": arcs}


def _ffn(before: Tensor, after: Tensor) -> dict:
    """The FFN's units before and after GELU: positive inputs pass almost unchanged, negative ones are squeezed
    towards zero."""
    strongest = after.abs().topk(min(STRONGEST, after.numel())).indices.tolist()
    return {
        "before": values(before),
        "after": values(after),
        "passed": int((before > 0).sum()),
        "squeezed": int((before <= 0).sum()),
        "strongest": [{"unit": u, "before": before[u].item(), "after": after[u].item()} for u in strongest],
    }


def datalab(checkpoint: str, text: str, top_k: int = 10, position: int | None = None, other: str | None = None) -> dict:
    """The text's tokens, then the traced token through the embeddings and every layer (attention, FFN), ending in
    the MLM head's dot products, softmax and prediction, or in the sentence's pooled embedding; with `other`, the
    two sentences' similarity and each token's share of it."""
    loaded = load(checkpoint)
    limit = loaded.model.config.max_position_embeddings
    tokens, ids = tokenize(loaded.vocabulary, text, limit)
    masks = [i for i, token in enumerate(tokens) if token == MASK]
    position = traced_position(tokens, masks, position, loaded.model.config.mlm)
    other_tokens, other_ids = tokenize(loaded.vocabulary, other, limit, "other") if other is not None else ([], None)
    answer = trace(loaded.model, ids, position, top_k, loaded.vocabulary.token, other_ids)
    if other_ids is not None:
        answer["similarity"]["other_tokens"] = token_list(other_tokens, other_ids)
    return {"tokens": token_list(tokens, ids), "mask_positions": masks, "checkpoint": describe(checkpoint)} | answer


@torch.no_grad()
def trace(
    model: Bert,
    ids: list[int],
    position: int,
    top_k: int,
    name: Callable[[int], str],
    other_ids: list[int] | None = None,
) -> dict:
    """One token of a sequence through every stage; `name` gives a vocabulary entry's token. With `other_ids`, the
    sequence's similarity to that one too."""
    input_ids = torch.tensor([ids])  # (1, T)
    segment_ids = torch.zeros_like(input_ids)  # one sentence: segment A throughout
    recorder = Recorder(model)
    try:
        model.encode(input_ids, segment_ids)
    finally:
        recorder.remove()
    seen = recorder.seen
    word = model.embeddings.word.weight  # (vocab, C)
    states = torch.stack(
        [seen["embedding_out"][position], *(seen[f"{i}.out"][position] for i in range(len(model.layers)))]
    )  # (layers + 1, C)
    layers = [{"index": 0, "name": "embeddings", "state": values(states[0])}]
    for i in range(len(model.layers)):
        layers.append(
            {
                "index": i + 1,
                "name": f"layer {i + 1}",
                "attention": _attention(seen[f"{i}.attention"], position),
                "post_attention": values(seen[f"{i}.post_attention"][position]),
                "ffn": _ffn(seen[f"{i}.ffn_before"][position], seen[f"{i}.ffn_after"][position]),
                "state": values(states[i + 1]),
            }
        )
    segment = int(segment_ids[0, position])
    answer = {
        "position": position,
        "segment_ids": segment_ids[0].tolist(),
        "embedding": {
            "token_id": ids[position],
            "position": position,
            "segment": segment,
            "word": values(word[ids[position]]),
            "position_vector": values(model.embeddings.position.weight[position]),
            "segment_vector": values(model.embeddings.segment.weight[segment]),
            "sum": values(seen["embedding_sum"][position]),
            "norm": values(seen["embedding_out"][position]),
        },
        "layers": layers,
    }
    final = seen[f"{len(model.layers) - 1}.out"] if len(model.layers) else seen["embedding_out"]  # (T, C)
    if other_ids is not None:
        answer["similarity"] = similarity(model, final, other_ids)
    if not model.config.mlm:
        return answer | {"sentence": _sentence(model, final)}
    return answer | _masked_word(model, states, top_k, name, layers)


def _sentence(model: Bert, final: Tensor) -> dict:
    """The sentence's embedding as sentence-transformers reads an encoder: the mean of every token's final state,
    then scaled to length one."""
    mean = model.head.mean(final)  # (C,)
    embedding = model.head(final)  # (C,)
    return {
        "tokens": final.size(0),
        "mean": values(mean),
        "length": mean.norm().item(),
        "embedding": values(embedding),
        "rule": "embedding = mean of the tokens' final states ([CLS] and [SEP] included) / its length",
    }


def _masked_word(model: Bert, states: Tensor, top_k: int, name: Callable[[int], str], layers: list[dict]) -> dict:
    """The MLM head on the traced token's final state (its dot products, softmax and prediction), and on every
    layer's state (the logit lens, added to `layers`)."""
    word = model.embeddings.word.weight  # (vocab, C)
    # The MLM head on every layer's state in one product: the logit lens, and in its last row the model's own
    # logits (the head reads only the traced position's final state, as model(...)[0, position] would).
    head_states = model.head.transformed(states)  # (layers + 1, C)
    all_logits = model.head.decode(head_states, word)  # (layers + 1, vocab)
    logits, head_state = all_logits[-1], head_states[-1]  # (vocab,), (C,): what the decoder reads
    shift = logits.max()
    exp = (logits - shift).exp()  # (vocab,)
    denominator = exp.sum()
    probabilities = exp / denominator
    predicted = int(logits.argmax())
    for layer, lens in zip(layers, _lens(name, states, all_logits, predicted), strict=True):
        layer["lens"] = lens
    top = logits.topk(min(top_k, logits.numel())).indices.tolist()
    return {
        "head_state": values(head_state),
        "top": [
            {
                "token": name(i),
                "id": i,
                "dot": (head_state @ word[i]).item(),
                "bias": model.head.bias[i].item(),
                "logit": logits[i].item(),
                "exp": exp[i].item(),
                "probability": probabilities[i].item(),
            }
            for i in top
        ],
        "softmax": {
            "max_logit": shift.item(),
            "shift": shift.item(),
            "denominator": denominator.item(),
            "vocabulary": logits.numel(),
            "rule": "probability = exp(logit - shift) / denominator, where shift is the largest logit and "
            "denominator sums exp(logit - shift) over the whole vocabulary",
        },
        "prediction": {"token": name(predicted), "id": predicted, "probability": probabilities[predicted].item()},
    }


@torch.no_grad()
def similarity(model: Bert, final: Tensor, other_ids: list[int]) -> dict:
    """The cosine of two sentences' pooled embeddings, and each token's exact share of it: with e = mean of the
    n final states h_i, cos = sum over i of h_i · ê_other / (n |e|), so the shares of either sentence sum to the
    cosine. `final` is the first sentence's final states, (T, C), as its trace computed them."""
    other = torch.tensor([other_ids])  # (1, T_other)
    finals = [final, model.encode(other, torch.zeros_like(other))[0]]  # (T, C), (T_other, C)
    means = [f.mean(dim=0) for f in finals]  # (C,) each
    units = [m / m.norm() for m in means]
    shares = [finals[k] @ units[1 - k] / (finals[k].size(0) * means[k].norm()) for k in (0, 1)]  # (T_k,) each
    return {
        "cosine": (units[0] @ units[1]).item(),
        "text_shares": values(shares[0]),
        "other_shares": values(shares[1]),
        "rule": "cosine = ê · ê_other; a token's share = its final state · ê_other / (tokens × |mean|)",
    }


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("checkpoint", help="a folder with config.json, vocab.txt and the weights")
    parser.add_argument("text", help="a sentence; with [MASK] where a word should be predicted, for the MLM head")
    parser.add_argument("--top-k", type=int, default=5)
    parser.add_argument("--other", help="a second sentence, to compare the two sentences' embeddings")
    args = parser.parse_args(argv)
    try:
        answer = datalab(args.checkpoint, args.text, args.top_k, other=args.other)
    except (CheckpointError, InputError) as exc:
        print(exc, file=sys.stderr)
        return 1
    print(" ".join(t["token"] for t in answer["tokens"]))
    for layer in answer["layers"]:
        lens = layer.get("lens")
        if lens:
            print(
                f"{layer['name']:>10}: rank {lens['rank']:>6}, p {lens['probability']:.4f}, "
                f"cosine to final {lens['cosine']:+.3f}, top {', '.join(t['token'] for t in lens['top'])}"
            )
    if "top" in answer:
        print(json.dumps(answer["top"], indent=1))
    else:
        embedding = answer["sentence"]["embedding"]
        print(f"sentence embedding: {len(embedding)} values, {', '.join(f'{v:.4f}' for v in embedding[:6])}, ...")
    if "similarity" in answer:
        print(f"cosine similarity with the other sentence: {answer['similarity']['cosine']:.4f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
