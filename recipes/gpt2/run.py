"""Replay: the recorded DataLab cases on the server's checkpoint, and checks of how GPT-2 computes.

    python run.py /path/to/checkpoint     # the cases and checks on that checkpoint
    python run.py                         # the checks alone, on random weights of gpt2 small's shape

Without a checkpoint there is nothing trained to record: the checks still hold for any weights.
"""

import sys
from dataclasses import replace

import torch

from recipekit.items import matrix, metric, vector
from recipekit.script import package

__package__ = package(__file__, __package__)  # python run.py: its folder is the package the server loads
from .lab import Loaded, load, patched, patching, probe_weights, trace, traced
from .model import GPT2, GPT2Config, Vocabulary

# Each recorded case: a prompt, and the prompt it is patched from (as many tokens, the smallest digit changed). Any
# GPT-2-layout checkpoint reads them, the project's own digit sorter (recipe.toml's [checkpoint.made]) included.
CASES = {
    "pi": ("3 1 4 1 =", "3 5 4 6 ="),
    "repeats": ("7 0 7 7 =", "7 9 7 7 ="),
    "falling": ("9 6 5 2 =", "9 6 5 8 ="),
}
TOP = 10  # next tokens recorded per case
CHECK_IDS = [464, 3139, 286, 4881, 318, 6342, 13, 383]  # an 8-token sequence for the weight-free checks


def case(answer: dict) -> dict:
    """A trace as recorded vectors, matrices and metrics."""
    last = answer["attention"][-1]  # (heads, T, T): the last block's
    names = [f"{t['index']}:{t['text']}" for t in answer["tokens"]]
    top = [t["text"] for t in answer["top"]]  # the next tokens as text, most likely first
    return {
        "vectors": [
            vector(
                "input_ids",
                "Token ids",
                [t["id"] for t in answer["tokens"]],
                names=[t["text"] for t in answer["tokens"]],
            ),
            vector("top_ids", f"Top {TOP} next token ids", [t["id"] for t in answer["top"]], names=top),
            vector(
                "top_probabilities", f"Top {TOP} probabilities", [t["probability"] for t in answer["top"]], names=top
            ),
            vector("top_logits", f"Top {TOP} logits", [t["logit"] for t in answer["top"]], names=top),
            vector(
                "lens_probability",
                "Probability of the prediction after each block (logit lens)",
                [lens["probability"] for lens in answer["lens"]],
            ),
            vector(
                "residual_last",
                "The residual stream at the last token after the last block",
                answer["residual"][-1]["last"],
            ),
        ],
        "matrices": [
            matrix(
                "residual_norms",
                "Norm of the residual stream, by block and token",
                [r["norms"] for r in answer["residual"]],
                rows=[r["name"] for r in answer["residual"]],
                columns=names,
            ),
            matrix(
                "attention_last_head0",
                "Last block, head 1: attention (query rows, key columns)",
                last[0],
                rows=names,
                columns=names,
            ),
        ],
        "metrics": [
            metric("prediction_id", "Predicted next token id", answer["prediction"]["id"]),
            metric("confidence", "Probability of the prediction", answer["prediction"]["probability"]),
        ],
    }


@torch.no_grad()
def checks(model: GPT2, answers: list[tuple[list[int], dict]], patches: list[dict]) -> list[dict]:
    """What holds for any weights: the trace is the model's forward, the logit lens's last row is the prediction,
    attention is causal and sums to one, and patching a prompt from itself moves nothing."""

    def check(name: str, worst: float, tolerance: float) -> dict:
        return {
            "name": name,
            "passed": worst < tolerance,
            "detail": {"worst_difference": worst, "tolerance": tolerance},
        }

    # Relative to the logit's size: random weights of gpt2 small's shape give logits in the hundreds, whose last
    # float32 digits differ between an unembedding of one position and of all of them.
    forward = max(
        abs(model(torch.tensor([ids]))[0, -1, t["id"]].item() - t["logit"]) / max(1.0, abs(t["logit"]))
        for ids, a in answers
        for t in a["top"]
    )
    lens = max(abs(a["lens"][-1]["probability"] - a["prediction"]["probability"]) for _, a in answers)
    rows = max(abs(sum(row) - 1) for _, a in answers for block in a["attention"] for head in block for row in head)
    future = max(
        abs(w)
        for _, a in answers
        for block in a["attention"]
        for head in block
        for i, row in enumerate(head)
        for w in row[i + 1 :]
    )
    itself = max(abs(v - p["clean"]) for p in patches for row in p["patched"] for v in row)
    return [
        check(
            "The trace's logits are the model's own forward over the whole prompt (relative difference)", forward, 1e-5
        ),
        check("The logit lens after the last block is the prediction itself", lens, 1e-6),
        check("Every head's attention from every token sums to one", rows, 1e-5),
        check("No token attends to a token after it (the mask is causal)", future, 1e-12),
        check("Patching every head of a prompt from the prompt itself moves nothing", itself, 1e-5),
    ]


def replay(checkpoint: str | None = None, case: str | None = None) -> dict:
    """The recorded cases on the checkpoint and the checks, or the case named alone; the checks alone without a
    checkpoint (on random weights of gpt2 small's shape)."""
    if checkpoint is None:
        if case is not None:
            raise KeyError(f"no recorded case {case!r}: without a checkpoint there is none")
        return {"cases": {}, "checks": _random_checks()}
    if case is not None:
        if case not in CASES:
            raise KeyError(f"no recorded case {case!r}; the cases are {', '.join(CASES)}")
        return {"cases": {case: shown(trace(checkpoint, CASES[case][0], TOP), case)}, "checks": []}
    answers = {case_id: trace(checkpoint, prompt, TOP) for case_id, (prompt, _) in CASES.items()}
    patches = [patching(checkpoint, prompt, prompt) for prompt, _ in CASES.values()]
    ids = [[t["id"] for t in a["tokens"]] for a in answers.values()]
    return {
        "cases": {case_id: shown(answer, case_id) for case_id, answer in answers.items()},
        "checks": checks(load(checkpoint).model, list(zip(ids, answers.values(), strict=True)), patches),
    }


def _random_checks() -> list[dict]:
    """The checks on gpt2 small's shape (two blocks) with seeded random weights, the tokens named by their ids."""
    from tokenizers import Tokenizer
    from tokenizers.models import WordLevel

    torch.manual_seed(0)
    model = GPT2(GPT2Config(n_layer=2)).eval()
    names = Tokenizer(WordLevel({str(i): i for i in range(model.config.vocab_size)}, unk_token="0"))
    unprobed = Loaded(model, Vocabulary(names), "random weights")
    loaded = replace(unprobed, probe=probe_weights(unprobed))  # as a checkpoint's is, where it is loaded
    answer = traced(loaded, CHECK_IDS, TOP)
    return checks(model, [(CHECK_IDS, answer)], [patched(loaded, CHECK_IDS, CHECK_IDS)])


def shown(answer: dict, case_id: str) -> dict:
    """A trace as the recorded case, with the lab request that reproduces it."""
    return case(answer) | {"request": {"prompt": CASES[case_id][0], "top_k": TOP}}


if __name__ == "__main__":
    torch.manual_seed(0)
    result = replay(sys.argv[1] if len(sys.argv) > 1 else None)
    for case_id, found in result["cases"].items():
        metrics = {m["key"]: m["value"] for m in found["metrics"]}
        print(f"{case_id}: {CASES[case_id][0]!r} -> id {metrics['prediction_id']} (p {metrics['confidence']:.3f})")
    for check in result["checks"]:
        print(("PASS " if check["passed"] else "FAIL ") + check["name"], check["detail"])
