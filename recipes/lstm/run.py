"""Replay the recorded bracket strings and the four numerical checks on the stored weights.

    python run.py          # a readable table; exit status 1 when a check fails
    python run.py --json   # the same replay as JSON

Needs torch, safetensors, model.py and train.py (which makes the held-out strings) beside this file.
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
from .model import TOKENS, WEIGHTS, BracketLSTM, build_model, depths_of
from .train import LENGTHS, TEST_SEED, TEST_STRINGS, batch_of, bracket_strings, scores

# The recorded strings: nesting as in the training strings, the deepest nesting trained, a flat run, and one
# longer than any training string, where the count drifts.
STRINGS = {
    "nested": "(()(()))",
    "deep": "(((((((())))))))",
    "flat": "()()()()()()",
    "longer": "((()((((()(())(()()())(()))))))",
}
LONGER = {"longer-21-30": (21, 30), "longer-31-40": (31, 40)}  # held-out strings past the trained lengths
# Each state the cell keeps or computes at every step, by the module whose output it is.
STATES = (
    ("input_gate", "input_gate", "Input gate i_t: how much of the candidate is written"),
    ("forget_gate", "forget_gate", "Forget gate f_t: how much of the old cell state is kept"),
    ("candidate", "candidate", "Candidate g_t: what may be written (tanh)"),
    ("output_gate", "output_gate", "Output gate o_t: how much of the cell is shown"),
)


def tokens_of(text: str) -> list[int]:
    return [TOKENS.index(ch) for ch in text]


def steps(model: BracketLSTM, tokens: list[int]) -> tuple[Tensor, dict[str, Tensor]]:
    """Logits (T, depths) and, per step, every gate, the cell state and the hidden state (each (T, hidden)),
    read from the model's own modules as it runs."""
    seen: dict[str, list[Tensor]] = {"cell": [], "hidden": []}

    def keep(_module, _args, out) -> None:  # the cell answers (h_t, c_t)
        seen["hidden"].append(out[0][0])
        seen["cell"].append(out[1][0])

    def enter(_module, args: tuple) -> tuple:  # the cell is called (x_t, h_{t-1}, c_{t-1})
        x, h, c = args
        h, c = kit.step_state("scan", (h, c), f"token {len(seen['hidden']) + 1}")  # step by step: the recorded state
        return x, h, c

    hooks = [
        getattr(model.cell, name).register_forward_hook(
            lambda _m, _a, out, key=key: seen.setdefault(key, []).append(out[0])
        )
        for key, name, _ in STATES
    ]
    hooks += [model.cell.register_forward_hook(keep), model.cell.register_forward_pre_hook(enter)]
    try:
        logits = model(torch.tensor([tokens]))[0]
    finally:
        for hook in hooks:
            hook.remove()
    return logits, {key: torch.stack(values) for key, values in seen.items()}


@torch.no_grad()
def run_case(model: BracketLSTM, tokens: list[int], title: str = "Live run") -> dict:
    """A case in the manifest's shape: the tokens, every gate and state at every step, the depth
    probabilities after each token and the depths read; where every depth is one the network tells apart
    (0 to 8: nothing closed before it was opened), the true depths and the loss too."""
    logits, states = steps(model, tokens)
    probs = logits.softmax(-1)  # (T, depths)
    predicted = logits.argmax(-1)
    matrices = [matrix(key, f"{label} (step × unit)", states[key].tolist()) for key, _, label in STATES]
    matrices += [
        matrix("cell", "Cell state c_t = f_t·c_{t-1} + i_t·g_t (step × unit)", states["cell"].tolist()),
        matrix("hidden", "Hidden state h_t = o_t·tanh(c_t) (step × unit)", states["hidden"].tolist()),
        matrix("probabilities", "Probability of each depth after each token (step × depth)", probs.tolist()),
    ]
    vectors = [
        vector("tokens", "Tokens (0 opens, 1 closes)", tokens),
        vector("predicted", "Depth read after each token", predicted.tolist()),
    ]
    metrics = [metric("steps", "Tokens", len(tokens))]
    depths = torch.tensor(depths_of(tokens))
    if bool(((depths >= 0) & (depths < logits.size(-1))).all()):
        vectors.insert(1, vector("expected", "True depth after each token", depths.tolist()))
        metrics = [
            metric("steps_right", "Tokens whose depth is read right", int((predicted == depths).sum())),
            *metrics,
            metric(
                "loss", "Mean cross entropy against the true depths", nn.functional.cross_entropy(logits, depths).item()
            ),
        ]
    return {"label": title, "matrices": matrices, "vectors": vectors, "metrics": metrics}


def held_out() -> list[list[int]]:
    return bracket_strings(TEST_STRINGS, TEST_SEED)


@torch.no_grad()
def test_case(model: BracketLSTM) -> dict:
    """The held-out strings, and held-out strings longer than any the network was trained on."""
    metrics = []
    for key, lengths in {"test": LENGTHS, **LONGER}.items():
        measured = scores(
            model, bracket_strings(TEST_STRINGS, TEST_SEED + lengths[0], lengths) if key != "test" else held_out()
        )
        where = "held-out strings" if key == "test" else f"strings of {lengths[0]}-{lengths[1]} tokens"
        metrics += [
            metric(f"{key}_token_accuracy", f"Depths read right, {where}", measured["token_accuracy"]),
            metric(f"{key}_string_accuracy", f"Strings read wholly right, {where}", measured["string_accuracy"]),
        ]
    _, trained = stored.read(WEIGHTS)
    curve = loss_curve(trained)
    return {
        "label": f"{TEST_STRINGS} held-out strings of {LENGTHS[0]}-{LENGTHS[1]} tokens, and longer ones",
        "vectors": [curve],
        "metrics": metrics + [metric("test_size", "Strings in each set", TEST_STRINGS)],
    }


