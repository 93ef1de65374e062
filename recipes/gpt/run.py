"""Replay the recorded GPT cases and the four numerical checks.

    python run.py          # a readable table; exit status 1 when a check fails
    python run.py --json   # the same replay as JSON

Needs only torch, model.py and recipe.toml (the vocabulary) beside this file.
"""

import json
import sys
import tomllib
from pathlib import Path

import torch
from torch import Tensor

try:
    from .model import GPT, build_model, next_token_loss
except ImportError:  # run as a script: python run.py
    from model import GPT, build_model, next_token_loss

WORDS: list[str] = tomllib.loads(Path(__file__).with_name("recipe.toml").read_text())["lab"]["names"]

PROMPTS = {
    "cat": "the cat sat on the mat .",
    "dog": "a dog ran under the tree .",
    "bird": "the bird sang and the cat slept",
}


def encode(text: str) -> list[int]:
    return [WORDS.index(word) for word in text.split()]


def forward(model: GPT, ids: list[int], causal: bool = True) -> tuple[Tensor, list[Tensor]]:
    """Logits (T, vocab) and every block's attention weights (heads, T, T), read by hooks on the softmax."""
    captured: list[Tensor] = []
    hooks = [block.attn.softmax.register_forward_hook(lambda _m, _a, out: captured.append(out[0]))
             for block in model.h]
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
    matrices = [{"key": f"attention_b{b}_h{h}", "label": f"Block {b} · head {h} attention (causal)",
                 "values": weights[h].tolist()}
                for b, weights in enumerate(attention) for h in range(weights.size(0))]
    matrices.append({"key": "next_token_probs", "label": "Next-token distribution at every position",
                     "values": probs.tolist()})
    result = {"label": "Live run · " + " ".join(WORDS[t] for t in ids), "matrices": matrices,
              "vectors": [{"key": "input_ids", "label": "Token IDs", "values": list(ids)}], "metrics": []}
    if len(ids) > 1:
        targets = torch.tensor(ids[1:])
        per_position = -probs[:-1].log().gather(1, targets[:, None])[:, 0]  # (T - 1,)
        result["vectors"].append({"key": "position_loss", "label": "Next-token loss at each position",
                                  "values": per_position.tolist()})
        loss = next_token_loss(logits[None], torch.tensor([ids]))
        result["metrics"].append({"key": "loss", "label": "Mean next-token cross entropy", "value": loss.item()})
    return result


# The four checks. Each measures something that a broken recipe would get wrong, and says what it saw.

CHECK_CAUSAL = "A later token never changes an earlier position's logits (without the causal mask it does)"
CHECK_SHIFTED_LOSS = "The loss is the mean cross entropy of each position against the next token"
CHECK_TIED_HEAD = "The LM head shares the token-embedding weight and receives a learning signal"
CHECK_SHAPES = "Logits have shape (1, T, vocab) and every next-token distribution sums to one"
CHANGED = 1e-4  # an earlier logit moving by more than this counts as influenced
UNCHANGED = 1e-7  # and by no more than this as untouched


def _earlier_shift(model: GPT, causal: bool) -> float:
    """How far positions 0..T-2 move when the last token changes."""
    ids = encode(PROMPTS["cat"])
    changed = ids[:-1] + [(ids[-1] + 1) % len(WORDS)]
    before, after = model(torch.tensor([ids]), causal)[0], model(torch.tensor([changed]), causal)[0]
    return (after[:-1] - before[:-1]).abs().max().item()


@torch.no_grad()
def check_causal(model: GPT) -> dict:
    shift, control = _earlier_shift(model, causal=True), _earlier_shift(model, causal=False)
    return {"passed": shift <= UNCHANGED and control > CHANGED,
            "detail": {"causal_max_shift": shift, "unmasked_max_shift": control}}


@torch.no_grad()
def check_shifted_loss(model: GPT, loss_fn=next_token_loss) -> dict:
    """The recipe's loss equals -log p(next token) averaged by hand; scoring each position against its own
    token (the unshifted mistake) gives another number."""
    ids = torch.tensor([encode(PROMPTS["cat"])])
    logits = model(ids)
    logp = logits[0].log_softmax(-1)
    by_hand = -logp[:-1].gather(1, ids[0, 1:, None]).mean()
    unshifted = -logp.gather(1, ids[0, :, None]).mean()
    loss = loss_fn(logits, ids)
    return {"passed": abs(loss.item() - by_hand.item()) <= 1e-6 and abs(loss.item() - unshifted.item()) > 1e-3,
            "detail": {"loss": loss.item(), "by_hand": by_hand.item(), "unshifted": unshifted.item()}}


def check_tied_head(model: GPT) -> dict:
    """One storage for both matrices, and the loss sends gradient to rows only the head uses."""
    shared = model.lm_head.weight.data_ptr() == model.wte.weight.data_ptr()
    ids = encode(PROMPTS["cat"])
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
    ids = encode(PROMPTS["cat"])
    logits = model(torch.tensor([ids]))
    sums = logits.softmax(-1).sum(-1)
    worst = (sums - 1).abs().max().item()
    return {"passed": list(logits.shape) == [1, len(ids), len(WORDS)] and worst <= 1e-6,
            "detail": {"logits": list(logits.shape), "worst_sum_error": worst}}


CHECKS = {CHECK_CAUSAL: check_causal, CHECK_SHIFTED_LOSS: check_shifted_loss, CHECK_TIED_HEAD: check_tied_head,
          CHECK_SHAPES: check_shapes}


def replay(model: GPT | None = None) -> dict:
    """Every recorded case and every check, on the seeded model unless one is given."""
    model = model if model is not None else build_model()
    return {
        "cases": {case_id: run_case(model, encode(text)) for case_id, text in PROMPTS.items()},
        "checks": [{"name": name, **check(model)} for name, check in CHECKS.items()],
    }


def main(argv: list[str]) -> int:
    torch.use_deterministic_algorithms(True)
    result = replay()
    if "--json" in argv:
        print(json.dumps(result, indent=2))
    else:
        for case_id, case in result["cases"].items():
            probs = next(m for m in case["matrices"] if m["key"] == "next_token_probs")["values"][-1]
            top = max(range(len(probs)), key=probs.__getitem__)
            loss = case["metrics"][0]["value"]
            print(f"{case_id:6} {PROMPTS[case_id]:34} loss {loss:.4f}  next: {WORDS[top]!r} ({probs[top]:.3f})")
        for check in result["checks"]:
            print(f"[{'PASS' if check['passed'] else 'FAIL'}] {check['name']}  {check['detail']}")
    return 0 if all(check["passed"] for check in result["checks"]) else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
