"""Replay the recorded digit sequences and the three numerical checks on the stored weights.

    python run.py          # a readable table; exit status 1 when a check fails
    python run.py --json   # the same replay as JSON

Needs torch, safetensors, model.py and train.py (which makes the held-out sequences) beside this file.
"""

import sys
from functools import partial

import torch
from torch import Tensor, nn

from recipekit import replay as kit
from recipekit import weights as stored
from recipekit.items import loss_curve, matrix, metric, vector
from recipekit.script import package

__package__ = package(__file__, __package__)  # python run.py: its folder is the package the server loads
from .model import BOS, DIGITS, TOKENS, WEIGHTS, Transformer, build_model, greedy
from .train import LENGTHS, TEST_SEED, TEST_SEQUENCES, by_length, digit_sequences, exact_match, pair, reversal

# The recorded sources: short, the longest trained, one with repeated digits, and one longer than any trained.
SOURCES = {"short": "123", "eight": "31415926", "repeats": "5500770", "longer": "2718281828"}
LONGER = (9, 10)  # held-out sources past the trained lengths
# Each attention the model computes, by the key its weights are recorded under and the module that makes them.
STACKS = (
    ("encoder", "self_attn", "Encoder self-attention"),
    ("decoder", "self_attn", "Decoder masked self-attention"),
    ("decoder", "cross_attn", "Cross-attention"),
)


def tokens_of(text: str) -> list[int]:
    return [DIGITS.index(ch) for ch in text]


def attention_name(stack: str, part: str, layer: int) -> str:
    """encoder_attention_l0, decoder_attention_l1, cross_attention_l0, ...: a head's key adds _h<head>."""
    return f"{'cross' if part == 'cross_attn' else stack}_attention_l{layer}"


def attention(model: Transformer, source: Tensor, target: Tensor) -> tuple[Tensor, dict[str, Tensor]]:
    """Logits (B, T, vocab) and every attention's weights (B, heads, T_query, T_key), by attention_name,
    read from the model's own softmax modules as it runs."""
    seen: dict[str, Tensor] = {}

    def keep(key: str):
        return lambda _module, _args, out: seen.__setitem__(key, out)

    hooks = [
        getattr(layer, part).softmax.register_forward_hook(keep(attention_name(stack, part, i)))
        for stack, part, _ in STACKS
        for i, layer in enumerate(getattr(model, stack))
    ]
    try:
        logits = model(source, target)
    finally:
        for hook in hooks:
            hook.remove()
    return logits, seen


@torch.no_grad()
def run_case(model: Transformer, source: list[int], title: str = "Live run") -> dict:
    """A case in the manifest's shape: the source, the greedy decoding step by step (what the decoder read at
    each step, what it wrote and the probability of every token there), every layer's and head's encoder,
    decoder and cross-attention, and against the true reversal the tokens right and the loss."""
    output = greedy(model, torch.tensor([source]), process="decode")[0]
    decoder_input = [BOS, *output[:-1]]
    # One pass over the decoded sequence gives every step: the decoder is causal, so row t is what step t saw.
    logits, weights = attention(model, torch.tensor([source]), torch.tensor([decoder_input]))
    matrices = []
    for stack, part, label in STACKS:
        for layer in range(len(getattr(model, stack))):
            name = attention_name(stack, part, layer)
            w = weights[name][0]  # (heads, T_query, T_key)
            rows, cols = (
                ("source", "source")
                if stack == "encoder" and part == "self_attn"
                else (("step", "step") if part == "self_attn" else ("step", "source token"))
            )
            matrices += [
                matrix(
                    f"{name}_h{head}",
                    f"{label}, layer {layer + 1}, head {head + 1} ({rows} × {cols})",
                    w[head].tolist(),
                )
                for head in range(w.size(0))
            ]
    matrices.append(
        matrix("probabilities", "Probability of each token at each step (step × token)", logits[0].softmax(-1).tolist())
    )
    expected = reversal(source)
    right = sum(a == b for a, b in zip(output, expected, strict=False))
    true_input, answer = pair(torch.tensor([source]))
    loss = nn.functional.cross_entropy(model(torch.tensor([source]), true_input)[0], answer[0]).item()
    vectors = [
        vector("source", "Source digits", source),
        vector("decoder_input", "What the decoder read at each step", decoder_input),
        vector("output", "What the decoder wrote at each step", output),
        vector("expected", "The true reversal", expected),
    ]
    metrics = [
        metric("steps_right", "Steps that wrote the right token", right),
        metric("steps", "Steps of the true reversal", len(expected)),
        metric("exact", "Written exactly right (1) or not (0)", int(output == expected)),
        metric("loss", "Mean cross entropy of the true reversal, read with the true prefix", loss),
    ]
    return {"label": title, "matrices": matrices, "vectors": vectors, "metrics": metrics}