# The four checks. Each measures something that a broken recipe would get wrong, and says what it saw.

CHECK_TORCH = "The gate-by-gate cell computes what torch.nn.LSTM computes with the same weights"
CHECK_RANGES = "Every gate lies between 0 and 1, and the candidate between -1 and 1"
CHECK_RECURRENCE = "Each step's cell and hidden state follow c_t = f_t·c_{t-1} + i_t·g_t and h_t = o_t·tanh(c_t)"
CHECK_ACCURACY = "The stored weights reproduce the held-out accuracy measured when they were trained"
EXACT = 1e-5  # float32 sums of a few dozen terms agree to about this


def reference_lstm(
    model: BracketLSTM, order: tuple[str, ...] = ("input_gate", "forget_gate", "candidate", "output_gate")
) -> nn.LSTM:
    """torch.nn.LSTM given the cell's weights: its gates are stacked in the order i, f, g, o."""
    cell = model.cell
    gates = [getattr(cell, name) for name in order]
    lstm = nn.LSTM(model.config.features, model.config.hidden, batch_first=True)
    lstm.weight_ih_l0.copy_(torch.cat([g.W.weight for g in gates]))
    lstm.weight_hh_l0.copy_(torch.cat([g.U.weight for g in gates]))
    lstm.bias_ih_l0.copy_(torch.cat([g.W.bias for g in gates]))
    lstm.bias_hh_l0.zero_()
    return lstm.eval()


def hidden_states(model: BracketLSTM, tokens: Tensor) -> Tensor:
    """Every step's hidden state (B, T, hidden), from the model's own loop."""
    kept: list[Tensor] = []
    hook = model.cell.register_forward_hook(lambda _m, _a, out: kept.append(out[0]))
    try:
        model(tokens)
    finally:
        hook.remove()
    return torch.stack(kept, 1)


@torch.no_grad()
def check_torch(model: BracketLSTM) -> dict:
    """Equal to nn.LSTM on the held-out strings; the same comparison with the input and forget gates swapped
    must differ, or the check would prove nothing."""
    tokens, _ = batch_of(held_out())
    ours = hidden_states(model, tokens)
    theirs, _ = reference_lstm(model)(model.embed(tokens))
    swapped, _ = reference_lstm(model, ("forget_gate", "input_gate", "candidate", "output_gate"))(model.embed(tokens))
    detail = {
        "strings": len(tokens),
        "max_difference": (ours - theirs).abs().max().item(),
        "swapped_gates_difference": (ours - swapped).abs().max().item(),
    }
    return {"passed": detail["max_difference"] <= EXACT and detail["swapped_gates_difference"] > 1e-3, "detail": detail}


@torch.no_grad()
def check_ranges(model: BracketLSTM) -> dict:
    detail = {}
    for string in held_out()[:50]:
        _, states = steps(model, string)
        for key, _, _ in STATES:
            low, high = states[key].min().item(), states[key].max().item()
            kept = detail.setdefault(key, {"min": low, "max": high})
            kept["min"], kept["max"] = min(kept["min"], low), max(kept["max"], high)
    passed = all((-1 if key == "candidate" else 0) <= d["min"] and d["max"] <= 1 for key, d in detail.items())
    return {"passed": passed, "detail": detail}


@torch.no_grad()
def check_recurrence(model: BracketLSTM) -> dict:
    """The recorded states recomputed from the recorded gates, step by step, from a zero state."""
    worst_c = worst_h = 0.0
    for string in held_out()[:50]:
        _, s = steps(model, string)
        missing = [key for key, _, _ in STATES if key not in s]
        if missing:
            return {"passed": False, "detail": {"gates_never_run": missing}}
        previous = torch.cat([torch.zeros_like(s["cell"][:1]), s["cell"][:-1]])
        cell = s["forget_gate"] * previous + s["input_gate"] * s["candidate"]
        worst_c = max(worst_c, (cell - s["cell"]).abs().max().item())
        worst_h = max(worst_h, (s["output_gate"] * torch.tanh(s["cell"]) - s["hidden"]).abs().max().item())
    return {
        "passed": worst_c <= 1e-6 and worst_h <= 1e-6,
        "detail": {"strings": 50, "cell_max_difference": worst_c, "hidden_max_difference": worst_h},
    }


@torch.no_grad()
def check_accuracy(model: BracketLSTM) -> dict:
    _, metadata = stored.read(WEIGHTS)
    replayed = scores(model, held_out())["token_accuracy"]
    trained = float(metadata.get("token_accuracy", "nan"))
    return kit.reproduced(replayed, trained, 0, kit.COUNTED)


CHECKS = {
    CHECK_TORCH: check_torch,
    CHECK_RANGES: check_ranges,
    CHECK_RECURRENCE: check_recurrence,
    CHECK_ACCURACY: check_accuracy,
}


def replay(model: BracketLSTM | None = None, case: str | None = None) -> dict:
    """Every recorded case and every check, or the case named alone, on the stored weights unless a model is
    given."""
    model = model if model is not None else build_model()
    cases = {case_id: partial(run_case, model, tokens_of(text), f"“{text}”") for case_id, text in STRINGS.items()}
    cases["test-split"] = partial(test_case, model)
    return kit.cases(cases, {name: partial(check, model) for name, check in CHECKS.items()}, case)


if __name__ == "__main__":
    sys.exit(kit.main(replay, sys.argv[1:]))
