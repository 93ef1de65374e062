"""Replay the recorded induction-head cases and the six numerical checks.

    python run.py          # a readable table; exit status 1 when a check fails
    python run.py --json   # the same replay as JSON

Needs torch, safetensors, model.py and train.py (which makes the held-out sequences and measures the scores) beside
this file.
"""

import json
import sys
from functools import partial

import torch
from torch import Tensor, nn

from recipekit import replay as kit
from recipekit import weights as stored
from recipekit.items import loss_curve, matrix, metric, vector
from recipekit.script import package

__package__ = package(__file__, __package__)  # python run.py: its folder is the package the server loads
from .model import WEIGHTS, AttentionOnly, build_model
from .train import LETTERS, held_out, measured, next_token_loss, patterns, scores

# The recorded sequences: random letters, then a run of letters twice in a row; and one that never repeats.
REPEATS = {
    "worlds": ("q z x j v k f y g b", "w o r l d s"),
    "blacksmith": ("v q z p e g u o", "b l a c k s m i t h"),
}
NO_REPEAT = "t q m z h b w j o x k c r v y f a n d g s l u p i e"


def encode(text: str) -> list[int]:
    return [LETTERS.index(letter) for letter in text.split()]


def induction_targets(tokens: Tensor) -> Tensor:
    """Where an induction head looks from each query, for letters (B, T): (B, T, T), 1 just after every earlier place
    of the query's letter (key s + 1 for each s < t where the letter at s is the letter at t), else 0."""
    T = tokens.size(1)
    same = tokens[:, :, None] == tokens[:, None, :]  # (B, T, T): query t's letter is key s's
    earlier = torch.ones(T, T, dtype=torch.bool).tril(-1)  # s < t
    targets = torch.zeros(same.shape)
    targets[:, :, 1:] = (same & earlier)[:, :, :-1].float()  # one past each earlier place
    return targets


def head_names(attention: list[Tensor]) -> list[str]:
    return [f"layer {layer} · head {h}" for layer, pattern in enumerate(attention) for h in range(pattern.size(1))]


def head_scores(logits: Tensor, attention: list[Tensor], tokens: Tensor) -> dict[str, Tensor]:
    """Over any letters (B, T), T > 1: every head's previous-token score (its mean attention to the letter just
    before), its induction score where a letter repeats (its mean attention, from each letter seen before, to just
    after that letter's earlier places), the loss at every position, and the losses after a letter seen before
    (which an induction head can copy) and after one not seen, where there are such."""
    targets = induction_targets(tokens)
    every = torch.cat(attention, 1)  # (B, layers · heads, T, T)
    losses = nn.functional.cross_entropy(logits[:, :-1].transpose(1, 2), tokens[:, 1:], reduction="none")  # (B, T-1)
    found = {
        "targets": targets,
        "position_loss": losses,
        "previous": every.diagonal(offset=-1, dim1=-2, dim2=-1).mean((0, 2)),
    }  # (layers · heads,)
    repeated = targets.bool().any(-1)  # (B, T): queries whose letter was seen before
    if repeated.any():
        found["induction"] = (every * targets[:, None]).sum(-1).transpose(0, 1)[:, repeated].mean(-1)
    seen = repeated[:, :-1]  # (B, T - 1): predictions made after a letter seen before
    if seen.any():
        found["seen_loss"] = losses[seen].mean()
    if not seen.all():
        found["unseen_loss"] = losses[~seen].mean()
    return found


def scored(found: dict[str, Tensor], names: list[str]) -> tuple[list[dict], list[dict]]:
    """head_scores() as a case's vectors and metrics."""
    vectors = [
        vector(
            "previous_token_scores",
            "Previous-token score of every head (mean attention to the letter just before)",
            found["previous"],
            names=names,
        )
    ]
    if "induction" in found:
        vectors.append(
            vector(
                "induction_scores",
                "Induction score of every head (mean attention to just after the earlier places of the letter)",
                found["induction"],
                names=names,
            )
        )
    metrics = [
        metric(key, label, found[key])
        for key, label in (
            ("seen_loss", "Loss after a letter seen before (an induction head can copy)"),
            ("unseen_loss", "Loss after a letter not seen before (a guess)"),
        )
        if key in found
    ]
    return vectors, metrics