def held_out(lengths: tuple[int, int] = LENGTHS) -> list[list[int]]:
    return digit_sequences(TEST_SEQUENCES, TEST_SEED if lengths == LENGTHS else TEST_SEED + lengths[0], lengths)


@torch.no_grad()
def test_case(model: Transformer) -> dict:
    """The held-out sources, held-out sources longer than any trained, exact match by length, the curve."""
    trained, longer = held_out(), held_out(LONGER)
    by_length = [
        exact_match(model, [s for s in trained + longer if len(s) == n]) for n in range(LENGTHS[0], LONGER[1] + 1)
    ]
    _, metadata = stored.read(WEIGHTS)
    return {
        "label": f"{TEST_SEQUENCES} held-out sources of {LENGTHS[0]}-{LENGTHS[1]} digits, and longer ones",
        "vectors": [
            vector(
                "exact_match_by_length",
                f"Exact match by source length ({LENGTHS[0]} to {LONGER[1]} digits)",
                by_length,
                first=LENGTHS[0],
            ),
            loss_curve(metadata),
        ],
        "metrics": [
            metric("test_exact_match", "Written exactly right, held-out sources", exact_match(model, trained)),
            metric(
                "longer_exact_match",
                f"Written exactly right, sources of {LONGER[0]}-{LONGER[1]} digits",
                exact_match(model, longer),
            ),
            metric("test_size", "Sources in each set", TEST_SEQUENCES),
        ],
    }


# The three checks. Each measures something that a broken recipe would get wrong, and says what it saw.

CHECK_CAUSAL = "Decoder self-attention is causal: no step gives weight to a later step"
CHECK_TORCH = "The recipe computes what torch.nn.Transformer computes with the same weights"
CHECK_ACCURACY = "The stored weights reproduce the held-out exact match measured when they were trained"
EXACT = 1e-5  # float32 sums of a few dozen terms agree to about this
# Logits reach tens (the tied projection of a normalised vector): float32 rounding there is about ten times EXACT.
LOGITS = 1e-4


def reference(model: Transformer) -> nn.Transformer:
    """torch.nn.Transformer given the recipe's weights: queries, keys and values stacked in in_proj."""
    c = model.config
    ref = nn.Transformer(
        c.d_model, c.heads, c.encoder_layers, c.decoder_layers, c.d_ff, dropout=0.0, batch_first=True, norm_first=False
    )
    ref.encoder.norm = ref.decoder.norm = None  # torch ends each stack with a LayerNorm; the paper's post-LN has none

    def attention_into(theirs: nn.MultiheadAttention, ours) -> None:
        theirs.in_proj_weight.copy_(torch.cat([ours.q.weight, ours.k.weight, ours.v.weight]))
        theirs.in_proj_bias.copy_(torch.cat([ours.q.bias, ours.k.bias, ours.v.bias]))
        theirs.out_proj.weight.copy_(ours.out.weight)
        theirs.out_proj.bias.copy_(ours.out.bias)

    def rest_into(theirs, ours, norms: int) -> None:
        for mine, name in (
            (ours.ffn.fc1, "linear1"),
            (ours.ffn.fc2, "linear2"),
            *((getattr(ours, f"norm{n}"), f"norm{n}") for n in range(1, norms + 1)),
        ):
            getattr(theirs, name).load_state_dict(mine.state_dict())

    for theirs, ours in zip(ref.encoder.layers, model.encoder, strict=True):
        attention_into(theirs.self_attn, ours.self_attn)
        rest_into(theirs, ours, 2)
    for theirs, ours in zip(ref.decoder.layers, model.decoder, strict=True):
        attention_into(theirs.self_attn, ours.self_attn)
        attention_into(theirs.multihead_attn, ours.cross_attn)
        rest_into(theirs, ours, 3)
    return ref.eval()


