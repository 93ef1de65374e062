"""Replay the recorded selective-copying cases and the numerical checks on the stored weights.

    python run.py          # a readable table; exit status 1 when a check fails
    python run.py --json   # the same replay as JSON

Needs torch, safetensors, model.py, task.py, train.py, weights.safetensors and lstm.safetensors beside this file.
"""

import json
import sys
from functools import partial

import torch
from torch import Tensor, nn

from recipekit import replay as kit
from recipekit import weights as stored
from recipekit.items import matrix, metric, vector
from recipekit.refusals import Refused
from recipekit.script import package

__package__ = package(__file__, __package__)  # python run.py: its folder is the package the server loads
from .model import LSTM_WEIGHTS, WEIGHTS, LSTMBaseline, Mamba, SelectiveScan, build_lstm, build_model
from .task import MARKER, VOCAB, answers, example, text
from .train import accuracy, held_out

LONGEST = 48  # tokens a typed sequence may have
MOVED = [0, 0, 0, 3, 0, 0, 0, 0, 0, 0, 7, 1, 0, 0, 0, 5, 9, 9, 9, 9]  # the example's data, elsewhere in the span
LONGER = [0, 3, 0, 0, 0, 0, 0, 7, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 5, 0, 0, 0, 0, 9, 9, 9, 9]


def scans_of(model: Mamba, tokens: Tensor) -> tuple[Tensor, list[tuple[Tensor, ...]]]:
    """The logits (B, T, vocab) and what each layer's scan was given, (x, Δ, A, B, C, D), in layer order."""
    seen: list[tuple[Tensor, ...]] = []
    hooks = [
        m.register_forward_hook(lambda _m, args, _out: seen.append(tuple(a.detach() for a in args)))
        for m in model.modules()
        if isinstance(m, SelectiveScan)
    ]
    try:
        logits = model(tokens)
    finally:
        for hook in hooks:
            hook.remove()
    return logits, seen


def mixing(delta: Tensor, A: Tensor, B: Tensor, C: Tensor) -> Tensor:
    """A scan as one matrix per channel, y_t = Σ_s M[t, s] x_s + D x_t, in closed form: M[t, s] = C_t · exp((Δ_{s+1}
    + ... + Δ_t) A) · Δ_s B_s for s <= t, 0 after t. (B, d_inner, T, T): which earlier tokens each output is made of."""
    total = torch.cumsum(delta, dim=1)  # (B, T, d_inner): Δ_1 + ... + Δ_t
    between = total[:, :, None] - total[:, None, :]  # (B, t, s, d_inner): Δ_{s+1} + ... + Δ_t
    later = torch.ones(delta.size(1), delta.size(1), dtype=torch.bool).tril()[None, :, :, None]
    decay = torch.exp(between.masked_fill(~later, 0.0)[..., None] * A)  # (B, t, s, d_inner, N)
    matrix = torch.einsum("btn,btsdn,bsd,bsn->bdts", C, decay, delta, B)
    return matrix * later[..., 0][:, None]


def sequential(x: Tensor, delta: Tensor, A: Tensor, B: Tensor, C: Tensor, D: Tensor) -> tuple[Tensor, Tensor]:
    """The recurrence run step by step in double precision, one sequence (T, ...): h_t = exp(Δ_t A) h_{t-1} +
    Δ_t B_t x_t, y_t = C_t h_t + D x_t. The states (T, d_inner, N) and outputs (T, d_inner)."""
    x, delta, A, B, C, D = (v.double() for v in (x, delta, A, B, C, D))
    h = torch.zeros_like(A)
    states, outputs = [], []
    for t in range(len(x)):
        h = torch.exp(delta[t][:, None] * A) * h + (delta[t] * x[t])[:, None] * B[t][None, :]
        states.append(h)
        outputs.append(h @ C[t] + D * x[t])
    return torch.stack(states), torch.stack(outputs)


def checked(tokens: list[int]) -> list[int]:
    if not 1 <= len(tokens) <= LONGEST:
        raise Refused(f"tokens: a sequence of 1 to {LONGEST} tokens; this one has {len(tokens)}")
    if any(not 0 <= t < len(VOCAB) for t in tokens):
        raise Refused(f"tokens: each token is 0 to {len(VOCAB) - 1} ({' '.join(VOCAB)})")
    if MARKER not in tokens:
        raise Refused(f"tokens: put at least one marker ({VOCAB[MARKER]}) where an answer is wanted")
    return tokens


