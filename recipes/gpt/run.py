"""Replay the recorded GPT cases and the four numerical checks.

    python run.py          # a readable table; exit status 1 when a check fails
    python run.py --json   # the same replay as JSON

Needs torch, safetensors, model.py, train.py (which makes the held-out problems) and recipe.toml (the
vocabulary) beside this file.
"""

import sys
import tomllib
from functools import partial
from pathlib import Path

import torch
from torch import Tensor

from recipekit import replay as kit
from recipekit import weights as stored
from recipekit.items import loss_curve, matrix, metric, vector
from recipekit.script import package

__package__ = package(__file__, __package__)  # python run.py: its folder is the package the server loads
from .model import DIGITS, EQUALS, GPT, WEIGHTS, build_model, next_token_loss
from .train import answer_loss, exact_match, greedy, held_out, solved

WORDS: list[str] = tomllib.loads(Path(__file__).with_name("recipe.toml").read_text())["lab"]["names"]

# The recorded problems: digits of π, repeated digits, digits in falling order, and digits already in order.
PROBLEMS = {"pi": "3 1 4 1", "repeats": "7 0 7 7", "falling": "9 6 5 2", "in-order": "1 2 5 8"}


def encode(text: str) -> list[int]:
    return [WORDS.index(word) for word in text.split()]


def answered(problem: list[int], model: GPT) -> list[int]:
    """The problem, "=" and the first DIGITS - 1 digits the model writes: the context it reads to write the
    last one, so every answer digit is a prediction in the case."""
    written = greedy(model, torch.tensor([problem]))[0].tolist()
    return solved(torch.tensor([problem]))[0, : DIGITS + 1].tolist() + written[:-1]


def forward(model: GPT, ids: list[int], causal: bool = True) -> tuple[Tensor, list[Tensor]]:
    """Logits (T, vocab) and every block's attention weights (heads, T, T), read by hooks on the softmax."""
    captured: list[Tensor] = []
    hooks = [block.attn.softmax.register_forward_hook(lambda _m, _a, out: captured.append(out[0])) for block in model.h]
    try:
        logits = model(torch.tensor([ids]), causal=causal)
    finally:
        for hook in hooks:
            hook.remove()
    return logits[0], captured


@torch.no_grad()
def run_case(model: GPT, ids: list[int]) -> dict:
    """A case in the manifest's shape: attention of every block and head, the next-token distribution at
    each position, the loss of each position against the next token, and their mean."""
    logits, attention = forward(model, ids)
    probs = logits.softmax(-1)  # (T, vocab)
    matrices = [
        matrix(f"attention_b{b}_h{h}", f"Block {b} · head {h} attention (causal)", weights[h].tolist())
        for b, weights in enumerate(attention)
        for h in range(weights.size(0))
    ]
    matrices.append(matrix("next_token_probs", "Next-token distribution at every position", probs.tolist()))
    result = {
        "label": "Live run · " + " ".join(WORDS[t] for t in ids),
        "matrices": matrices,
        "vectors": [vector("input_ids", "Token IDs", list(ids))],
        "metrics": [],
    }
    if is_problem(ids):
        result["vectors"] += answer_vectors(ids, probs)
        result["metrics"].append(answer_metric(model, ids))
    if len(ids) > 1:
        targets = torch.tensor(ids[1:])
        per_position = -probs[:-1].log().gather(1, targets[:, None])[:, 0]  # (T - 1,)
        result["vectors"].append(vector("position_loss", "Next-token loss at each position", per_position.tolist()))
        loss = next_token_loss(logits[None], torch.tensor([ids]))
        # Every position counts here, the problem's own digits too: they are random, and no model predicts them.
        result["metrics"].append(
            metric(
                "loss",
                "Mean next-token cross entropy over every position, the problem's random digits included",
                loss.item(),
            )
        )
    return result


def answer_vectors(ids: list[int], probs: Tensor) -> list[dict]:
    """The model's answer, read from this run alone (no further forward pass, which What if? would see as more
    calls): its likeliest token after "=" and after each answer digit the input holds; and the right answer, the
    problem's digits in order."""
    return [
        vector(
            "answer",
            "The model's answer (its likeliest token after “=” and after each digit)",
            probs[DIGITS:].argmax(-1),  # (DIGITS,)
        ),
        vector("expected", "The right answer: the problem's digits in order", sorted(ids[:DIGITS])),
    ]


def is_problem(ids: list[int]) -> bool:
    """A whole problem, "=" and three answer digits: the context that writes an answer's last digit."""
    return len(ids) == 2 * DIGITS and ids[DIGITS] == EQUALS and EQUALS not in ids[:DIGITS] + ids[DIGITS + 1 :]


def answer_metric(model: GPT, ids: list[int]) -> dict:
    """The loss of the problem's true answer, each digit read after the true digits before it."""
    sequence = solved(torch.tensor([ids[:DIGITS]]))
    loss = answer_loss(model(sequence[:, :-1]), sequence).item()
    return metric("answer_loss", "Cross entropy of the true answer's digits (the positions the training scored)", loss)