@torch.no_grad()
def run_case(model: AttentionOnly, ids: list[int]) -> dict:
    """A case in the manifest's shape: every layer's and head's attention over the letters, where an induction head
    would look, the next-letter distribution and loss at every position, and every head's scores (head_scores)."""
    tokens = torch.tensor([ids])
    logits, attention = patterns(model, tokens)
    letters = [LETTERS[t] for t in ids]
    matrices = [
        matrix(
            f"attention_l{layer}_h{h}",
            f"Layer {layer} · head {h} attention",
            pattern[0, h],
            rows=letters,
            columns=letters,
        )
        for layer, pattern in enumerate(attention)
        for h in range(pattern.size(1))
    ]
    matrices.append(
        matrix(
            "induction_targets",
            "Where an induction head would look (1: just after an earlier place of the query's letter)",
            induction_targets(tokens)[0],
            rows=letters,
            columns=letters,
        )
    )
    matrices.append(
        matrix(
            "next_token_probs",
            "Next-letter distribution at every position",
            logits[0].softmax(-1),
            rows=letters,
            columns=list(LETTERS),
        )
    )
    vectors = [vector("tokens", "Letters, as token ids (a = 0)", ids, names=letters)]
    metrics = []
    if len(ids) > 1:  # one letter predicts nothing that can be scored
        found = head_scores(logits, attention, tokens)
        vectors.append(
            vector(
                "position_loss",
                "Loss of the next letter at each position",
                found["position_loss"][0],
                names=letters[:-1],
            )
        )
        metrics.append(
            metric("loss", "Mean next-letter cross entropy over every position", next_token_loss(logits, tokens))
        )
        more_vectors, more_metrics = scored(found, head_names(attention))
        vectors += more_vectors
        metrics += more_metrics
    return {"label": " ".join(letters), "matrices": matrices, "vectors": vectors, "metrics": metrics}


def repeat_case(model: AttentionOnly, prefix: str, run: str) -> dict:
    return run_case(model, encode(prefix) + encode(run) * 2)


@torch.no_grad()
def test_case(model: AttentionOnly) -> dict:
    """The held-out sequences: each head's scores, the two copies' losses, and the training curves with their
    phase change."""
    tokens, runs = held_out()
    logits, attention = patterns(model, tokens)
    found = scores(logits, attention, tokens, runs)
    _, metadata = stored.read(WEIGHTS)
    heads_vectors, heads_metrics = scored(head_scores(logits, attention, tokens), head_names(attention))

    def per_round(name: str, label: str) -> dict:
        return vector(f"{name}_by_round", label, json.loads(metadata[f"{name}_per_round"]), first=1)

    return {
        "label": f"{len(tokens)} held-out sequences, never trained on",
        "vectors": [
            *heads_vectors,
            per_round("second_half_loss", "Loss of the repeated letters after each round of training"),
            per_round("induction_score", "Best induction score after each round of training"),
            per_round("previous_token_score", "Best previous-token score after each round of training"),
            loss_curve(metadata),
        ],
        "metrics": [
            metric(
                "induction_score",
                "Best induction score (layer 1, on the run's second copy), held out",
                found["induction"].max(),
            ),
            metric(
                "previous_token_score", "Best previous-token score (layer 0), held out", found["previous_token"].max()
            ),
            metric("first_half_loss", "Loss of the run's letters the first time, held out", found["first_half_loss"]),
            metric(
                "second_half_loss", "Loss of the run's letters the second time, held out", found["second_half_loss"]
            ),
            *heads_metrics,
            metric("test_size", "Held-out sequences", len(tokens)),
        ],
    }


# The six checks. Each measures something that a broken recipe would get wrong, and says what it saw.

CHECK_INDUCTION = "A head of layer 1 attends from a repeated letter to the one after its earlier copy (score above 0.5)"
CHECK_PREVIOUS = "A head of layer 0 attends to the letter just before each one (score above 0.5)"
CHECK_HALVES = "The repeated letters are predicted: their loss is under a quarter of the first copy's"
CHECK_CIRCUIT = "Without layer 0's previous-token head, the induction heads lose the copy (the score falls by half)"
CHECK_PHASE = "Training records a phase change: in five rounds the repeat's loss makes over 40% of its whole fall"
CHECK_REPRODUCED = "The stored weights reproduce the held-out loss of the repeat measured when they were trained"
SCORE = 0.5  # a head that puts more than half its attention where the circuit needs it
QUARTER = 0.25
WINDOW, SHARE = 5, 0.4  # a steady fall over train.py's 40 rounds would make 5 / 40 = 12.5% in any five
FLOAT32 = 1e-4  # a mean of about 2,000 float32 cross entropies, summed in another order by other kernels