@torch.no_grad()
def run_case(model: Mamba, lstm: LSTMBaseline, tokens: list[int], title: str = "Live run") -> dict:
    """A case in the manifest's shape: the tokens; at each marker the answer of the Mamba and of the LSTM, with the
    right one where the sequence has one; and for every layer, token by token, the step size Δ of every channel,
    B and C, the size of the state, and the mixing matrix (how much of each earlier token each output is made of)."""
    checked(tokens)
    batch = torch.tensor([tokens])
    logits, scans = scans_of(model, batch)
    at, right = answers(tokens)
    probs = logits[0, at].softmax(-1)  # (markers, vocab)
    predicted = probs.argmax(-1).tolist()
    lstm_read = lstm(batch)[0, at].argmax(-1).tolist()
    names = [f"{k + 1} {VOCAB[t]}" for k, t in enumerate(tokens)]
    matrices = [
        matrix(
            "probabilities",
            "Mamba's probability of each token at each marker",
            probs.tolist(),
            rows=[names[k] for k in at],
            columns=list(VOCAB),
        )
    ]
    vectors = [
        vector("tokens", f"Tokens ({', '.join(f'{k} {v}' for k, v in enumerate(VOCAB))})", tokens),
        vector("answered_at", "The markers' positions (from 0), where the answers are", at),
        vector("predicted", "Mamba's answer at each marker", predicted),
        vector("baseline_predicted", "The LSTM's answer at each marker", lstm_read),
    ]
    for layer, (x, delta, A, B, C, _D) in enumerate(scans, start=1):
        states = SelectiveScan().states(x, delta, A, B)[0]  # (T, d_inner, N)
        matrices += [
            matrix(
                f"delta_{layer}",
                f"Layer {layer}: the step size Δ of each channel at each token",
                delta[0].tolist(),
                rows=names,
            ),
            matrix(
                f"B_{layer}",
                f"Layer {layer}: B, how each token writes into the state (token × state)",
                B[0].tolist(),
                rows=names,
            ),
            matrix(
                f"C_{layer}",
                f"Layer {layer}: C, how each output reads the state (token × state)",
                C[0].tolist(),
                rows=names,
            ),
            matrix(
                f"state_{layer}",
                f"Layer {layer}: the size of each channel's state after each token, ‖h_t‖",
                states.norm(dim=-1).tolist(),
                rows=names,
            ),
            matrix(
                f"mixing_{layer}",
                f"Layer {layer}: how much of each earlier token (column) each output "
                "(row) is made of, |M[t, s]| averaged over the channels",
                mixing(delta, A, B, C)[0].abs().mean(0).tolist(),
                rows=names,
                columns=names,
            ),
        ]
        vectors.append(
            vector(
                f"mean_delta_{layer}",
                f"Layer {layer}: the mean step size Δ at each token",
                delta[0].mean(-1).tolist(),
                first=1,
            )
        )
    metrics = [metric("steps", "Tokens", len(tokens)), metric("markers", "Markers: answers asked for", len(at))]
    if right is not None:
        vectors.insert(3, vector("expected", "The right answer at each marker: the data tokens in order", right))
        target = torch.tensor(right)
        metrics += [
            metric("right", "Mamba's answers right", sum(p == r for p, r in zip(predicted, right, strict=True))),
            metric(
                "lstm_right", "The LSTM's answers right", sum(p == r for p, r in zip(lstm_read, right, strict=True))
            ),
            metric(
                "loss",
                "Mamba's cross entropy at the markers",
                nn.functional.cross_entropy(logits[0, at], target).item(),
            ),
        ]
    return {"label": title, "matrices": matrices, "vectors": vectors, "metrics": metrics}


def test_case(model: Mamba, lstm: LSTMBaseline) -> dict:
    """The held-out sequences for both models, and both training curves."""
    tokens, targets = held_out()
    answers = int(stored.read(WEIGHTS)[1]["test_answers"])
    metrics = [metric("test_answers", "Answers asked for", answers), metric("test_size", "Sequences", len(tokens))]
    vectors = []
    # The LSTM's metrics are the baseline's (the lab's words name it), so that the outcome reads them by key.
    for name, key, prefix, net, path in (
        ("Mamba", "mamba", "", model, WEIGHTS),
        ("The LSTM", "lstm", "baseline_", lstm, LSTM_WEIGHTS),
    ):
        right, whole = accuracy(net, tokens, targets)
        trained = stored.read(path)[1]
        metrics += [
            metric(f"{prefix}test_right", f"{name}: answers right of {answers:,}", right),
            metric(f"{prefix}test_whole", f"{name}: sequences wholly right of {len(tokens):,}", whole),
            metric(f"{prefix}weights", f"{name}: weights", int(trained["parameters"])),
        ]
        vectors += [
            vector(
                f"{key}_training_loss",
                f"{name}: mean training loss in each epoch (25 steps)",
                json.loads(trained["loss_per_epoch"]),
                first=1,
            ),
            vector(
                f"{key}_accuracy",
                f"{name}: held-out answers right after each epoch",
                json.loads(trained["accuracy_per_epoch"]),
                first=1,
            ),
        ]
    return {"label": "All held-out sequences", "matrices": [], "vectors": vectors, "metrics": metrics}