@torch.no_grad()
def test_case(model: GPT) -> dict:
    """The held-out problems: exact match, each answer digit's accuracy, and the training curve."""
    problems = held_out()
    right = greedy(model, problems) == problems.sort(1).values  # (N, DIGITS)
    _, metadata = stored.read(WEIGHTS)
    return {
        "label": f"{len(problems)} held-out problems, never trained on",
        "vectors": [
            vector(
                "digit_accuracy", "Answer digits right, by place (1st to 4th)", right.float().mean(0).tolist(), first=1
            ),
            loss_curve(metadata),
        ],
        "metrics": [
            metric("test_exact_match", "Answers exactly right, held-out problems", right.all(1).float().mean().item()),
            metric("test_size", "Held-out problems", len(problems)),
        ],
    }


# The five checks. Each measures something that a broken recipe would get wrong, and says what it saw.

CHECK_CAUSAL = "A later token never changes an earlier position's logits (without the causal mask it does)"
CHECK_SHIFTED_LOSS = "The loss is the mean cross entropy of each position against the next token"
CHECK_TIED_HEAD = "The LM head shares the token-embedding weight and receives a learning signal"
CHECK_SHAPES = "Logits have shape (1, T, vocab) and every next-token distribution sums to one"
CHECK_ACCURACY = "The stored weights reproduce the held-out exact match measured when they were trained"
RECORDED = "3 1 4 1 = 1 1 3"  # the input the checks read: a problem and its answer so far
CHANGED = 1e-4  # an earlier logit moving by more than this counts as influenced
UNCHANGED = 1e-7  # and by no more than this as untouched


def _earlier_shift(model: GPT, causal: bool) -> float:
    """How far positions 0..T-2 move when the last token changes."""
    ids = encode(RECORDED)
    changed = ids[:-1] + [(ids[-1] + 1) % len(WORDS)]
    before, after = model(torch.tensor([ids]), causal)[0], model(torch.tensor([changed]), causal)[0]
    return (after[:-1] - before[:-1]).abs().max().item()


@torch.no_grad()
def check_causal(model: GPT) -> dict:
    shift, control = _earlier_shift(model, causal=True), _earlier_shift(model, causal=False)
    return {
        "passed": shift <= UNCHANGED and control > CHANGED,
        "detail": {"causal_max_shift": shift, "unmasked_max_shift": control},
    }


@torch.no_grad()
def check_shifted_loss(model: GPT, loss_fn=next_token_loss) -> dict:
    """The recipe's loss equals -log p(next token) averaged by hand; scoring each position against its own
    token (the unshifted mistake) gives another number."""
    ids = torch.tensor([encode(RECORDED)])
    logits = model(ids)
    logp = logits[0].log_softmax(-1)
    by_hand = -logp[:-1].gather(1, ids[0, 1:, None]).mean()
    unshifted = -logp.gather(1, ids[0, :, None]).mean()
    loss = loss_fn(logits, ids)
    return {
        "passed": abs(loss.item() - by_hand.item()) <= 1e-6 and abs(loss.item() - unshifted.item()) > 1e-3,
        "detail": {"loss": loss.item(), "by_hand": by_hand.item(), "unshifted": unshifted.item()},
    }


def check_tied_head(model: GPT) -> dict:
    """One storage for both matrices, and the loss sends gradient to rows only the head uses."""
    shared = model.lm_head.weight.data_ptr() == model.wte.weight.data_ptr()
    ids = encode(RECORDED)
    model.zero_grad()
    with torch.enable_grad():
        next_token_loss(model(torch.tensor([ids])), torch.tensor([ids])).backward()
    grad = model.wte.weight.grad
    unused = [t for t in range(len(WORDS)) if t not in ids]
    signal = grad[unused].norm().item() if grad is not None else 0.0
    model.zero_grad()
    return {"passed": shared and signal > 0.0, "detail": {"shares_storage": shared, "head_only_rows_grad_norm": signal}}


@torch.no_grad()
def check_shapes(model: GPT) -> dict:
    ids = encode(RECORDED)
    logits = model(torch.tensor([ids]))
    sums = logits.softmax(-1).sum(-1)
    worst = (sums - 1).abs().max().item()
    return {
        "passed": list(logits.shape) == [1, len(ids), len(WORDS)] and worst <= 1e-6,
        "detail": {"logits": list(logits.shape), "worst_sum_error": worst},
    }


@torch.no_grad()
def check_accuracy(model: GPT) -> dict:
    _, metadata = stored.read(WEIGHTS)
    replayed = exact_match(model, held_out())
    trained = float(metadata.get("exact_match", "nan"))
    return kit.reproduced(replayed, trained, 0, kit.COUNTED)


CHECKS = {
    CHECK_CAUSAL: check_causal,
    CHECK_SHIFTED_LOSS: check_shifted_loss,
    CHECK_TIED_HEAD: check_tied_head,
    CHECK_SHAPES: check_shapes,
    CHECK_ACCURACY: check_accuracy,
}


def replay(model: GPT | None = None, case: str | None = None) -> dict:
    """Every recorded case and every check, or the case named alone, on the stored weights unless a model is
    given."""
    model = model if model is not None else build_model()
    cases = {case_id: partial(run_case, model, answered(encode(text), model)) for case_id, text in PROBLEMS.items()}
    cases["test-split"] = partial(test_case, model)
    return kit.cases(cases, {name: partial(check, model) for name, check in CHECKS.items()}, case)


if __name__ == "__main__":
    sys.exit(kit.main(replay, sys.argv[1:]))