@torch.no_grad()
def check_causal(model: Transformer) -> dict:
    """Over the held-out sources read with their true prefixes: the largest weight above the diagonal, and
    how far each row's weights are from summing to 1."""
    above = off_one = 0.0
    for sources in by_length(held_out()):
        _, weights = attention(model, sources, pair(sources)[0])
        for layer in range(len(model.decoder)):
            w = weights[attention_name("decoder", "self_attn", layer)]  # (B, heads, T, T)
            above = max(above, w.triu(1).abs().max().item())
            off_one = max(off_one, (w.sum(-1) - 1).abs().max().item())
    # Above the diagonal a weight is exp(-inf), which is 0 exactly on every machine: no rounding to allow for there.
    return {
        "passed": above == 0.0 and off_one <= EXACT,
        "detail": {"largest_weight_above_diagonal": above, "largest_row_sum_error": off_one, "row_sum_allowed": EXACT},
    }


@torch.no_grad()
def check_torch(model: Transformer) -> dict:
    """Equal to nn.Transformer on the held-out sources read with their true prefixes; the same comparison
    without the decoder's causal mask must differ, or the check would prove nothing."""
    ref = reference(model)
    worst = unmasked = 0.0
    for sources in by_length(held_out()):
        target = pair(sources)[0]
        ours = model(sources, target)
        mask = nn.Transformer.generate_square_subsequent_mask(target.size(1))
        src, tgt = model.embed_tokens(sources), model.embed_tokens(target)
        theirs = ref(src, tgt, tgt_mask=mask, tgt_is_causal=True) @ model.embed.weight.T
        worst = max(worst, (ours - theirs).abs().max().item())
        unmasked = max(unmasked, (ours - ref(src, tgt) @ model.embed.weight.T).abs().max().item())
    detail = {"sources": TEST_SEQUENCES, "max_difference": worst, "unmasked_difference": unmasked}
    return {"passed": worst <= LOGITS and unmasked > 1e-3, "detail": detail}


@torch.no_grad()
def check_accuracy(model: Transformer) -> dict:
    _, metadata = stored.read(WEIGHTS)
    replayed = exact_match(model, held_out())
    trained = float(metadata.get("exact_match", "nan"))
    return kit.reproduced(replayed, trained, 0, kit.COUNTED)


CHECKS = {CHECK_CAUSAL: check_causal, CHECK_TORCH: check_torch, CHECK_ACCURACY: check_accuracy}


def written(tokens: list[int]) -> str:
    return " ".join(TOKENS[t] for t in tokens)


def replay(model: Transformer | None = None, case: str | None = None) -> dict:
    """Every recorded case and every check, or the case named alone, on the stored weights unless a model is
    given."""
    model = model if model is not None else build_model()
    cases = {
        case_id: partial(run_case, model, tokens_of(text), f"{text} → {text[::-1]}")
        for case_id, text in SOURCES.items()
    }
    cases["test-split"] = partial(test_case, model)
    return kit.cases(cases, {name: partial(check, model) for name, check in CHECKS.items()}, case)


if __name__ == "__main__":
    sys.exit(kit.main(replay, sys.argv[1:]))
