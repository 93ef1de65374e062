"""Replay the recorded grokking cases and the four numerical checks.

    python run.py          # a readable table; exit status 1 when a check fails
    python run.py --json   # the same replay as JSON

Needs torch, safetensors, model.py and train.py (which makes the split) beside this file.
"""

import json
import math
import sys
from functools import partial

import torch
from torch import Tensor

from recipekit import replay as kit
from recipekit import weights as stored
from recipekit.items import loss_curve, matrix, metric, vector
from recipekit.script import package

__package__ = package(__file__, __package__)  # python run.py: its folder is the package the server loads
from .model import EQUALS, WEIGHTS, OneLayer, P, build_model
from .train import KEY, accuracy, first_round, split

WORDS = [str(n) for n in range(P)] + ["="]
FREQUENCIES = [f"k = {k}" for k in range(1, P // 2 + 1)]
EVERY = 5  # the training's spectrum is drawn after round 1 and every 5th
WRAPS = (40, 39)  # a recorded sum past the modulus: 79 mod 41 = 38


def _metadata() -> dict:
    return stored.read(WEIGHTS)[1]


def chosen_sums() -> dict[str, tuple[int, int]]:
    """The recorded sums: the first training pair, the first held-out pair, and 40 + 39 (held out or not, it
    wraps around the circle: 79 mod 41 = 38)."""
    seen, held = split()
    return {
        "trained-sum": tuple(seen[0].tolist()),
        "held-out-sum": tuple(held[0].tolist()),
        "wraps-around": WRAPS,
    }


@torch.no_grad()
def sum_case(model: OneLayer, a: int, b: int) -> dict:
    """One sum read by the model: the attention of each head from "=" (and the others), the probability of every
    answer, and the answer against the right one."""
    ids = torch.tensor([[a, b, EQUALS]])
    captured: list[Tensor] = []
    hook = model.attn.softmax.register_forward_hook(lambda _m, _a, out: captured.append(out))
    try:
        logits = model(ids)[0]
    finally:
        hook.remove()
    words = [WORDS[a], WORDS[b], "="]
    probs = logits.softmax(-1)
    seen, _ = split()
    trained_on = bool(((seen[:, 0] == a) & (seen[:, 1] == b)).any())
    return {
        "label": f"{a} + {b} = ? (mod {P}){'' if trained_on else ', never trained on'}",
        "matrices": [
            matrix(f"attention_l0_h{h}", f"Head {h} attention", captured[0][0, h], rows=words, columns=words)
            for h in range(model.config.n_head)
        ],
        "vectors": [
            vector("input_ids", "The sum as tokens (41 is “=”)", [a, b, EQUALS], names=words),
            vector("probabilities", f"Probability of every answer 0-{P - 1}", probs, names=WORDS[:P]),
            vector("answer", "The model's answer", [int(probs.argmax())]),
            vector("expected", f"The right answer, ({a} + {b}) mod {P}", [(a + b) % P]),
        ],
        "metrics": [metric("confidence", "Probability of the model's answer", probs.max())],
    }


def key_share(model: OneLayer) -> tuple[float, list[int]]:
    """The embedding's five strongest frequencies and their share of its power, computed against an explicit basis
    of cosines and sines around the circle of p numbers (not train.py's FFT)."""
    p = model.config.p
    numbers = torch.arange(p, dtype=torch.float64)[:, None]
    k = torch.arange(1, p // 2 + 1, dtype=torch.float64)[None, :]
    cos, sin = torch.cos(2 * math.pi * k * numbers / p), torch.sin(2 * math.pi * k * numbers / p)  # (p, p // 2)
    E = model.embed.weight[:p].detach().double()  # (p, C)
    E = E - E.mean(0)  # the constant part apart
    power = (cos.T @ E).pow(2).sum(-1) + (sin.T @ E).pow(2).sum(-1)  # (p // 2,)
    share = power / power.sum()
    top = share.topk(KEY)
    return top.values.sum().item(), sorted((top.indices + 1).tolist())


@torch.no_grad()
def training_case(model: OneLayer) -> dict:
    """The training: both accuracies after every round, the memorising and the generalising rounds, the embedding's
    spectrum after every round, and what the stored weights answer on both halves."""
    metadata = _metadata()
    train_curve = json.loads(metadata["train_accuracy_per_round"])
    test_curve = json.loads(metadata["test_accuracy_per_round"])
    spectra = json.loads(metadata["spectrum_per_round"])
    seen, held = split()
    share, key = key_share(model)
    shown = [1, *range(EVERY, len(spectra) + 1, EVERY)]  # rounds whose spectrum is drawn: one page of rows
    return {
        "label": f"Training: {len(seen)} sums learnt, {len(held)} held out",
        "matrices": [
            matrix(
                "spectrum_by_round",
                f"The embedding's power at each frequency, after round 1 and every {EVERY}th",
                [spectra[r - 1] for r in shown],
                rows=[f"round {r}" for r in shown],
                columns=FREQUENCIES,
            )
        ],
        "vectors": [
            vector("test_accuracy_by_round", "Accuracy on the held-out sums after each round", test_curve, first=1),
            vector("train_accuracy_by_round", "Accuracy on the training sums after each round", train_curve, first=1),
            vector("spectrum", "The embedding's power at each frequency, now", spectra[-1], names=FREQUENCIES),
            loss_curve(metadata),
        ],
        "metrics": [
            metric("memorised_round", "Round at which 99% of the training sums are right", first_round(train_curve)),
            metric("generalised_round", "Round at which 99% of the held-out sums are right", first_round(test_curve)),
            metric("train_accuracy", "Training sums right", accuracy(model, seen)),
            metric("test_accuracy", "Held-out sums right", accuracy(model, held)),
            metric("test_size", "Held-out sums", len(held)),
            metric("key_share", f"Share of the embedding's power in its {KEY} strongest frequencies", share),
        ],
    }


# The four checks. Each measures something that a broken recipe would get wrong, and says what it saw.

CHECK_DELAY = "Memorising came long before generalising: 99% of the held-out sums right 10 times later than the trained"
CHECK_GENERALISED = "The stored weights answer every training sum and 99% of the held-out ones, as train.py measured"
CHECK_FOURIER = "The embedding is made of a few frequencies: its five strongest carry over 80% of its power"
CHECK_SHARPENED = "The key frequencies grew as it generalised: under half the power at the start, over 80% at the end"
LATER = 10
SHARE = 0.8


def check_delay(model: OneLayer, curves: tuple[list[float], list[float]] | None = None) -> dict:
    """From the curves stored with the weights (or given)."""
    if curves is None:
        metadata = _metadata()
        curves = (json.loads(metadata["train_accuracy_per_round"]), json.loads(metadata["test_accuracy_per_round"]))
    memorised, generalised = first_round(curves[0]), first_round(curves[1])
    return {
        "passed": memorised is not None and generalised is not None and generalised >= LATER * memorised,
        "detail": {"memorised_round": memorised, "generalised_round": generalised},
    }


@torch.no_grad()
def check_generalised(model: OneLayer) -> dict:
    seen, held = split()
    trained, held_out = accuracy(model, seen), accuracy(model, held)
    stored_figure = float(_metadata()["test_accuracy"])
    return {
        "passed": trained == 1.0 and held_out >= 0.99 and held_out == stored_figure,
        "detail": {"train_accuracy": trained, "test_accuracy": held_out, "at_training": stored_figure},
    }


@torch.no_grad()
def check_fourier(model: OneLayer) -> dict:
    """The independent basis's key frequencies against those train.py's FFT found."""
    share, key = key_share(model)
    found = json.loads(_metadata()["key_frequencies"])
    return {
        "passed": share > SHARE and key == found,
        "detail": {"share": share, "frequencies": key, "train_py_found": found},
    }


def check_sharpened(model: OneLayer, spectra: list[list[float]] | None = None) -> dict:
    if spectra is None:
        spectra = json.loads(_metadata()["spectrum_per_round"])
    share = [sum(sorted(s, reverse=True)[:KEY]) for s in spectra]
    return {
        "passed": share[0] < 0.5 and share[-1] > SHARE,
        "detail": {"first_round": share[0], "last_round": share[-1]},
    }


CHECKS = {
    CHECK_DELAY: check_delay,
    CHECK_GENERALISED: check_generalised,
    CHECK_FOURIER: check_fourier,
    CHECK_SHARPENED: check_sharpened,
}


def replay(model: OneLayer | None = None, case: str | None = None) -> dict:
    """Every recorded case and every check, or the case named alone, on the stored weights unless a model is
    given."""
    model = model if model is not None else build_model()
    cases = {case_id: partial(sum_case, model, a, b) for case_id, (a, b) in chosen_sums().items()}
    cases["training"] = partial(training_case, model)
    return kit.cases(cases, {name: partial(check, model) for name, check in CHECKS.items()}, case)


if __name__ == "__main__":
    sys.exit(kit.main(replay, sys.argv[1:]))