@torch.no_grad()
def check_induction(model: AttentionOnly) -> dict:
    found = measured(model)
    return {"passed": found["induction_score"] > SCORE, "detail": found}


@torch.no_grad()
def check_previous(model: AttentionOnly) -> dict:
    found = measured(model)
    return {"passed": found["previous_token_score"] > SCORE, "detail": found}


@torch.no_grad()
def check_halves(model: AttentionOnly) -> dict:
    found = measured(model)
    ratio = found["second_half_loss"] / found["first_half_loss"]
    return {"passed": ratio < QUARTER, "detail": found | {"ratio": ratio}}


def without_head(model: AttentionOnly, layer: int, head: int):
    """A hook that zeroes one head's output where the heads meet (the input of the layer's `out` projection)."""
    width = model.config.n_embd // model.config.n_head

    def zeroed(_module, args: tuple[Tensor]) -> tuple[Tensor]:
        kept = args[0].clone()
        kept[..., head * width : (head + 1) * width] = 0
        return (kept,)

    return model.layers[layer].out.register_forward_pre_hook(zeroed)


@torch.no_grad()
def check_circuit(model: AttentionOnly) -> dict:
    """Zero layer 0's best previous-token head and measure the induction heads again."""
    tokens, runs = held_out()
    logits, attention = patterns(model, tokens)
    intact = scores(logits, attention, tokens, runs)
    head = int(intact["previous_token"].argmax())
    hook = without_head(model, 0, head)
    try:
        ablated = measured(model, tokens, runs)
    finally:
        hook.remove()
    before = intact["induction"].max().item()
    return {
        "passed": before > SCORE and ablated["induction_score"] < before / 2,
        "detail": {
            "previous_token_head": head,
            "induction_score": before,
            "ablated": ablated["induction_score"],
            "second_half_loss_ablated": ablated["second_half_loss"],
        },
    }


def check_phase(model: AttentionOnly, curve: list[float] | None = None) -> dict:
    """The steepest WINDOW rounds of the repeat's held-out loss curve (stored with the weights) against its whole
    fall."""
    if curve is None:
        _, metadata = stored.read(WEIGHTS)
        curve = json.loads(metadata["second_half_loss_per_round"])
    whole = curve[0] - min(curve)
    steepest = max(range(len(curve) - WINDOW), key=lambda r: curve[r] - curve[r + WINDOW])
    share = (curve[steepest] - curve[steepest + WINDOW]) / whole if whole > 0 else 0.0
    return {
        "passed": share > SHARE,
        "detail": {
            "rounds": f"{steepest + 1}-{steepest + 1 + WINDOW}",
            "from": curve[steepest],
            "to": curve[steepest + WINDOW],
            "share_of_whole_fall": share,
        },
    }


@torch.no_grad()
def check_reproduced(model: AttentionOnly) -> dict:
    _, metadata = stored.read(WEIGHTS)
    return kit.reproduced(
        measured(model)["second_half_loss"],
        float(metadata["second_half_loss"]),
        FLOAT32,
        "a mean of about 2,000 float32 cross entropies",
    )


CHECKS = {
    CHECK_INDUCTION: check_induction,
    CHECK_PREVIOUS: check_previous,
    CHECK_HALVES: check_halves,
    CHECK_CIRCUIT: check_circuit,
    CHECK_PHASE: check_phase,
    CHECK_REPRODUCED: check_reproduced,
}


def replay(model: AttentionOnly | None = None, case: str | None = None) -> dict:
    """Every recorded case and every check, or the case named alone, on the stored weights unless a model is
    given."""
    model = model if model is not None else build_model()
    cases = {case_id: partial(repeat_case, model, prefix, run) for case_id, (prefix, run) in REPEATS.items()}
    cases["no-repeat"] = partial(run_case, model, encode(NO_REPEAT))
    cases["test-split"] = partial(test_case, model)
    return kit.cases(cases, {name: partial(check, model) for name, check in CHECKS.items()}, case)


if __name__ == "__main__":
    sys.exit(kit.main(replay, sys.argv[1:]))