# The checks. Each measures something that a broken recipe would get wrong, and says what it saw.

CHECK_SCAN = "The parallel scan equals the recurrence h_t = exp(Δ_t A) h_{t-1} + Δ_t B_t x_t run step by step"
CHECK_MIXING = "Each layer's output is its mixing matrix times its input, y = M x + D x, as the page draws M"
CHECK_HELD = "The stored Mamba reproduces the held-out answers measured when it was trained"
CHECK_LSTM = "The stored LSTM reproduces the held-out answers measured when it was trained"
CLOSE = 1e-5  # float32 against float64, relative to the largest value of the layer (its outputs reach 240)
CHECKED_SEQUENCES = 64  # held-out sequences the scan checks run on, beside the example


def checked_scans(model: Mamba) -> list[tuple[Tensor, ...]]:
    tokens = torch.cat([torch.tensor([example()]), held_out()[0][:CHECKED_SEQUENCES]])
    with torch.no_grad():
        return scans_of(model, tokens)[1]


def relative(found: Tensor, reference: Tensor) -> float:
    """The largest |difference| over the largest |value| of the reference."""
    return ((found.double() - reference).abs().max() / reference.abs().max()).item()


def check_scan(model: Mamba) -> dict:
    worst_h = worst_y = 0.0
    scans = checked_scans(model)
    for x, delta, A, B, C, D in scans:
        h = SelectiveScan().states(x, delta, A, B)
        y = SelectiveScan()(x, delta, A, B, C, D)
        steps = [sequential(x[k], delta[k], A, B[k], C[k], D) for k in range(len(x))]
        worst_h = max(worst_h, relative(h, torch.stack([states for states, _ in steps])))
        worst_y = max(worst_y, relative(y, torch.stack([outputs for _, outputs in steps])))
    return {
        "passed": max(worst_h, worst_y) <= CLOSE,
        "detail": {
            "largest_relative_state_difference": worst_h,
            "largest_relative_output_difference": worst_y,
            "sequences": CHECKED_SEQUENCES + 1,
            "layers": len(scans),
            "allowed": CLOSE,
        },
    }


def check_mixing(model: Mamba) -> dict:
    worst = 0.0
    for x, delta, A, B, C, D in checked_scans(model):
        y = SelectiveScan()(x, delta, A, B, C, D)
        x, delta, A, B, C, D = (v.double() for v in (x, delta, A, B, C, D))
        by_matrix = torch.einsum("bdts,bsd->btd", mixing(delta, A, B, C), x) + D * x
        worst = max(worst, relative(y, by_matrix))
    return {"passed": worst <= CLOSE, "detail": {"largest_relative_difference": worst, "allowed": CLOSE}}


def check_held(model: nn.Module, path=WEIGHTS) -> dict:
    replayed = accuracy(model, *held_out())[0]
    return kit.reproduced(replayed, int(stored.read(path)[1].get("test_right", "-1")), 0, kit.COUNTED)


def replay(model: Mamba | None = None, case: str | None = None) -> dict:
    """Every recorded case and every check, or the case named alone, on the stored weights unless a model is
    given."""
    model = model if model is not None else build_model()
    lstm = build_lstm()
    cases = {
        "example": partial(run_case, model, lstm, example(), text(example())),
        "moved": partial(run_case, model, lstm, MOVED, text(MOVED)),
        "longer": partial(run_case, model, lstm, LONGER, text(LONGER)),
        "test-split": partial(test_case, model, lstm),
    }
    checks = {
        CHECK_SCAN: partial(check_scan, model),
        CHECK_MIXING: partial(check_mixing, model),
        CHECK_HELD: partial(check_held, model),
        CHECK_LSTM: partial(check_held, lstm, LSTM_WEIGHTS),
    }
    return kit.cases(cases, checks, case)


if __name__ == "__main__":
    sys.exit(kit.main(replay, sys.argv[1:]))
